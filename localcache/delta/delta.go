package delta

import (
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
	Meta   *Meta   // the latest metadata a record carried; nil if none
	Points []Point // sorted by Period, one per period
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
// alone, without a lock.
type Delta struct {
	base Base

	mu      sync.RWMutex       // held for writing while a batch is applied
	series  map[string]*Series // guarded by mu
	rows    int                // distinct (series, period) entries; guarded by mu
	records []Record           // applied records in seq order, for compaction and rebasing; guarded by mu

	touched []atomic.Uint64 // bit per snapshot row: the series has pending changes
	lastSeq atomic.Uint64
	bytes   atomic.Int64
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
// atomic load: the fast path of every read.
func (d *Delta) Touched(row uint32) bool {
	return d.touched[row>>6].Load()&(1<<(row&63)) != 0
}

// Stats reports the size of the delta.
func (d *Delta) Stats() (series, rows, records int, bytes int64) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return len(d.series), d.rows, len(d.records), d.bytes.Load()
}

// Empty reports whether nothing is pending.
func (d *Delta) Empty() bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return len(d.records) == 0
}

// Apply makes the records of an already validated and durable batch
// visible, all at once. Records with seq <= LastSeq are skipped. It
// returns the number applied.
func (d *Delta) Apply(batch []Record) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	last := d.lastSeq.Load()
	n := 0
	for i := range batch {
		r := &batch[i]
		if r.Seq <= last {
			continue
		}
		last = r.Seq
		d.applyLocked(r)
		d.records = append(d.records, *r)
		d.bytes.Add(int64(len(r.SeriesID)) + 32)
		n++
	}
	d.lastSeq.Store(last)
	return n
}

func (d *Delta) applyLocked(r *Record) {
	s := d.series[r.SeriesID]
	if s == nil {
		s = &Series{ID: r.SeriesID}
		if row, ok := d.base.Row(r.SeriesID); ok {
			s.Freq = d.base.Frequency(row)
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
	pt := Point{Period: p, Value: r.Value, Deleted: r.Op == Delete}
	i := sort.Search(len(s.Points), func(i int) bool { return s.Points[i].Period >= p })
	switch {
	case i < len(s.Points) && s.Points[i].Period == p:
		s.Points[i] = pt
	case i == len(s.Points):
		s.Points = append(s.Points, pt)
		d.rows++
	default:
		s.Points = slices.Insert(s.Points, i, pt)
		d.rows++
	}
}

// Range copies the pending points of id with from <= period <= to and the
// series' metadata. ok is false when the series has nothing pending.
func (d *Delta) Range(id string, from, to int64) (pts []Point, freq format.Frequency, meta *Meta, ok bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	s := d.series[id]
	if s == nil {
		return nil, "", nil, false
	}
	lo := sort.Search(len(s.Points), func(i int) bool { return s.Points[i].Period >= from })
	hi := sort.Search(len(s.Points), func(i int) bool { return s.Points[i].Period > to })
	if lo < hi {
		pts = slices.Clone(s.Points[lo:hi])
	}
	return pts, s.Freq, s.Meta, true
}

// Records returns the applied records with seq > after, in order.
func (d *Delta) Records(after uint64) []Record {
	d.mu.RLock()
	defer d.mu.RUnlock()
	i := sort.Search(len(d.records), func(i int) bool { return d.records[i].Seq > after })
	return slices.Clone(d.records[i:])
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
