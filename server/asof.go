package server

// As-of reads: a dataset's vintages (lake commits) resolved from a WHEN,
// opened through a bounded cache, and read like the current snapshot.
// Used by the HTTP routes (vintages.go), the hub's version 3 messages
// (asof_hub.go) and `es get --asof` on a home without a server.

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
	"github.com/energyscope/energyscope/server/lake"
)

// Errors of as-of reads, besides lake's (lake.ErrUnknownVintage,
// lake.ErrBeforeFirstVintage, lake.ErrNoDataset), ErrLakeUnavailable (the
// catalog or warehouse cannot be read now; the server keeps serving what
// it has mapped) and localcache.ErrNotFound (a series no vintage has).
// Check with errors.Is.
var (
	// ErrNoLake: the server keeps no vintages (it runs without a lake).
	// HTTP 503.
	ErrNoLake = errors.New("this server keeps no vintages (it runs without a lake)")
	// ErrBadWhen: an as-of WHEN that is no time, date, snapshot id or tag
	// name (empty, too long, control characters, an impossible date).
	// It matches ErrBadInput. HTTP 400.
	ErrBadWhen = inputError{errors.New("bad as-of")}
)

// OpenVintageFunc opens the serving snapshot of vintage v of a dataset:
// (*lake.Lake).OpenSnapshot, which maps the Puffin blobs in place.
type OpenVintageFunc func(ctx context.Context, dataset string, v lake.Vintage, o snapshot.Options) (*snapshot.Snapshot, error)

// AsOfOptions configure NewAsOf. The zero value gives the defaults.
type AsOfOptions struct {
	// MaxOpen bounds the vintages kept open (mapped); default 64.
	MaxOpen int
	// MaxBytes bounds the bytes of the files of the vintages kept open;
	// default 8 GiB. The vintage being read stays open (once) even if it
	// alone is larger.
	MaxBytes int64
	// ListTTL: a dataset's list of vintages is read from the catalog again
	// when older (another server may have committed); default 10 s.
	// Current, if set, makes it reload as soon as the dataset's current
	// snapshot is not the list's newest vintage.
	ListTTL time.Duration
	// Current returns the es snapshot id a dataset serves now ("" if
	// none); nil: only ListTTL.
	Current func(dataset string) string
	// Open opens a vintage; nil: the lake's OpenSnapshot (in place from
	// a file:// warehouse, else a verified downloaded copy).
	Open OpenVintageFunc
	// Tail is the snapshot.Options of the opened vintages.
	Tail snapshot.Options
}

// AsOf serves as-of reads from a lake. Safe for concurrent use.
type AsOf struct {
	lake *lake.Lake
	o    AsOfOptions

	mu    sync.Mutex
	lists map[string]*vintageList
	snaps map[vintageKey]*vintageEntry
	lru   list.List // of *vintageEntry, most recent first
	bytes int64

	hits, misses, evictions, faults atomic.Int64
}

type vintageList struct {
	vs     []lake.Vintage
	loaded time.Time
}

type vintageKey struct {
	dataset string
	iceberg int64
}

// vintageEntry is one opened (or opening) vintage. The cache holds the
// opener's reference of snap; readers take their own (TryRef), so an
// evicted vintage stays mapped until its last reader lets go.
type vintageEntry struct {
	key   vintageKey
	ready chan struct{} // closed when snap or err is set
	snap  *snapshot.Snapshot
	err   error
	bytes int64
	elem  *list.Element // nil while opening or once evicted
}

// NewAsOf returns as-of reads over l.
func NewAsOf(l *lake.Lake, o AsOfOptions) (*AsOf, error) {
	if o.MaxOpen <= 0 {
		o.MaxOpen = 64
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 8 << 30
	}
	if o.ListTTL <= 0 {
		o.ListTTL = 10 * time.Second
	}
	a := &AsOf{lake: l, o: o, lists: map[string]*vintageList{}, snaps: map[vintageKey]*vintageEntry{}}
	if a.o.Open == nil {
		a.o.Open = l.OpenSnapshot
	}
	return a, nil
}

// lakeErr types an error of the lake: its sentinels stay as they are,
// anything else (the catalog or the warehouse could not be read) becomes
// ErrLakeUnavailable.
func lakeErr(err error) error {
	if err == nil || errors.Is(err, lake.ErrNoDataset) || errors.Is(err, lake.ErrUnknownVintage) ||
		errors.Is(err, lake.ErrBeforeFirstVintage) || errors.Is(err, lake.ErrNoServingIndex) ||
		errors.Is(err, context.Canceled) || errors.Is(err, ErrBadWhen) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrLakeUnavailable, err)
}

