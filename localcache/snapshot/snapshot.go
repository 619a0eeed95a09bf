// Package snapshot serves one immutable snapshot directory straight from
// memory-mapped files.
//
// Open maps data.arrow, index.arrow, index.hash and tail.parquet (when the
// snapshot has a cold tier), checks the manifest, the sizes and the
// headers, and decodes nothing proportional to the data.
// A lookup is: xxh3 of the id -> its bucket in index.hash's directory
// (format versions 4 and 5; a slot of the slot table before) -> the series' hot
// record in index.hash (its id compared: in the record in format versions
// 3 to 5, in index.arrow before; then batch, offset, length, tier and
// frequency are read from it) -> the batch's column positions in data.arrow -> the
// period range inside the mapped period column, from the series' first
// and last period (in the record in format version 5, read from the
// points before) and an interpolated guess (format.HotIndex; a format
// version 1 snapshot gets its records built at open). With
// Options.HugeIndex (a store's serving snapshot) an index.hash of 64 MiB or
// more is copied into memory in 2 MiB pages after open, and lookups read
// the copy once it is checked (hugeindex.go). Points returned by Get alias the mapping: they are valid
// only while the caller holds a reference (TryRef ... Unref). Series of the
// cold tier are decoded per row group of tail.parquet on first use and
// served from a bounded cache; their Points are Go memory. The mapping is
// released when the last reference goes, never before, so a reader can
// never see it unmapped. Strings returned by Info and Search are copies.
//
// This package knows nothing of deltas or of other snapshots; see
// localcache for the read state that combines them.
package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/internal/mmap"
)

// ErrClosed is returned by TryRef's callers when the snapshot is gone.
var ErrClosed = errors.New("snapshot closed")

// Snapshot is one opened snapshot. It starts with one reference, owned by
// whoever opened it; Unref of the last reference unmaps the files.
type Snapshot struct {
	Dir      string // "" for a snapshot opened with OpenFiles
	Manifest *format.Manifest

	files         []*mmap.File
	mapped        map[string][]byte // file name -> its mapped bytes
	regions       FileSet           // where each file lies (OpenFiles); nil for a directory
	manifestBytes []byte
	index         *format.Index
	data          *format.Data
	hot           atomic.Pointer[format.HotIndex] // the lookup path: slots, records, batch table (over index.hash's mapping, or its copy: hugeindex.go)
	tail          *tailState                      // nil without a cold tier

	// The page-cache warm-up of a large snapshot (warm.go): warmed is
	// closed when it has ended, with warmErr set; stopWarm is closed by
	// release. All nil for a snapshot that is not warmed.
	warmed, stopWarm chan struct{}
	warmErr          error

	icopy *indexCopy // the copy of index.hash (hugeindex.go); nil without one

	indexFile *mmap.File // index.arrow's mapping, for isolateMeta; nil where none
	metaOnce  sync.Once

	refs     atomic.Int64
	onClose  atomic.Pointer[func()] // called after unmapping; may be nil
	searchIx atomic.Pointer[searchIndex]
}

// Open opens the snapshot in dir with the default Options.
func Open(dir string) (*Snapshot, error) { return OpenOptions(dir, Options{}) }

// OpenOptions opens the snapshot in dir.
func OpenOptions(dir string, o Options) (*Snapshot, error) {
	// The manifest's own bytes are kept for FileBytes.
	m, mb, err := format.ReadManifestBytes(dir)
	if err != nil {
		return nil, fmt.Errorf("open snapshot %s: %w", dir, err)
	}
	s, err := openMapped(m, mb, o, func(name string) (*mmap.File, error) { return mmap.Open(filepath.Join(dir, name)) })
	if err != nil {
		return nil, fmt.Errorf("open snapshot %s: %w", dir, err)
	}
	s.Dir = dir
	return s, nil
}

// Region is where one snapshot file lies: Length bytes of the file at
// Path from Offset (any offset; a mapping starts at the page boundary
// below it).
type Region struct {
	Path   string
	Offset int64
	Length int64
}

// FileSet names, for each file of a snapshot (format.ManifestFile and the
// files its manifest lists), the region that holds it.
type FileSet map[string]Region

