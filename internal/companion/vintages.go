package companion

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/energyscope/energyscope/functions"
	"github.com/energyscope/energyscope/internal/wiring"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/sync/client"
	"github.com/energyscope/energyscope/sync/protocol"
)

// Vintages (issue 12): the companion answers ES.Get(..., "asof=WHEN") from
// the vintages it holds (the snapshot it serves, when nothing live was
// applied on top of it, and the vintages it fetched before, in its
// bounded cache under the home), and otherwise asks the server over the
// sync connection which vintage WHEN names, downloads that vintage's
// files with the verified fetch into the cache, and answers from it.
// ES.Revisions always asks the server; its answers are kept a minute.

// Timeouts of the requests to the server.
const (
	// vintageTimeout bounds resolving and downloading one vintage.
	vintageTimeout = 2 * time.Minute
	// revisionsTimeout bounds one revisions request.
	revisionsTimeout = 30 * time.Second
	// revisionsTTL is how long a revisions answer is reused.
	revisionsTTL = time.Minute
	// maxRevisionsCached bounds the revisions answers kept.
	maxRevisionsCached = 1024
)

// vintages is the companion's side of as-of reads and revisions.
type vintages struct {
	c     *Companion
	cache *localcache.VintageCache

	// fetch serializes the fetches from the server: a sheet recalculating
	// a hundred cells as of one day asks the server once, and the others
	// find the vintage cached when they get the lock.
	fetch sync.Mutex

	mu struct {
		sync.Mutex
		// resolved: dataset + "\x00" + WHEN -> the vintage (es snapshot
		// id) it names, for WHENs whose answer cannot change: a snapshot
		// id, an Iceberg id, a tag, or a time that resolved to a vintage
		// the server says is not its newest.
		resolved map[string]string
		revs     map[string]revisionsEntry
	}
}

type revisionsEntry struct {
	at   time.Time
	revs []functions.Revision
}

func newVintages(c *Companion, cache *localcache.VintageCache) *vintages {
	v := &vintages{c: c, cache: cache}
	v.mu.resolved = map[string]string{}
	v.mu.revs = map[string]revisionsEntry{}
	return v
}

// source is what the bridge reads: the store, and the vintages.
type source struct {
	wiring.Source
	v *vintages
}

var _ functions.VintageSource = source{}

// GetAsOf implements functions.VintageSource.
func (s source) GetAsOf(id string, asof functions.AsOf, from, to int64) ([]int64, []float64, error) {
	info, err := s.Source.Info(id)
	if err != nil {
		return nil, nil, err // the series is looked up among today's; ErrNotFound wrapped
	}
	return s.v.get(info.Dataset, id, asof, from, to)
}

// Revisions implements functions.VintageSource.
func (s source) Revisions(id string, period int64) ([]functions.Revision, error) {
	info, err := s.Source.Info(id)
	if err != nil {
		return nil, err
	}
	return s.v.revisions(info.Dataset, info.ID, info.Frequency, period)
}

// get reads series id of dataset as of the vintage asof names.
func (v *vintages) get(dataset, id string, asof functions.AsOf, from, to int64) ([]int64, []float64, error) {
	for attempt := 0; ; attempt++ {
		vid := v.held(dataset, asof)
		if vid == "" {
			var err error
			if vid, err = v.fetchVintage(dataset, asof); err != nil {
				return nil, nil, err
			}
		}
		if p, vals, ok, err := v.fromStore(dataset, vid, id, from, to); ok {
			return p, vals, err
		}
		snap, _, err := v.cache.Acquire(dataset, vid)
		if errors.Is(err, localcache.ErrNoVintage) && attempt == 0 {
			continue // evicted (or the store moved on) since: fetch it again
		}
		if err != nil {
			return nil, nil, &functions.VintageError{AsOf: asof.Text, Err: err}
		}
		defer snap.Unref()
		row, ok := snap.Lookup(id)
		if !ok {
			return nil, nil, fmt.Errorf("series %q is not in vintage %s of %s: %w", id, vid, dataset, functions.ErrNotFound)
		}
		pts, err := snap.Get(row, max(from, functions.MinTime), min(to, functions.MaxTime))
		if err != nil {
			return nil, nil, err
		}
		// The points alias the mapping: copy them out before the reference goes.
		n := pts.Len()
		periods := make([]int64, n)
		for i := range periods {
			periods[i] = pts.Unix(i)
		}
		return periods, append([]float64(nil), pts.Values...), nil
	}
}

