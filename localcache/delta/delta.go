package delta

import (
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/energyscope/energyscope/localcache/format"
)

// Point is one pending change: the value at a normalized period, or a
// tombstone that hides the snapshot's point there.
type Point struct {
	Period  int64 // normalized, unix seconds
	Value   float64
	Deleted bool
}

// Series is the pending changes of one series.
type Series struct {
	ID     string
	Freq   format.Frequency
	Meta   *format.RecordMeta // the latest metadata a record carried; nil if none
	Points []Point            // sorted by Period, one per period
}

// Base is what the delta needs to know about the snapshot it shadows.
type Base interface {
	// Row returns the snapshot's index row of a series.
	Row(id string) (uint32, bool)
	// Frequency returns the frequency of an index row.
	Frequency(row uint32) format.Frequency
	// NumSeries is the number of index rows.
	NumSeries() int
}

// Delta is the in-memory view of the pending records over one snapshot.
// Readers take mu for reading only for series whose bit in touched is set
// (or that the snapshot lacks); every other series reads the snapshot
// alone, without a lock. A batch is applied under mu held for writing, so
// a reader sees all of it or none of it.
type Delta struct {
	base Base

	mu      sync.RWMutex       // held for writing while a batch is applied
	series  map[string]*Series // guarded by mu
	byRow   []*Series          // snapshot row -> its pending series (nil if none); guarded by mu, allocated on first use
	rows    int                // distinct (series, period) entries; guarded by mu
	records recordLog          // applied records in seq order, for compaction and rebasing; guarded by mu

	touched []atomic.Uint64 // bit per snapshot row: the series has pending changes
	// anyTouched is set (before the first bit of touched) once any
	// snapshot row has pending changes: while it is false, Touched is
	// one load of a line every read of the delta shares, not of the
	// row's word of touched (a cache miss of its own on a large index).
	anyTouched atomic.Bool
	lastSeq    atomic.Uint64
	bytes      atomic.Int64
}

// recordLog is an append-only list of records kept in fixed-size chunks,
// so that appending never copies what is already there (a delta may hold
// millions of records).
type recordLog struct {
	chunks [][]format.Record
	n      int
}

const recordChunk = 4096

func (l *recordLog) append(r *format.Record) {
	if k := len(l.chunks); k == 0 || len(l.chunks[k-1]) == recordChunk {
		l.chunks = append(l.chunks, make([]format.Record, 0, recordChunk))
	}
	c := &l.chunks[len(l.chunks)-1]
	*c = append(*c, *r)
	l.n++
}

func (l *recordLog) at(i int) *format.Record { return &l.chunks[i/recordChunk][i%recordChunk] }

// after copies the records with seq > seq (records are in seq order).
func (l *recordLog) after(seq uint64) []format.Record {
	i := sort.Search(l.n, func(i int) bool { return l.at(i).Seq > seq })
	out := make([]format.Record, 0, l.n-i)
	for i < l.n {
		c := l.chunks[i/recordChunk][i%recordChunk:]
		out = append(out, c...)
		i += len(c)
	}
	return out
}

// New returns an empty delta over base; lastSeq is the highest seq the
// base already covers.
func New(base Base, lastSeq uint64) *Delta {
	d := &Delta{base: base, series: map[string]*Series{}, touched: make([]atomic.Uint64, (base.NumSeries()+63)/64)}
	d.lastSeq.Store(lastSeq)
	return d
}

// LastSeq is the highest seq applied (or covered by the base).
func (d *Delta) LastSeq() uint64 { return d.lastSeq.Load() }

// Touched reports whether snapshot row row has pending changes. It is one
// atomic load while the delta has no change to a snapshot row, two after:
// the fast path of every read.
func (d *Delta) Touched(row uint32) bool {
	return d.anyTouched.Load() && d.touched[row>>6].Load()&(1<<(row&63)) != 0
}

// Stats reports the size of the delta.
func (d *Delta) Stats() (series, rows, records int, bytes int64) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return len(d.series), d.rows, d.records.n, d.bytes.Load()
}

// Empty reports whether nothing is pending.
func (d *Delta) Empty() bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.records.n == 0
}

// Apply makes the records of an already validated and durable batch
// visible, all at once. Records with seq <= LastSeq are skipped. It
// returns the number applied.
func (d *Delta) Apply(batch []format.Record) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	last := d.lastSeq.Load()
	n := 0
	var bytes int64
	for i := range batch {
		r := &batch[i]
		if r.Seq <= last {
			continue
		}
		last = r.Seq
		d.applyLocked(r)
		d.records.append(r)
		bytes += int64(len(r.SeriesID)) + 32
		n++
	}
	d.bytes.Add(bytes)
	d.lastSeq.Store(last)
	return n
}