// OpenFiles opens a snapshot whose files are regions of other files (a
// vintage's serving artifacts inside a lake's Puffin file), mapping each
// region in place. It checks exactly what OpenOptions checks: the
// manifest, every listed file's size (a region shorter than the manifest
// says, or a file that ends before its region, is a CorruptionError) and
// the headers; it decodes nothing proportional to the data. The set must
// hold the manifest and exactly the files it lists. Dir is "".
func OpenFiles(files FileSet, o Options) (*Snapshot, error) {
	mr, ok := files[format.ManifestFile]
	if !ok {
		return nil, fmt.Errorf("open snapshot: %w", &format.CorruptionError{File: format.ManifestFile, Offset: -1, Err: errors.New("not in the file set")})
	}
	if mr.Length > maxManifestBytes {
		return nil, fmt.Errorf("open snapshot %s: %w", mr.Path, &format.CorruptionError{File: format.ManifestFile, Offset: -1, Err: fmt.Errorf("%d bytes", mr.Length)})
	}
	mb, err := readRegion(mr)
	if err != nil {
		return nil, fmt.Errorf("open snapshot %s: %w", mr.Path, err)
	}
	m, err := format.ParseManifest(mb)
	if err != nil {
		return nil, fmt.Errorf("open snapshot %s: %w", mr.Path, err)
	}
	for name := range files {
		if name != format.ManifestFile && m.File(name) == nil {
			return nil, fmt.Errorf("open snapshot %s: %w", mr.Path, &format.CorruptionError{File: name, Offset: -1, Err: errors.New("in the file set but not in the manifest")})
		}
	}
	s, err := openMapped(m, mb, o, func(name string) (*mmap.File, error) {
		r, ok := files[name]
		if !ok {
			return nil, &format.CorruptionError{File: name, Offset: -1, Err: errors.New("listed by the manifest but not in the file set")}
		}
		if want := m.File(name).Size; r.Length != want {
			return nil, &format.CorruptionError{File: name, Offset: -1, Err: fmt.Errorf("region of %d bytes, manifest says %d", r.Length, want)}
		}
		f, err := mmap.OpenRange(r.Path, r.Offset, r.Length)
		if errors.Is(err, mmap.ErrShort) {
			return nil, &format.CorruptionError{File: name, Offset: -1, Err: err}
		}
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("open snapshot %s: %w", mr.Path, err)
	}
	s.regions = maps.Clone(files)
	return s, nil
}

// Region says where file name of a snapshot opened with OpenFiles lies,
// to re-read it without the mapping (the store's scrub). False for a
// directory snapshot (its files are Dir/name) or an unknown name.
func (s *Snapshot) Region(name string) (Region, bool) {
	r, ok := s.regions[name]
	return r, ok
}

// maxManifestBytes bounds the manifest read into memory by OpenFiles (a
// pet-scale manifest is well under a megabyte).
const maxManifestBytes = 64 << 20

func readRegion(r Region) ([]byte, error) {
	f, err := os.Open(r.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, r.Length)
	if _, err := f.ReadAt(b, r.Offset); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &format.CorruptionError{File: format.ManifestFile, Offset: -1, Err: fmt.Errorf("region %d+%d: %w", r.Offset, r.Length, io.ErrUnexpectedEOF)}
		}
		return nil, err
	}
	return b, nil
}