// held returns the vintage asof names if the companion can tell without
// the server and holds it (in the cache, or as the store's snapshot),
// else "".
func (v *vintages) held(dataset string, asof functions.AsOf) string {
	v.mu.Lock()
	vid := v.mu.resolved[dataset+"\x00"+asof.Text]
	v.mu.Unlock()
	if vid == "" {
		switch asof.Kind {
		case functions.AsOfSnapshot:
			vid = asof.Text
		case functions.AsOfTag:
			if m, ok := v.cache.Find(dataset, func(m localcache.VintageMeta) bool { return slices.Contains(m.Tags, asof.Text) }); ok {
				vid = m.Snapshot
			}
		case functions.AsOfIceberg:
			if m, ok := v.cache.Find(dataset, func(m localcache.VintageMeta) bool { return strconv.FormatInt(m.Iceberg, 10) == asof.Text }); ok {
				vid = m.Snapshot
			}
		}
	}
	if vid != "" && (v.cache.Has(dataset, vid) || v.storeIs(dataset, vid)) {
		return vid
	}
	return ""
}

// storeIs reports whether the store serves exactly vintage vid of dataset:
// that snapshot, with no live records applied on top of it.
func (v *vintages) storeIs(dataset, vid string) bool {
	if _, id, _, err := v.c.store.State(dataset); err != nil || id != vid {
		return false // the cheap check first: Pending copies the records
	}
	snap, _, recs, err := v.c.store.Pending(dataset)
	return err == nil && snap == vid && len(recs) == 0
}

// fromStore reads id from the store when it serves exactly vintage vid
// (ok false otherwise). A record applied while it reads makes it give up.
func (v *vintages) fromStore(dataset, vid, id string, from, to int64) (p []int64, vals []float64, ok bool, err error) {
	if !v.storeIs(dataset, vid) {
		return nil, nil, false, nil
	}
	_, _, seq0, err := v.c.store.State(dataset)
	if err != nil {
		return nil, nil, false, nil
	}
	p, vals, err = v.c.store.Copy(id, from, to)
	if _, snap, seq1, err2 := v.c.store.State(dataset); err2 != nil || snap != vid || seq1 != seq0 {
		return nil, nil, false, nil
	}
	if errors.Is(err, localcache.ErrNotFound) {
		err = fmt.Errorf("series %q is not in vintage %s of %s: %w", id, vid, dataset, functions.ErrNotFound)
	}
	return p, vals, true, err
}