func (d *Delta) applyLocked(r *format.Record) {
	s := d.series[r.SeriesID]
	if s == nil {
		s = &Series{ID: r.SeriesID}
		if row, ok := d.base.Row(r.SeriesID); ok {
			s.Freq = d.base.Frequency(row)
			if d.byRow == nil {
				d.byRow = make([]*Series, d.base.NumSeries())
			}
			d.byRow[row] = s
			d.anyTouched.Store(true)
			d.touched[row>>6].Or(1 << (row & 63))
		}
		d.series[r.SeriesID] = s
	}
	if r.Meta != nil {
		m := *r.Meta
		// Validate accepts every spelling ParseFrequency does ("monthly",
		// "h"); Normalize and the snapshot writer know only the letters.
		if f, err := format.ParseFrequency(string(m.Frequency)); err == nil {
			m.Frequency = f
		}
		s.Meta = &m
		if s.Freq == "" && m.Frequency != "" {
			s.Freq = m.Frequency
		}
	}
	if s.Freq == "" {
		s.Freq = format.Daily
	}
	p := s.Freq.Normalize(r.Period)
	pt := Point{Period: p, Value: r.Value, Deleted: r.Op == format.Delete}
	np := len(s.Points)
	if np == 0 || s.Points[np-1].Period < p { // the common case: a new latest point
		if np == 0 {
			s.Points = make([]Point, 0, 4)
		}
		s.Points = append(s.Points, pt)
		d.rows++
		return
	}
	i := searchPoints(s.Points, p)
	if s.Points[i].Period == p {
		s.Points[i] = pt
		return
	}
	s.Points = slices.Insert(s.Points, i, pt)
	d.rows++
}

// searchPoints returns the index of the first point with Period >= p.
func searchPoints(pts []Point, p int64) int {
	lo, hi := 0, len(pts)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if pts[m].Period < p {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// rangeOf returns the points of pts with from <= period <= to.
func rangeOf(pts []Point, from, to int64) []Point {
	if from > to {
		return nil
	}
	lo := searchPoints(pts, from)
	hi := len(pts)
	if to < math.MaxInt64 {
		hi = lo + searchPoints(pts[lo:], to+1)
	}
	return pts[lo:hi]
}

// ReadRow calls fn, under the read lock, with the pending points of
// snapshot row row with from <= period <= to, and the series' frequency
// and latest metadata. It reports false (without calling fn) when the row
// has nothing pending. pts is only valid during fn: fn must copy what it
// keeps and must not call back into d's write methods. This is the read
// path of a series with pending changes: no allocation, no map lookup.
func (d *Delta) ReadRow(row uint32, from, to int64, fn func(pts []Point, freq format.Frequency, meta *format.RecordMeta)) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.byRow == nil || int(row) >= len(d.byRow) || d.byRow[row] == nil {
		return false
	}
	s := d.byRow[row]
	fn(rangeOf(s.Points, from, to), s.Freq, s.Meta)
	return true
}

// Read is ReadRow for a series looked up by id (series the snapshot does
// not have).
func (d *Delta) Read(id string, from, to int64, fn func(pts []Point, freq format.Frequency, meta *format.RecordMeta)) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	s := d.series[id]
	if s == nil {
		return false
	}
	fn(rangeOf(s.Points, from, to), s.Freq, s.Meta)
	return true
}

// Range copies the pending points of id with from <= period <= to and the
// series' metadata. ok is false when the series has nothing pending.
func (d *Delta) Range(id string, from, to int64) (pts []Point, freq format.Frequency, meta *format.RecordMeta, ok bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	s := d.series[id]
	if s == nil {
		return nil, "", nil, false
	}
	if r := rangeOf(s.Points, from, to); len(r) > 0 {
		pts = slices.Clone(r)
	}
	return pts, s.Freq, s.Meta, true
}

// Records returns the applied records with seq > after, in order.
func (d *Delta) Records(after uint64) []format.Record {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.records.after(after)
}

// SeriesIDs lists the series with pending changes, sorted.
func (d *Delta) SeriesIDs() []string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	ids := make([]string, 0, len(d.series))
	for id := range d.series {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Snapshot returns a deep copy of every pending series, for compaction.
func (d *Delta) Snapshot() (map[string]*Series, uint64) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make(map[string]*Series, len(d.series))
	for id, s := range d.series {
		c := *s
		c.Points = slices.Clone(s.Points)
		out[id] = &c
	}
	return out, d.lastSeq.Load()
}

// Has reports whether id has pending changes.
func (d *Delta) Has(id string) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.series[id] != nil
}