// Vintages lists a dataset's retained vintages, oldest first (cached; see
// AsOfOptions.ListTTL). When the catalog cannot be read, the last list
// read answers (as-of reads go on from what is mapped); without one it is
// ErrLakeUnavailable.
func (a *AsOf) Vintages(ctx context.Context, dataset string) ([]lake.Vintage, error) {
	a.mu.Lock()
	l := a.lists[dataset]
	a.mu.Unlock()
	if l != nil && a.fresh(dataset, l) {
		return l.vs, nil
	}
	vs, err := a.lake.Vintages(ctx, dataset)
	if err != nil {
		err = lakeErr(err)
		if l != nil && errors.Is(err, ErrLakeUnavailable) {
			return l.vs, nil
		}
		return nil, err
	}
	a.mu.Lock()
	a.lists[dataset] = &vintageList{vs: vs, loaded: time.Now()}
	a.mu.Unlock()
	return vs, nil
}

// fresh says whether a cached list may answer: younger than ListTTL, and
// (with Current) its newest serving vintage is what the dataset serves,
// or it was read less than a second ago (a dataset whose current
// snapshot is not in the lake must not read the catalog per request).
func (a *AsOf) fresh(dataset string, l *vintageList) bool {
	age := time.Since(l.loaded)
	if age > a.o.ListTTL {
		return false
	}
	if a.o.Current == nil || age < time.Second {
		return true
	}
	cur := a.o.Current(dataset)
	for i := len(l.vs) - 1; i >= 0; i-- {
		if l.vs[i].Serving {
			return l.vs[i].Snapshot == cur
		}
	}
	return cur == ""
}

// Invalidate makes the next use of a dataset's list of vintages read the
// catalog again (after a tag, a rollback or an expiry); the old list stays
// as the answer while the catalog cannot be read.
func (a *AsOf) Invalidate(dataset string) {
	a.mu.Lock()
	if l := a.lists[dataset]; l != nil {
		a.lists[dataset] = &vintageList{vs: l.vs}
	}
	a.mu.Unlock()
}

