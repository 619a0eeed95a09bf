package localcache

import (
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// located is a series found in a read state, with a reference held on the
// state's snapshot (release with l.rs.snap.Unref()).
type located struct {
	d       *Dataset
	rs      *readState
	id      string
	row     uint32
	inBase  bool // the snapshot has the series (row is valid)
	pending bool // the delta has changes for it
}

// find looks id up in d into *l (set only when found). r records what is
// being read for the fault guard of the caller. l is filled in place, not
// returned: a located is 7 words, and copying it up through find and
// locate was ~10% of a lookup's instructions in localcache.
func (d *Dataset) find(id string, r *reading, l *located) (bool, error) {
	r.d = d
	rs, err := d.acquire()
	if err != nil {
		return false, err
	}
	r.snap = rs.snap
	if row, ok := rs.snap.Lookup(id); ok {
		*l = located{d: d, rs: rs, id: id, row: row, inBase: true, pending: rs.delta.Touched(row)}
		return true, nil
	}
	if rs.delta.Has(id) {
		*l = located{d: d, rs: rs, id: id, pending: true}
		return true, nil
	}
	r.snap = nil
	rs.snap.Unref()
	return false, nil
}

// locate finds a series reference ("id" or "dataset:id"). A damaged
// dataset named explicitly gives its *DamageError; an id found in no
// healthy dataset while some dataset is damaged gives an error that wraps
// both ErrNotFound and the damage (the series may be in the damaged one).
// r is the caller's fault-guard record; on success r.snap is l.rs.snap.
// The series found is written to *l.
func (s *Store) locate(ref string, r *reading, l *located) error {
	if i := strings.IndexByte(ref, ':'); i > 0 {
		if d, err := s.Dataset(ref[:i]); err == nil {
			ok, err := d.find(ref[i+1:], r, l)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%w: %q in dataset %s", ErrNotFound, ref[i+1:], d.name)
			}
			return nil
		}
	}
	ds, err := s.datasetList()
	if err != nil {
		return err
	}
	var damaged error
	for _, d := range ds {
		ok, err := d.find(ref, r, l)
		if err == nil && ok {
			return nil
		}
		if damaged == nil && errors.Is(err, ErrDamaged) {
			damaged = err
		}
	}
	r.d = nil
	if damaged != nil {
		return fmt.Errorf("%w: %q (%w)", ErrNotFound, ref, damaged)
	}
	return fmt.Errorf("%w: %q", ErrNotFound, ref)
}

// Result is the answer to Get. Points may alias a mapping (or a buffer
// that is reused after Release): they are valid until Release, which must
// be called exactly once. Read periods with Points.Unix: a series with
// pending changes comes back in Secs even from a date32 snapshot.
type Result struct {
	Dataset   string
	Frequency format.Frequency
	Points    snapshot.Points
	snap      *snapshot.Snapshot
	buf       *mergeBuf // backs Points of a merged series; back to the pool on Release
}

// Release lets go of the snapshot reference the points came from.
//
// snapshot.Unref inlines into it (BENCHMARKS.md "Fewer instructions on
// the mapped Get"); Release itself is over the inliner's budget (cost
// ~180 of 80), so GetInto calls it only when the Result holds something.
func (r *Result) Release() {
	if r.buf != nil {
		r.releaseBuf()
	}
	if s := r.snap; s != nil {
		r.snap = nil
		s.Unref()
	}
}

// releaseBuf is Release's part for a merged series: the buffer back to the pool.
func (r *Result) releaseBuf() {
	r.buf.put()
	r.buf = nil
	r.Points = snapshot.Points{}
}

// Get returns the points of series ref with from <= period <= to (unix
// seconds UTC, bucket starts; use snapshot.MinTime/MaxTime for open ends),
// the delta shadowing the snapshot. A series without pending changes is a
// slice of the mapping; one with changes is merged into a pooled buffer
// that Release recycles.
//
// Get itself never faults on a mapped file that shrank underneath (the
// fault becomes a CorruptionError and marks the dataset damaged), but the
// caller's reads of Points are outside that guard: callers that cannot
// afford a fault read through Copy or View.
//
// A loop of lookups calls GetInto with one Result instead: a Result is
// 15 words, and returning it cost a lookup ~0.1-0.3 µs (BENCHMARKS.md
// "Returning the Result").
func (s *Store) Get(ref string, from, to int64) (res Result, err error) {
	err = s.GetInto(ref, from, to, &res)
	return res, err
}