// openMapped maps the files of manifest m through mapFile and opens them.
func openMapped(m *format.Manifest, manifestBytes []byte, o Options, mapFile func(name string) (*mmap.File, error)) (s *Snapshot, err error) {
	snap := &Snapshot{Manifest: m, manifestBytes: manifestBytes, mapped: map[string][]byte{}}
	s = snap
	defer func() {
		if err != nil {
			// "return nil, err" has already set s to nil: release through
			// snap, or release(nil) panics and the mappings leak.
			snap.release()
			s = nil
		}
	}()
	byName := map[string]*mmap.File{}
	mapOne := func(name string) ([]byte, error) {
		f, err := mapFile(name)
		if err != nil {
			return nil, err
		}
		s.files = append(s.files, f)
		byName[name] = f
		// The size was checked against the manifest before mapping; check
		// again on the mapping so that a file truncated in between cannot
		// fault (SIGBUS) a later read.
		if want := m.File(name).Size; int64(len(f.Bytes)) != want {
			return nil, &format.CorruptionError{File: name, Offset: -1, Err: fmt.Errorf("size %d, manifest says %d", len(f.Bytes), want)}
		}
		s.mapped[name] = f.Bytes
		return f.Bytes, nil
	}
	ib, err := mapOne(format.IndexFile)
	if err != nil {
		return nil, err
	}
	if s.index, err = format.OpenIndex(ib, m.PeriodType, m.Series); err != nil {
		return nil, err
	}
	hb, err := mapOne(format.HashFile)
	if err != nil {
		return nil, err
	}
	db, err := mapOne(format.DataFile)
	if err != nil {
		return nil, err
	}
	if s.data, err = format.OpenData(db, m.PeriodType, m.Batches); err != nil {
		return nil, err
	}
	hot, err := format.OpenHot(m.Version, hb, ib, db, s.index, s.data)
	if err != nil {
		return nil, err
	}
	s.hot.Store(hot)
	if m.File(format.TailFile) != nil {
		tb, err := mapOne(format.TailFile)
		if err != nil {
			return nil, err
		}
		s.tail = newTailState(tb, m.PeriodType, m.Rows, o.TailCacheBytes)
	} else if m.HotSeries < m.Series {
		return nil, &format.CorruptionError{File: format.ManifestFile, Offset: -1,
			Err: fmt.Errorf("%d of %d series are hot but no %s is listed", m.HotSeries, m.Series, format.TailFile)}
	}
	s.isolate(byName, o.Warm, o.HugeIndex)
	s.refs.Store(1)
	return s, nil
}

// FileBytes returns the bytes of one snapshot file (manifest.json or a
// file the manifest lists), aliasing the mapping: valid only while the
// caller holds a reference, and read-only.
func (s *Snapshot) FileBytes(name string) ([]byte, bool) {
	if name == format.ManifestFile {
		return s.manifestBytes, true
	}
	b, ok := s.mapped[name]
	return b, ok
}

// OpenFile is FileBytes as an io.ReaderAt and its size, for streaming a
// file (whether the snapshot is a directory or regions of a Puffin file).
// The reader is valid only while the caller holds a reference.
func (s *Snapshot) OpenFile(name string) (io.ReaderAt, int64, error) {
	b, ok := s.FileBytes(name)
	if !ok {
		return nil, 0, fmt.Errorf("snapshot %s: %s: %w", s.ID(), name, os.ErrNotExist)
	}
	return bytes.NewReader(b), int64(len(b)), nil
}

// OnClose registers f to run after the last reference is dropped and the
// files are unmapped (used to delete retired snapshots; Windows cannot
// delete an open file).
func (s *Snapshot) OnClose(f func()) { s.onClose.Store(&f) }