// Observe takes vs, a dataset's retained vintages as a table just read
// from the catalog has them (the server's poll of the lake's heads), and
// forgets the vintages of the cached list that table no longer holds
// although they are older than its newest (another server expired
// them): they leave the list and, if opened, the cache. Once this server
// has seen a vintage go, no as-of read answers from it, even though its
// mapping or downloaded copy is still at hand (Resolve says
// lake.ErrUnknownVintage, naming it); readers holding one keep it until
// they let go. Nothing else changes: vintages newer than vs (committed
// after that table was read) and new tags are learnt as before, when the
// list is read again (ListTTL, Current).
func (a *AsOf) Observe(dataset string, vs []lake.Vintage) {
	if len(vs) == 0 {
		return
	}
	kept := make(map[int64]bool, len(vs))
	var newest int64
	for _, v := range vs {
		kept[v.IcebergSnapshot] = true
		newest = max(newest, v.SequenceNumber)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	l := a.lists[dataset]
	if l == nil {
		return // nothing resolved yet, so nothing opened
	}
	gone := map[int64]bool{}
	var left []lake.Vintage
	for _, v := range l.vs {
		if !kept[v.IcebergSnapshot] && v.SequenceNumber <= newest {
			gone[v.IcebergSnapshot] = true
			continue
		}
		left = append(left, v)
	}
	if len(gone) == 0 {
		return
	}
	a.lists[dataset] = &vintageList{vs: left, loaded: l.loaded}
	for k, e := range a.snaps {
		if k.dataset == dataset && gone[k.iceberg] && e.elem != nil {
			a.evictLocked(e)
		}
	}
}

// MaxWhen bounds the length of an as-of WHEN.
const MaxWhen = 256

var dateLikeRE = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}`)

// checkWhen refuses a WHEN that cannot name anything (ErrBadWhen).
func checkWhen(when string) error {
	if when == "" || len(when) > MaxWhen {
		return fmt.Errorf("%w: want an RFC 3339 time, a date, an es snapshot id or a tag (1..%d bytes)", ErrBadWhen, MaxWhen)
	}
	for _, r := range when {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return fmt.Errorf("%w: %q has control or invalid characters", ErrBadWhen, when)
		}
	}
	if dateLikeRE.MatchString(when) {
		if _, ok := lake.ParseWhen(when); !ok {
			return fmt.Errorf("%w: %q is neither a date YYYY-MM-DD nor an RFC 3339 time", ErrBadWhen, when)
		}
	}
	return nil
}

// resolveIn is lake.Resolve over a listed history (the same rules, kept
// equal by TestResolveAgreesWithTheLake): a time, a date or an es snapshot
// id as lake.ResolveListed; else a tag; else a decimal Iceberg snapshot id.
func resolveIn(vs []lake.Vintage, dataset, when string) (lake.Vintage, error) {
	if v, ok, err := lake.ResolveListed(vs, dataset, when); ok {
		return v, err
	}
	for _, v := range vs {
		if slices.Contains(v.Tags, when) {
			return v, nil
		}
	}
	if id, err := strconv.ParseInt(when, 10, 64); err == nil {
		for _, v := range vs {
			if v.IcebergSnapshot == id {
				return v, nil
			}
		}
	}
	return lake.Vintage{}, fmt.Errorf("%w: %q is not a time, date, snapshot id or tag of dataset %s", lake.ErrUnknownVintage, when, dataset)
}

// Resolve finds the vintage WHEN names (see resolveIn). A vintage without
// a serving index (another engine's commit, named by tag or Iceberg id)
// is *lake.NoServingIndexError.
func (a *AsOf) Resolve(ctx context.Context, dataset, when string) (lake.Vintage, error) {
	if err := checkWhen(when); err != nil {
		return lake.Vintage{}, err
	}
	vs, err := a.Vintages(ctx, dataset)
	if err != nil {
		return lake.Vintage{}, err
	}
	v, err := resolveIn(vs, dataset, when)
	if err != nil {
		return v, err
	}
	if !v.Serving {
		return v, &lake.NoServingIndexError{Dataset: dataset, IcebergSnapshot: v.IcebergSnapshot, Reason: "not published by es"}
	}
	return v, nil
}

// Acquire returns vintage v of dataset opened, with a reference the
// caller drops with Unref. Concurrent first touches of one vintage open
// it once.
func (a *AsOf) Acquire(ctx context.Context, dataset string, v lake.Vintage) (*snapshot.Snapshot, error) {
	k := vintageKey{dataset, v.IcebergSnapshot}
	for {
		a.mu.Lock()
		e := a.snaps[k]
		if e == nil {
			e = &vintageEntry{key: k, ready: make(chan struct{})}
			a.snaps[k] = e
			a.mu.Unlock()
			a.misses.Add(1)
			a.open(ctx, e, dataset, v)
		} else {
			if e.elem != nil {
				a.lru.MoveToFront(e.elem)
			}
			a.mu.Unlock()
			a.hits.Add(1)
		}
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e.err != nil {
			return nil, e.err
		}
		if e.snap.TryRef() {
			return e.snap, nil
		}
		// Evicted and unmapped between the lookup and TryRef: open again.
	}
}

// open opens e and files it in the cache (or, on failure, forgets it so
// that the next touch tries again), evicting the least recently used
// vintages that no longer fit.
func (a *AsOf) open(ctx context.Context, e *vintageEntry, dataset string, v lake.Vintage) {
	snap, err := a.o.Open(ctx, dataset, v, a.o.Tail)
	a.mu.Lock()
	defer a.mu.Unlock()
	defer close(e.ready)
	if err != nil {
		e.err = lakeErr(err)
		delete(a.snaps, e.key)
		return
	}
	e.snap = snap
	for _, f := range snap.Manifest.Files {
		e.bytes += f.Size
	}
	e.elem = a.lru.PushFront(e)
	a.bytes += e.bytes
	for a.lru.Len() > 1 && (a.lru.Len() > a.o.MaxOpen || a.bytes > a.o.MaxBytes) {
		a.evictLocked(a.lru.Back().Value.(*vintageEntry))
	}
}

// evictLocked drops the cache's reference of e; readers holding one keep
// it mapped until they let go. a.mu is held.
func (a *AsOf) evictLocked(e *vintageEntry) {
	a.lru.Remove(e.elem)
	e.elem = nil
	a.bytes -= e.bytes
	delete(a.snaps, e.key)
	a.evictions.Add(1)
	e.snap.Unref()
}

// AsOfStats are the cache's counters.
type AsOfStats struct {
	Open                    int
	Bytes                   int64
	Hits, Misses, Evictions int64
	Faults                  int64
}

// Stats returns the cache's counters.
func (a *AsOf) Stats() AsOfStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return AsOfStats{Open: a.lru.Len(), Bytes: a.bytes, Hits: a.hits.Load(), Misses: a.misses.Load(), Evictions: a.evictions.Load(), Faults: a.faults.Load()}
}

// Close evicts every vintage (readers still holding one keep it until
// they let go).
func (a *AsOf) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.lru.Len() > 0 {
		a.evictLocked(a.lru.Back().Value.(*vintageEntry))
	}
}

// guardFault turns a memory fault while reading a vintage's mapping (its
// file shrank underneath) into an error, counted in faults if set.
// Deferred with the old SetPanicOnFault value:
//
//	defer guardFault(debug.SetPanicOnFault(true), &err, &a.faults)
func guardFault(old bool, err *error, faults *atomic.Int64) {
	debug.SetPanicOnFault(old)
	p := recover()
	if p == nil {
		return
	}
	fe, ok := p.(interface {
		error
		Addr() uintptr
	})
	if !ok {
		panic(p)
	}
	if faults != nil {
		faults.Add(1)
	}
	*err = &format.CorruptionError{File: "mapped vintage file", Offset: -1,
		Err: fmt.Errorf("memory fault at %#x reading a vintage's mapping (the file shrank or its disk failed): %w", fe.Addr(), fe)}
}

// View calls fn with the points of series id in [from, to] (unix seconds,
// bucket starts; snapshot.MinTime/MaxTime for open ends) as vintage v of
// dataset had them. The points are valid only during fn, which runs under
// a fault guard. A series v does not have is localcache.ErrNotFound.
func (a *AsOf) View(ctx context.Context, dataset string, v lake.Vintage, id string, from, to int64, fn func(localcache.Result) error) (err error) {
	snap, err := a.Acquire(ctx, dataset, v)
	if err != nil {
		return err
	}
	defer snap.Unref()
	defer guardFault(debug.SetPanicOnFault(true), &err, &a.faults)
	row, ok := snap.Lookup(id)
	if !ok {
		return fmt.Errorf("%w: %q in dataset %s as of vintage %s", localcache.ErrNotFound, id, dataset, v.Snapshot)
	}
	pts, err := snap.Get(row, from, to)
	if err != nil {
		return fmt.Errorf("get %s as of %s: %w", id, v.Snapshot, err)
	}
	return fn(localcache.Result{Dataset: dataset, Frequency: snap.Frequency(row), Points: pts})
}

// Revision is the value one period had in one vintage (Present false: no
// value for the period in that vintage).
type Revision struct {
	Vintage lake.Vintage `json:"vintage"`
	Value   float64      `json:"value"`
	Present bool         `json:"present"`
}

// ParsePeriod reads a revisions period: a date YYYY-MM-DD (midnight UTC)
// or an RFC 3339 time, as unix seconds.
func ParsePeriod(s string) (int64, error) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t.Unix(), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.Unix(), nil
	}
	return 0, inputError{fmt.Errorf("period %q: want a date YYYY-MM-DD or an RFC 3339 time", s)}
}

// Revisions lists every value the period (unix seconds; normalized to the
// series' bucket in each vintage, so 2026-09-15 of a monthly series is
// its 2026-09-01) of series id had across the dataset's retained serving
// vintages, oldest first. A series in none of them is
// localcache.ErrNotFound.
func (a *AsOf) Revisions(ctx context.Context, dataset, id string, period int64) ([]Revision, error) {
	vs, err := a.Vintages(ctx, dataset)
	if err != nil {
		return nil, err
	}
	var out []Revision
	found := false
	for _, v := range vs {
		if !v.Serving {
			continue
		}
		r, ok, err := a.revision(ctx, dataset, v, id, period)
		if err != nil {
			return nil, err
		}
		found = found || ok
		out = append(out, r)
	}
	if !found {
		return nil, fmt.Errorf("%w: %q in any retained vintage of dataset %s", localcache.ErrNotFound, id, dataset)
	}
	return out, nil
}

// revision reads one vintage's value of the period; ok is whether the
// vintage has the series at all.
func (a *AsOf) revision(ctx context.Context, dataset string, v lake.Vintage, id string, period int64) (r Revision, ok bool, err error) {
	r.Vintage = v
	snap, err := a.Acquire(ctx, dataset, v)
	if err != nil {
		return r, false, err
	}
	defer snap.Unref()
	defer guardFault(debug.SetPanicOnFault(true), &err, &a.faults)
	row, ok := snap.Lookup(id)
	if !ok {
		return r, false, nil
	}
	p := snap.Frequency(row).Normalize(period)
	pts, err := snap.Get(row, p, p)
	if err != nil {
		return r, true, fmt.Errorf("get %s as of %s: %w", id, v.Snapshot, err)
	}
	for i := 0; i < pts.Len(); i++ {
		if pts.Unix(i) == p {
			r.Value, r.Present = pts.Values[i], true
		}
	}
	return r, true, nil
}