// GetInto is Get with the result written to *res, which it first
// releases (a Result from an earlier Get or GetInto, or the zero Result):
// the caller keeps one Result for a loop of lookups and Releases it after
// the last one. On error *res is the zero Result.
//
// Measured on the pet and full-scale snapshots, one process, fresh
// queries each: Get returning its Result took 0.85-1.06 / 1.48-1.56 µs,
// GetInto 0.70-0.75 / 1.21-1.23 µs, the snapshot's own lookup and range
// 0.69-0.77 / 1.09-1.16 µs (BENCHMARKS.md "Returning the Result").
func (s *Store) GetInto(ref string, from, to int64, res *Result) (err error) {
	if res.snap != nil || res.buf != nil {
		res.Release()
	}
	var r reading
	defer s.guardInto(debug.SetPanicOnFault(true), &r, &err, res) // a fault empties *res
	if err = s.get(ref, from, to, &r, res); err != nil {
		*res = Result{}
		return err
	}
	r.done = true // the guard skips recover
	return nil
}

// get is GetInto's lookup into *res (the zero Result) for the guarded
// callers; r is the caller's fault-guard record. While the mapping is
// read both r and *res name the snapshot (on a fault the guard releases
// r's reference); on return r holds none, and *res holds it unless there
// was an error.
//
// The common case first, with none of locate's generality: ref does not
// start with a dataset's name and ':' (mayName) and names a series of the
// first dataset (in name order) that holds it, in its snapshot without
// pending changes (the plain slice), or with changes or only in its delta
// (merged). It is locate, find and get in one frame: their calls, the
// located they filled and the stores through their pointers were ~150
// instructions of a ~1,300-instruction lookup (BENCHMARKS.md "The lookup
// path").
func (s *Store) get(ref string, from, to int64, r *reading, res *Result) (err error) {
	if l := s.list.Load(); l != nil && !s.isClosed.Load() && !l.mayName(ref) {
		for _, d := range l.ds {
			rs, err := d.acquire()
			if err != nil {
				break // damaged: locate says how (the series may be in a later dataset)
			}
			r.d, r.snap = d, rs.snap
			row, rec, ok := rs.snap.Find(ref)
			if ok && !rs.delta.Touched(row) {
				res.Dataset, res.snap = d.name, rs.snap
				if res.Frequency, err = rs.snap.GetIntoRec(row, rec, from, to, &res.Points); err != nil {
					r.snap = nil
					res.Release()
					return fmt.Errorf("get %s: %w", ref, s.damagedIf(d, err))
				}
				r.snap = nil // handed to the caller with res
				return nil
			}
			// Pending changes, or a series the delta created: merged, as
			// find would have located it (no second lookup).
			if ok {
				return s.getMerged(located{d: d, rs: rs, id: ref, row: row, inBase: true, pending: true}, ref, from, to, r, res)
			}
			if rs.delta.Has(ref) {
				return s.getMerged(located{d: d, rs: rs, id: ref, pending: true}, ref, from, to, r, res)
			}
			r.d, r.snap = nil, nil
			rs.snap.Unref()
		}
	}
	// Everything else: "dataset:id", a damaged dataset on the way, not
	// found, a closed store.
	var l located
	if err = s.locate(ref, r, &l); err != nil {
		return err
	}
	if l.pending {
		return s.getMerged(l, ref, from, to, r, res)
	}
	res.Dataset, res.snap = l.d.name, l.rs.snap
	if res.Frequency, err = l.rs.snap.GetInto(l.row, from, to, &res.Points); err != nil {
		r.snap = nil
		res.Release()
		return fmt.Errorf("get %s: %w", ref, s.damagedIf(l.d, err))
	}
	r.snap = nil // handed to the caller with res
	return nil
}