// TryRef takes a reference unless the snapshot is already released.
func (s *Snapshot) TryRef() bool {
	for {
		n := s.refs.Load()
		if n <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Unref drops a reference; the last one unmaps the files. It is small
// enough to inline (every lookup ends in one): the last reference goes
// on in lastUnref.
func (s *Snapshot) Unref() {
	if n := s.refs.Add(-1); n <= 0 {
		s.lastUnref(n)
	}
}

// lastUnref is Unref of the last reference (n == 0) or of one too many.
func (s *Snapshot) lastUnref(n int64) {
	if n < 0 {
		panic("snapshot: Unref without a reference")
	}
	s.release()
	if f := s.onClose.Load(); f != nil {
		(*f)()
	}
}

// Close drops the opener's reference.
func (s *Snapshot) Close() error {
	s.Unref()
	return nil
}

func (s *Snapshot) release() {
	s.icopy.release() // before the unmapping: the copy's goroutine drops pages of index.hash's mapping
	if s.stopWarm != nil {
		close(s.stopWarm)
	}
	if s.data != nil {
		s.data.Close()
	}
	if s.tail != nil {
		s.tail.cache.drop()
	}
	if s.index != nil {
		s.index.Close()
	}
	for _, f := range s.files {
		f.Close()
	}
	s.files, s.mapped = nil, nil
}

// Refs reports the current reference count (for tests and metrics).
func (s *Snapshot) Refs() int64 { return s.refs.Load() }

// ID is the snapshot id.
func (s *Snapshot) ID() string { return s.Manifest.SnapshotID }

// NumSeries is the number of series in the index.
func (s *Snapshot) NumSeries() int { return s.index.N }

// Lookup resolves a series id to its index row in O(1).
func (s *Snapshot) Lookup(id string) (uint32, bool) {
	return s.hot.Load().Lookup(id)
}

// Find is Lookup that also returns the series' record, for GetIntoRec.
func (s *Snapshot) Find(id string) (row, rec uint32, ok bool) {
	hot := s.hot.Load()
	rec, ok = hot.Find(id)
	if !ok {
		return 0, 0, false
	}
	if row, ok = hot.Row(rec); !ok {
		return 0, 0, false
	}
	return row, rec, true
}

// Points are the periods and values of one series in a range. Exactly one
// of Days (date32 snapshots, days since the epoch) and Secs (timestamp
// snapshots, seconds) is non-nil unless the range is empty. The slices may
// alias a mapping or a cached cold block: valid only while the reference
// they came from is held, and read-only (their capacity ends at their
// length, so an append copies).
type Points struct {
	Days   []int32
	Secs   []int64
	Values []float64
}

// Len is the number of points.
func (p Points) Len() int { return len(p.Values) }

// Unix returns the period of point i in unix seconds.
func (p Points) Unix(i int) int64 {
	if p.Secs != nil {
		return p.Secs[i]
	}
	return int64(p.Days[i]) * 86400
}

// Unbounded range ends for Get.
const (
	MinTime int64 = math.MinInt64
	MaxTime int64 = math.MaxInt64
)

// Get returns the points of index row `row` with from <= period <= to (unix
// seconds; periods are bucket starts), from either tier. The caller must
// hold a reference.
//
// A hot series is read through its record in index.hash (format.HotIndex):
// the record, then the points; no index.arrow column and no batch header.
func (s *Snapshot) Get(row uint32, from, to int64) (Points, error) {
	p, _, err := s.GetFrequency(row, from, to)
	return p, err
}

// GetFrequency is Get and Frequency of the same row with the row's record
// decoded once: the store's lookup needs both, and a Get wrapped around an
// inner function cost ~80 instructions of copied Points a lookup (callgrind,
// BENCHMARKS.md "Serving snapshot v2").
func (s *Snapshot) GetFrequency(row uint32, from, to int64) (Points, format.Frequency, error) {
	var p Points
	f, err := s.GetInto(row, from, to, &p)
	return p, f, err
}

// GetInto is GetFrequency with the points written to *p (all three slices
// set, nil when unused): the store's Get fills its Result in place rather
// than copying nine words of Points back up. On error *p is left empty.
//
// A hot series is narrowed by format's HotRangeDays/HotRangeSecs: the
// record, its checks and the range search in one frame, the points
// stored field by field (a Points literal is built on the stack, zeroed
// and copied: ~20 instructions more a lookup).
func (s *Snapshot) GetInto(row uint32, from, to int64, p *Points) (format.Frequency, error) {
	rec, ok := s.hot.Load().Rec(row)
	if !ok {
		rec = math.MaxUint32 // no record: slowSlice's Record says why
	}
	return s.GetIntoRec(row, rec, from, to, p)
}

// GetIntoRec is GetInto of index row row whose record Find gave as rec
// (the lookup path: in a format version 4 or 5 snapshot Rec would read the row
// table for it).
func (s *Snapshot) GetIntoRec(row, rec uint32, from, to int64, p *Points) (format.Frequency, error) {
	hot := s.hot.Load()
	if days, vals, freq, ok := hot.HotRangeDays(rec, dayBound(from, false), dayBound(to, true)); ok {
		p.Days, p.Secs, p.Values = days, nil, vals
		return freq, nil
	}
	if secs, vals, freq, ok := hot.HotRangeSecs(rec, from, to); ok {
		p.Days, p.Secs, p.Values = nil, secs, vals
		return freq, nil
	}
	days, secs, vals, freq, err := s.slowSlice(row)
	if err != nil || len(vals) == 0 {
		*p = Points{}
		return freq, err
	}
	if days != nil {
		narrowDays(days, vals, from, to, p)
		return freq, nil
	}
	lo, hi := searchSecs(secs, from), len(secs)
	if to < math.MaxInt64 {
		hi = searchSecs(secs, to+1)
	}
	if lo >= hi {
		*p = Points{}
		return freq, nil
	}
	p.Days, p.Secs, p.Values = nil, secs[lo:hi:hi], vals[lo:hi:hi]
	return freq, nil
}

// narrowDays writes to *p the points of a series (days, non-empty) with
// from <= period <= to: two binary searches over the whole series. (An
// interpolation step from the series' ends took ~70 instructions less a
// lookup under callgrind but ~20% more time in the pair bench: it reads the
// series' last period, a cache line the range often does not need, and
// its guess waits on both ends; BENCHMARKS.md "Serving snapshot v2".)
func narrowDays(days []int32, vals []float64, from, to int64, p *Points) {
	fd, td := dayBound(from, false), dayBound(to, true)
	lo, hi := searchDays(days, fd), len(days)
	if td < math.MaxInt32 {
		hi = searchDays(days, td+1)
	}
	if lo >= hi {
		*p = Points{}
		return
	}
	// Field by field: a Points literal is built on the stack, zeroed and
	// copied (~20 instructions more a lookup).
	p.Days, p.Secs, p.Values = days[lo:hi:hi], nil, vals[lo:hi:hi]
}

// slowSlice is the whole series of row when HotDays and HotSecs decline it: a cold
// series (read through its tail.parquet block), an empty one, or a record
// that is corrupt (a CorruptionError).
func (s *Snapshot) slowSlice(row uint32) (days []int32, secs []int64, vals []float64, freq format.Frequency, err error) {
	hot := s.hot.Load()
	r, ok := hot.Record(row)
	if !ok {
		return nil, nil, nil, "", format.ErrNotFound
	}
	freq = r.Frequency()
	if r.Length == 0 {
		return nil, nil, nil, freq, nil
	}
	if r.Tier == format.Hot {
		if days, secs, vals, err = hot.Slice(r); err != nil {
			return nil, nil, nil, "", err
		}
		return days, secs, vals, freq, nil
	}
	b, err := s.coldBlock(row, r)
	if err != nil {
		return nil, nil, nil, "", err
	}
	off, n := r.Offset, r.Length
	if err := b.Check(off, n); err != nil {
		return nil, nil, nil, "", err
	}
	vals = b.Values[off : off+n]
	if b.Secs != nil {
		secs = b.Secs[off : off+n]
	} else {
		days = b.Days[off : off+n]
	}
	return days, secs, vals, freq, nil
}

// searchSecs is sort.Search for the first period >= t, without the
// closure call per probe.
func searchSecs(secs []int64, t int64) int {
	lo, hi := 0, len(secs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if secs[m] < t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// searchDays is sort.Search for the first day >= d, without the closure
// call per probe (this is the hot path of every lookup).
func searchDays(days []int32, d int64) int {
	lo, hi := 0, len(days)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if int64(days[m]) < d {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// dayBound converts a unix-seconds bound to a day number, clamped to int32:
// from rounds up to the next day start, to rounds down.
func dayBound(t int64, isTo bool) int64 {
	d := t / 86400
	if t%86400 != 0 {
		if t < 0 && isTo {
			d--
		} else if t > 0 && !isTo {
			d++
		}
	}
	if d > math.MaxInt32 {
		return math.MaxInt32
	}
	if d < math.MinInt32 {
		return math.MinInt32
	}
	return d
}

// Info is everything index.arrow holds about a series, copied out.
type Info struct {
	ID          string
	Name        string
	Unit        string
	Source      string
	Frequency   format.Frequency
	First, Last int64 // unix seconds; 0 when Count == 0
	Count       int
	LatestValue float64
	Tier        format.Tier
	Batch       uint32
	Offset      uint32
}

// Info returns the index row's fields as copies.
func (s *Snapshot) Info(row uint32) Info {
	s.isolateMeta()
	x := s.index
	return Info{
		ID:          strings.Clone(x.ID(row)),
		Name:        strings.Clone(x.Name(row)),
		Unit:        strings.Clone(x.Unit(row)),
		Source:      strings.Clone(x.Source(row)),
		Frequency:   format.Frequency(strings.Clone(string(x.Frequency(row)))),
		First:       x.First(row),
		Last:        x.Last(row),
		Count:       int(x.Length[row]),
		LatestValue: x.Latest[row],
		Tier:        format.Tier(x.Tier[row]),
		Batch:       x.Batch[row],
		Offset:      x.Offset[row],
	}
}

// ID returns the series id of an index row, aliasing the mapping.
func (s *Snapshot) SeriesID(row uint32) string {
	// The hot record locates the id's bytes: listing ids then reads the
	// records and the bytes lookups read anyway, not index.arrow's
	// offsets column (BENCHMARKS.md "A lean process").
	if id, ok := s.hot.Load().ID(row); ok {
		return id
	}
	return s.index.ID(row)
}

// Frequency returns the frequency of an index row as one of the format
// constants (never aliasing the mapping).
func (s *Snapshot) Frequency(row uint32) format.Frequency {
	r, _ := s.hot.Load().Record(row)
	return r.Frequency()
}

// Row is Lookup under the name delta.Base uses.
func (s *Snapshot) Row(id string) (uint32, bool) { return s.Lookup(id) }

// isolate splits the mappings of data.arrow and index.arrow so that the
// bytes lookups read (the points of each batch, the series id column) sit
// in kernel mapping regions of their own (mmap.File.Isolate), then drops
// the pages that open itself made resident (Arrow headers and footers,
// mapped as whole large folios: up to 2 MiB each). Without it, reading
// every series made the `series` column's pages resident through the
// folios they share with the periods (pet scale: 183.6 MiB of data.arrow
// resident for 157.9 MiB of points), and open alone added 5-7 MiB of
// file-backed RSS when the page cache held the files in large folios
// (BENCHMARKS.md, "A lean process"). index.arrow's other columns get
// regions of their own when Info or search first reads them
// (isolateMeta).
//
// With Options.Warm, a snapshot whose lookups read warmSnapshotBytes or
// more (index.hash and the points) then has the page cache warmed in the
// background (warm).
func (s *Snapshot) isolate(files map[string]*mmap.File, warm, huge bool) {
	var points []mmap.Span
	if hot := s.hot.Load(); hot != nil {
		points = mmapSpans(hot.PointSpans())
	}
	if f := files[format.DataFile]; f != nil {
		f.Isolate(points...)
	}
	if f := files[format.IndexFile]; f != nil && s.index != nil {
		f.Isolate(mmapSpans(s.index.IDSpans(f.Bytes))...)
		s.indexFile = f
	}
	if huge {
		s.copyIndex(files[format.HashFile])
	}
	if warm {
		s.warm(files[format.HashFile], files[format.DataFile], points)
	}
	for _, f := range s.files {
		f.DropResident()
	}
}

// isolateMeta makes the rest of index.arrow's column buffers regions of
// their own, before the first read of them (Info, search): isolate did
// only the series id column's, which lookups read. Each region is a kernel
// mapping, about 2.5 µs to split off; the twenty-odd of index.arrow were
// 0.1 ms of a 0.5 ms open at pet scale, paid by processes that never call
// Info (BENCHMARKS.md "The open of a fresh process").
func (s *Snapshot) isolateMeta() {
	s.metaOnce.Do(func() {
		if f := s.indexFile; f != nil {
			f.Isolate(mmapSpans(s.index.BufferSpans(f.Bytes))...)
		}
	})
}

func mmapSpans(in []format.Span) []mmap.Span {
	out := make([]mmap.Span, len(in))
	for i, sp := range in {
		out[i] = mmap.Span{Lo: sp.Lo, Hi: sp.Hi}
	}
	return out
}