// fetchVintage asks the server which vintage asof names and, unless the
// companion holds it, downloads it into the cache. It returns the
// vintage's es snapshot id.
func (v *vintages) fetchVintage(dataset string, asof functions.AsOf) (string, error) {
	v.fetch.Lock()
	defer v.fetch.Unlock()
	if vid := v.held(dataset, asof); vid != "" {
		return vid, nil // fetched while this call waited
	}
	eng := v.c.Engine()
	if eng == nil {
		return "", &functions.VintageError{AsOf: asof.Text, Err: functions.ErrVintageUnreachable}
	}
	ctx, cancel := context.WithTimeout(context.Background(), vintageTimeout)
	defer cancel()
	res, err := eng.Vintage(ctx, dataset, asof.Text, func(info protocol.VintageInfo, m *format.Manifest) (client.Stage, error) {
		if v.cache.Has(dataset, info.Snapshot) || v.storeIs(dataset, info.Snapshot) {
			return nil, nil
		}
		st, err := v.cache.Stage(localcache.VintageMeta{Dataset: dataset, Snapshot: info.Snapshot, Iceberg: info.IcebergSnapshot,
			CommittedAt: info.CommittedAt, Tags: info.Tags}, m)
		if err != nil {
			return nil, err // a nil *Stage must not become a non-nil interface
		}
		return st, nil
	})
	if err != nil {
		return "", vintageError(asof.Text, err)
	}
	stable := asof.Stable()
	if !stable {
		// A time resolved to a vintage older than the server's newest
		// stays resolved to it: every later commit comes after that one.
		head, ok := eng.HeadSnapshot(dataset)
		stable = ok && head != res.Info.Snapshot
	}
	if stable {
		v.mu.Lock()
		if len(v.mu.resolved) >= maxRevisionsCached {
			clear(v.mu.resolved)
		}
		v.mu.resolved[dataset+"\x00"+asof.Text] = res.Info.Snapshot
		v.mu.Unlock()
	}
	return res.Info.Snapshot, nil
}

// revisions asks the server for the revisions of one period (unix
// seconds, its bucket start) of series id, a minute's answer reused.
func (v *vintages) revisions(dataset, id, freq string, period int64) ([]functions.Revision, error) {
	p := time.Unix(period, 0).UTC().Format(time.DateOnly)
	if freq == "H" {
		p = time.Unix(period, 0).UTC().Format(time.RFC3339)
	}
	key := dataset + "\x00" + id + "\x00" + p
	v.mu.Lock()
	if e, ok := v.mu.revs[key]; ok && time.Since(e.at) < revisionsTTL {
		v.mu.Unlock()
		return e.revs, nil
	}
	v.mu.Unlock()
	eng := v.c.Engine()
	if eng == nil {
		return nil, &functions.VintageError{Err: functions.ErrVintageUnreachable}
	}
	ctx, cancel := context.WithTimeout(context.Background(), revisionsTimeout)
	defer cancel()
	revs, err := eng.Revisions(ctx, dataset, id, p)
	if err != nil {
		return nil, vintageError("", err)
	}
	out := make([]functions.Revision, len(revs))
	for i, r := range revs {
		out[i] = functions.Revision{Value: r.Value, Present: r.Present, Vintage: functions.Vintage{
			Snapshot: r.Vintage.Snapshot, Iceberg: r.Vintage.IcebergSnapshot, CommittedAt: r.Vintage.CommittedAt, Tags: r.Vintage.Tags}}
	}
	v.mu.Lock()
	if len(v.mu.revs) >= maxRevisionsCached {
		clear(v.mu.revs)
	}
	v.mu.revs[key] = revisionsEntry{at: time.Now(), revs: out}
	v.mu.Unlock()
	return out, nil
}

// vintageError is the functions' view of a failed request to the server.
func vintageError(asof string, err error) error {
	ve := &functions.VintageError{AsOf: asof, Err: err}
	var re *client.RequestError
	var ver *client.VersionError
	switch {
	case errors.Is(err, client.ErrOffline), errors.Is(err, context.DeadlineExceeded):
		ve.Err = functions.ErrVintageUnreachable
	case errors.As(err, &ver):
		ve.Err, ve.Detail = functions.ErrNoVintages, fmt.Sprintf("protocol %d", ver.Version)
	case errors.As(err, &re):
		ve.Detail = re.Reason
		switch re.Code {
		case protocol.ErrorUnknownVintage:
			ve.Err = functions.ErrUnknownVintage
		case protocol.ErrorBeforeFirstVintage:
			ve.Err = functions.ErrBeforeFirstVintage
		case protocol.ErrorNoLake:
			ve.Err = functions.ErrNoVintages
		case protocol.ErrorUnknownSeries, protocol.ErrorUnknownDataset:
			return fmt.Errorf("%s: %w", re.Reason, functions.ErrNotFound)
		}
	}
	return ve
}