// getMerged is get for a series with pending changes, found as l.
func (s *Store) getMerged(l located, ref string, from, to int64, r *reading, res *Result) error {
	*res = Result{Dataset: l.d.name, snap: l.rs.snap}
	buf := getMergeBuf()
	pts, freq, _, err := l.merged(buf, from, to)
	if err != nil {
		buf.put()
		r.snap = nil
		res.Release()
		return fmt.Errorf("get %s: %w", ref, s.damagedIf(l.d, err))
	}
	res.Points, res.Frequency, res.buf = pts, freq, buf
	r.snap = nil
	return nil
}

// View calls fn with the points of series ref in [from, to] (see Get)
// under the store's fault guard: a mapped file that shrank underneath
// while fn reads the points fails the call with a CorruptionError (and
// marks the dataset damaged) instead of killing the process. The points
// are valid only during fn.
func (s *Store) View(ref string, from, to int64, fn func(Result) error) (err error) {
	var r reading
	defer s.guard(debug.SetPanicOnFault(true), &r, &err)
	var res Result
	if err := s.get(ref, from, to, &r, &res); err != nil {
		return err
	}
	r.snap = res.snap // released by the guard if fn faults; r.d is its dataset
	err = fn(res)
	r.snap = nil
	res.Release()
	return err
}

// mergeBuf holds the merged points of one Get of a series with pending
// changes. They are pooled: merging is the read path of every updated
// series, and a fresh allocation per read would cost more than the merge.
type mergeBuf struct {
	secs []int64
	vals []float64
}

var mergePool = sync.Pool{New: func() any { return new(mergeBuf) }}

// maxPooledPoints bounds what a pooled buffer may keep: a read of a
// huge series should not pin its memory in the pool.
const maxPooledPoints = 1 << 16

func getMergeBuf() *mergeBuf { return mergePool.Get().(*mergeBuf) }

func (b *mergeBuf) put() {
	if cap(b.secs) > maxPooledPoints {
		return
	}
	mergePool.Put(b)
}

// merged merges base + delta for a pending series in [from, to] into buf,
// and returns the series' latest metadata from the delta (nil if none),
// read together with the points: a batch applied meanwhile is in both or
// in neither. The points are valid until buf is reused.
func (l located) merged(buf *mergeBuf, from, to int64) (snapshot.Points, format.Frequency, *format.RecordMeta, error) {
	var base snapshot.Points
	var freq format.Frequency
	if l.inBase {
		var err error
		if base, freq, err = l.rs.snap.GetFrequency(l.row, from, to); err != nil {
			return snapshot.Points{}, "", nil, err
		}
	}
	var out snapshot.Points
	var meta *format.RecordMeta
	read := func(dp []delta.Point, dfreq format.Frequency, m *format.RecordMeta) {
		out = mergeInto(buf, base, dp)
		meta = m
		if freq == "" {
			freq = dfreq
		}
	}
	var ok bool
	if l.inBase {
		ok = l.rs.delta.ReadRow(l.row, from, to, read)
	} else {
		ok = l.rs.delta.Read(l.id, from, to, read)
	}
	if !ok {
		out = mergeInto(buf, base, nil)
	}
	return out, freq, meta, nil
}

// mergePoints merges a snapshot slice with the delta points of the same
// series and range into fresh slices (see mergeInto).
func mergePoints(base snapshot.Points, dp []delta.Point) snapshot.Points {
	return mergeInto(&mergeBuf{}, base, dp)
}

// mergeInto merges a snapshot slice with the delta points of the same
// series and range into buf: a delta point replaces the base point with
// the same period; a tombstone removes it. The result is in Secs, with
// capacity equal to length.
func mergeInto(buf *mergeBuf, base snapshot.Points, dp []delta.Point) snapshot.Points {
	n := base.Len() + len(dp)
	if cap(buf.secs) < n {
		buf.secs = make([]int64, n)
		buf.vals = make([]float64, n)
	}
	secs, vals := buf.secs[:n], buf.vals[:n]
	var k int
	if base.Secs != nil || base.Len() == 0 {
		k = mergeSecs(secs, vals, base.Secs, base.Values, dp)
	} else {
		k = mergeDays(secs, vals, base.Days, base.Values, dp)
	}
	return snapshot.Points{Secs: secs[:k:k], Values: vals[:k:k]}
}

func mergeDays(secs []int64, vals []float64, days []int32, bv []float64, dp []delta.Point) int {
	k, i := 0, 0
	for j := range dp {
		p := dp[j].Period
		for ; i < len(days) && int64(days[i])*86400 < p; i++ {
			secs[k], vals[k] = int64(days[i])*86400, bv[i]
			k++
		}
		if i < len(days) && int64(days[i])*86400 == p {
			i++ // shadowed by the delta
		}
		if !dp[j].Deleted {
			secs[k], vals[k] = p, dp[j].Value
			k++
		}
	}
	for ; i < len(days); i++ {
		secs[k], vals[k] = int64(days[i])*86400, bv[i]
		k++
	}
	return k
}

func mergeSecs(secs []int64, vals []float64, bs []int64, bv []float64, dp []delta.Point) int {
	k, i := 0, 0
	for j := range dp {
		p := dp[j].Period
		for ; i < len(bs) && bs[i] < p; i++ {
			secs[k], vals[k] = bs[i], bv[i]
			k++
		}
		if i < len(bs) && bs[i] == p {
			i++ // shadowed by the delta
		}
		if !dp[j].Deleted {
			secs[k], vals[k] = p, dp[j].Value
			k++
		}
	}
	k += copy(secs[k:], bs[i:])
	copy(vals[k-(len(bs)-i):], bv[i:])
	return k
}

// Copy returns copies of the points of series ref in [from, to] as unix
// seconds and values: for callers that keep the data.
func (s *Store) Copy(ref string, from, to int64) (periods []int64, values []float64, err error) {
	err = s.View(ref, from, to, func(r Result) error {
		n := r.Points.Len()
		periods = make([]int64, n)
		for i := range periods {
			periods[i] = r.Points.Unix(i)
		}
		values = slices.Clone(r.Points.Values)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return periods, values, nil
}

// Info describes a series: every field of its index row with the delta
// applied (bounds, count, latest value and metadata), plus where it is
// served from.
type Info struct {
	snapshot.Info
	Dataset    string
	SnapshotID string
	Epoch      uint64
	Seq        uint64 // highest seq applied to the dataset
	Pending    bool   // the delta has changes for this series
	Updated    int64  // unix seconds: snapshot creation, or the last Apply touching the dataset
}

// Info returns the series' metadata.
func (s *Store) Info(ref string) (in Info, err error) {
	var r reading
	defer s.guard(debug.SetPanicOnFault(true), &r, &err)
	var l located
	if err = s.locate(ref, &r, &l); err != nil {
		return Info{}, err
	}
	defer func() {
		if r.snap != nil { // not released by a fault
			r.snap = nil
			l.rs.snap.Unref()
		}
	}()
	m := l.rs.snap.Manifest
	in = Info{Dataset: l.d.name, SnapshotID: m.SnapshotID, Epoch: m.Epoch, Seq: l.rs.delta.LastSeq(), Updated: m.Created.Unix(), Pending: l.pending}
	if l.inBase {
		in.Info = l.rs.snap.Info(l.row)
	} else {
		in.ID = l.id
		in.LatestValue = math.NaN()
	}
	if !l.pending {
		return in, nil
	}
	if t := l.d.lastSync.Load(); t > 0 {
		in.Updated = t / 1e9
	}
	buf := getMergeBuf()
	defer buf.put()
	pts, freq, meta, err := l.merged(buf, snapshot.MinTime, snapshot.MaxTime)
	if err != nil {
		return Info{}, err
	}
	in.Frequency = freq
	in.Count = pts.Len()
	in.First, in.Last, in.LatestValue = 0, 0, math.NaN()
	if n := pts.Len(); n > 0 {
		in.First, in.Last, in.LatestValue = pts.Unix(0), pts.Unix(n-1), pts.Values[n-1]
	}
	if meta != nil {
		in.Name, in.Unit, in.Source = meta.Name, meta.Unit, meta.Source
	}
	return in, nil
}

// Latest returns the last period (unix seconds) and value of a series.
func (s *Store) Latest(ref string) (period int64, value float64, err error) {
	info, err := s.Info(ref)
	if err != nil {
		return 0, 0, err
	}
	if info.Count == 0 {
		return 0, 0, fmt.Errorf("series %q has no data", ref)
	}
	return info.Last, info.LatestValue, nil
}

// SearchHit is one result of Search.
type SearchHit struct {
	Dataset string
	ID      string
	Name    string
	Score   int
}

// Search finds series by id or name across datasets (see
// snapshot.Snapshot.Search for the ranking); series that only the delta
// has are found by substring.
func (s *Store) Search(query string, limit int) (hits []SearchHit, err error) {
	var r reading
	defer s.guard(debug.SetPanicOnFault(true), &r, &err)
	ds, err := s.datasetList()
	if err != nil {
		return nil, err
	}
	q := strings.ToLower(strings.TrimSpace(query))
	for _, d := range ds {
		r.d = d
		rs, err := d.acquire()
		if err != nil {
			continue
		}
		r.snap = rs.snap
		for _, m := range rs.snap.Search(query, limit) {
			hits = append(hits, SearchHit{Dataset: d.name, ID: m.ID, Name: m.Name, Score: m.Score})
		}
		if q != "" {
			for _, id := range rs.delta.SeriesIDs() {
				if _, inBase := rs.snap.Lookup(id); inBase {
					continue
				}
				_, _, meta, _ := rs.delta.Range(id, 1, 0)
				name := ""
				if meta != nil {
					name = meta.Name
				}
				if strings.Contains(strings.ToLower(id), q) || strings.Contains(strings.ToLower(name), q) {
					hits = append(hits, SearchHit{Dataset: d.name, ID: id, Name: name, Score: 25})
				}
			}
		}
		r.snap = nil
		rs.snap.Unref()
	}
	r.d = nil
	sort.SliceStable(hits, func(a, b int) bool {
		if hits[a].Score != hits[b].Score {
			return hits[a].Score > hits[b].Score
		}
		if len(hits[a].ID) != len(hits[b].ID) {
			return len(hits[a].ID) < len(hits[b].ID)
		}
		return hits[a].ID < hits[b].ID
	})
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits, nil
}

// Has reports whether dataset holds series id, in its snapshot or in its
// delta (a series the delta created).
func (s *Store) Has(dataset, id string) (ok bool, err error) {
	d, err := s.Dataset(dataset)
	if err != nil {
		return false, err
	}
	var r reading
	defer s.guard(debug.SetPanicOnFault(true), &r, &err)
	var l located
	ok, err = d.find(id, &r, &l)
	if err != nil || !ok {
		return false, err
	}
	r.snap = nil
	l.rs.snap.Unref()
	return true, nil
}

// LastSeq returns the highest seq applied to a dataset.
func (s *Store) LastSeq(dataset string) (uint64, error) {
	d, err := s.Dataset(dataset)
	if err != nil {
		return 0, err
	}
	rs, err := d.acquire()
	if err != nil {
		return 0, err
	}
	defer rs.snap.Unref()
	return rs.delta.LastSeq(), nil
}

// State reports a dataset's epoch, snapshot id and last applied seq.
func (s *Store) State(dataset string) (epoch uint64, snapshotID string, seq uint64, err error) {
	d, err := s.Dataset(dataset)
	if err != nil {
		return 0, "", 0, err
	}
	rs, err := d.acquire()
	if err != nil {
		return 0, "", 0, err
	}
	defer rs.snap.Unref()
	return rs.snap.Manifest.Epoch, rs.snap.ID(), rs.delta.LastSeq(), nil
}
