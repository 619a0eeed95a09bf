// Package localcache is the serving store: the datasets of a home
// directory, each served from its current memory-mapped snapshot.
//
// A home holds datasets/<name>/ (see localcache/format for what is inside).
// Series ids are unique across the datasets of a home: a lookup without a
// dataset finds the series in whichever dataset has it; "dataset:series"
// names the dataset explicitly.
//
// Each dataset publishes its read state through an atomic pointer. A reader
// takes a reference on the state it loaded (TryRef); replacing the state
// never waits for readers, and the old snapshot is unmapped when its last
// reader lets go. Results that alias a mapping (Result.Points) are valid
// until Result.Release; everything else is copied.
//
// The store does not know about HTTP, Excel, sync or Wails; those wire it
// up through small interfaces they declare themselves.
package localcache

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/internal/flock"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// Sentinel errors.
var (
	// ErrNotFound: no dataset of the home has the series.
	ErrNotFound = format.ErrNotFound
	// ErrNoDataset: the named dataset does not exist.
	ErrNoDataset = errors.New("dataset not found")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store closed")
	// ErrHomeLocked: another process (es serve, a companion) holds the
	// home's writer lock; Open of a writable store wraps it.
	ErrHomeLocked = flock.ErrLocked
)

// DatasetsDir is the directory of a home that holds the datasets.
const DatasetsDir = "datasets"

// LockFile is the file a writable store locks in its home.
const LockFile = "LOCK"

// WALDir is the directory of a dataset that holds its write-ahead log.
const WALDir = "wal"

// Options for Open. A nil *Options means defaults.
type Options struct {
	// Logger receives warnings (swept temp files, skipped datasets). Nil
	// discards.
	Logger *slog.Logger
	// ReadOnly opens without sweeping or writing anything, for processes
	// that read a home another process maintains: the snapshots are
	// immutable and the write-ahead log is read up to its last complete
	// batch, so such a reader sees the writer's latest applied state.
	ReadOnly bool
	// CompactRows and CompactBytes start a background compaction of a
	// dataset when its delta holds that many rows or bytes. Zero means the
	// default (1M rows, 64 MiB); negative disables that trigger.
	CompactRows  int
	CompactBytes int64
	// Keep is how many snapshots of a dataset stay on disk, the one in
	// service included. Zero means 2.
	Keep int
}

func (o *Options) withDefaults() Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if out.CompactRows == 0 {
		out.CompactRows = 1_000_000
	}
	if out.CompactBytes == 0 {
		out.CompactBytes = 64 << 20
	}
	if out.Keep <= 0 {
		out.Keep = 2
	}
	return out
}

// Store serves the datasets of one home directory.
type Store struct {
	home string
	opts Options

	mu       sync.RWMutex // guards datasets, names, closed
	datasets map[string]*Dataset
	names    []string // sorted keys of datasets
	closed   bool
	// list is datasets in names order, copy-on-write; isClosed mirrors
	// closed. Both are read without mu on the lookup path.
	list     atomic.Pointer[[]*Dataset]
	isClosed atomic.Bool
	lock     *flock.Lock // held by a writable store

	watchMu   sync.Mutex // guards watchers, nextWatch
	watchers  map[int]func(dataset string, ids []string)
	nextWatch int
}

// Dataset is one dataset of a store.
type Dataset struct {
	name string
	dir  string
	cur  atomic.Pointer[readState] // the state in service; holds one reference on its snapshot

	// wmu serializes writers (Apply, the swap of Compact and Install,
	// Refresh); readers never take it. It guards wal.
	wmu sync.Mutex
	wal *delta.WAL
	// cmu serializes compactions and installs, which run mostly outside
	// wmu so that Apply keeps flowing while a snapshot is written.
	cmu        sync.Mutex
	compacting atomic.Bool
	lastSync   atomic.Int64 // unix nanos of the last Apply or Install
	// retired holds replaced snapshots that readers may still map, so that
	// retention deletes their directories only once the last reader lets
	// go. Guarded by wmu.
	retired []*snapshot.Snapshot
}

// readState is what a reader sees: a snapshot and the delta over it.
// Both are replaced together by one pointer swap.
type readState struct {
	snap  *snapshot.Snapshot
	delta *delta.Delta
}

// Name is the dataset's name.
func (d *Dataset) Name() string { return d.name }

// Dir is the dataset's directory.
func (d *Dataset) Dir() string { return d.dir }

// acquire returns the current read state with a reference taken on its
// snapshot; release it with rs.snap.Unref().
func (d *Dataset) acquire() (*readState, error) {
	for {
		rs := d.cur.Load()
		if rs == nil {
			return nil, ErrClosed
		}
		if rs.snap.TryRef() {
			return rs, nil
		}
		// Swapped and released between Load and TryRef: load again.
	}
}

// swap installs rs as the state in service and drops the store's
// reference to the previous snapshot (unless rs keeps the same one).
func (d *Dataset) swap(rs *readState) {
	old := d.cur.Swap(rs)
	if old != nil && (rs == nil || old.snap != rs.snap) {
		old.snap.Unref()
	}
}

// Open opens every dataset under home/datasets. A home without datasets is
// an empty store, not an error; a dataset whose snapshot is corrupt makes
// Open fail with the corruption error (it is never served half-checked).
func Open(home string, opts *Options) (*Store, error) {
	s := &Store{home: home, opts: opts.withDefaults(), datasets: map[string]*Dataset{}}
	if !s.opts.ReadOnly {
		// One writer per home: the write-ahead logs and compactions assume
		// it. Readers (ReadOnly) need no lock.
		if err := os.MkdirAll(home, 0o755); err != nil {
			return nil, err
		}
		l, err := flock.TryLock(filepath.Join(home, LockFile))
		if errors.Is(err, flock.ErrLocked) {
			return nil, fmt.Errorf("home %s is in use by another EnergyScope process; stop it or open the home read-only: %w", home, err)
		} else if err != nil {
			return nil, fmt.Errorf("lock home %s: %w", home, err)
		}
		s.lock = l
	}
	if err := s.Refresh(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Home is the store's home directory.
func (s *Store) Home() string { return s.home }

// DatasetDir is where dataset name lives (whether or not it exists).
func (s *Store) DatasetDir(name string) string {
	return filepath.Join(s.home, DatasetsDir, name)
}

// Refresh picks up datasets created and snapshots published (CURRENT
// moved) since Open, by this or another process. A dataset whose new
// snapshot fails to open keeps serving its old one; the error is returned.
func (s *Store) Refresh() error {
	root := filepath.Join(s.home, DatasetsDir)
	ents, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if !e.IsDir() || format.ValidDatasetName(e.Name()) != nil {
			continue
		}
		if err := s.refreshDataset(e.Name()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Store) refreshDataset(name string) error {
	dir := s.DatasetDir(name)
	id, err := format.ReadCurrent(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil // being created
	} else if err != nil {
		return fmt.Errorf("dataset %s: %w", name, err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	d := s.datasets[name]
	if d == nil {
		d = &Dataset{name: name, dir: dir}
	}
	s.mu.Unlock()

	d.wmu.Lock()
	defer d.wmu.Unlock()
	if cur := d.cur.Load(); cur != nil && cur.snap.ID() == id {
		return nil
	}
	if !s.opts.ReadOnly {
		if n, err := format.SweepTemp(dir); err != nil {
			s.opts.Logger.Warn("sweep temporary snapshots", "dataset", name, "err", err)
		} else if n > 0 {
			s.opts.Logger.Warn("removed unfinished snapshots left by a crash", "dataset", name, "count", n)
		}
	}
	fresh := d.wal == nil
	rs, err := s.openStateLocked(d, id)
	// A read-only store reads files a writer in another process replaces:
	// the writer moves CURRENT and only then drops the log segments and
	// deletes the snapshots the new one covers. What was read is
	// consistent if CURRENT still names the same snapshot afterwards;
	// else read again.
	for try := 0; s.opts.ReadOnly && fresh && try < 100; try++ {
		now, cerr := format.ReadCurrent(dir)
		if cerr != nil || now == id {
			break
		}
		if err == nil {
			rs.snap.Close()
		}
		d.wal, id = nil, now
		rs, err = s.openStateLocked(d, id)
	}
	if err != nil {
		return fmt.Errorf("dataset %s: %w", name, err)
	}
	snap := rs.snap

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		snap.Close()
		return ErrClosed
	}
	if s.datasets[name] == nil {
		s.datasets[name] = d
		s.names = append(s.names, name)
		sort.Strings(s.names)
		list := make([]*Dataset, len(s.names))
		for i, n := range s.names {
			list[i] = s.datasets[n]
		}
		s.list.Store(&list)
	}
	d.swap(rs)
	return nil
}

// openStateLocked opens snapshot id of d and the delta over it. d.wmu is
// held.
func (s *Store) openStateLocked(d *Dataset, id string) (*readState, error) {
	snap, err := snapshot.Open(filepath.Join(d.dir, format.SnapshotsDir, id))
	if err != nil {
		return nil, err
	}
	if snap.Manifest.Dataset != d.name {
		snap.Close()
		return nil, fmt.Errorf("snapshot %s belongs to dataset %q", id, snap.Manifest.Dataset)
	}
	if snap.ID() != id {
		// Served, it would report another id than CURRENT, and every
		// Refresh would reopen and swap it again.
		snap.Close()
		return nil, &format.CorruptionError{File: format.ManifestFile, Offset: -1,
			Err: fmt.Errorf("directory %s holds snapshot %s", id, snap.ID())}
	}
	rs, err := s.openDeltaLocked(d, snap)
	if err != nil {
		snap.Close()
		return nil, err
	}
	return rs, nil
}

// openDeltaLocked opens the dataset's write-ahead log (once) and replays
// the records above what snap covers into a fresh delta. d.wmu is held.
func (s *Store) openDeltaLocked(d *Dataset, snap *snapshot.Snapshot) (*readState, error) {
	covers := snap.Manifest.CoversThroughSeq
	var recs []delta.Record
	if d.wal == nil {
		w, r, err := delta.OpenWAL(filepath.Join(d.dir, WALDir), s.opts.ReadOnly, covers, s.opts.Logger)
		if err != nil {
			return nil, fmt.Errorf("open write-ahead log: %w", err)
		}
		d.wal, recs = w, r
	} else if cur := d.cur.Load(); cur != nil {
		recs = cur.delta.Records(covers)
	}
	dl := delta.New(snap, covers)
	dl.Apply(recs)
	return &readState{snap: snap, delta: dl}, nil
}

// Close stops serving. Readers holding results keep their mappings until
// they Release them.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.isClosed.Store(true)
	var errs []error
	for _, d := range s.datasets {
		d.cmu.Lock() // let a running compaction finish
		d.wmu.Lock()
		d.swap(nil)
		if d.wal != nil {
			errs = append(errs, d.wal.Close())
		}
		d.wmu.Unlock()
		d.cmu.Unlock()
	}
	errs = append(errs, s.lock.Unlock())
	return errors.Join(errs...)
}

// DatasetNames lists the datasets, sorted.
func (s *Store) DatasetNames() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.names)
}

// Dataset returns the named dataset.
func (s *Store) Dataset(name string) (*Dataset, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	d := s.datasets[name]
	if d == nil {
		return nil, fmt.Errorf("%w: %q", ErrNoDataset, name)
	}
	return d, nil
}

// datasetList returns the datasets in name order without a lock or an
// allocation (every lookup without "dataset:" goes through it). The slice
// is immutable; refreshDataset replaces it.
func (s *Store) datasetList() ([]*Dataset, error) {
	if s.isClosed.Load() {
		return nil, ErrClosed
	}
	if l := s.list.Load(); l != nil {
		return *l, nil
	}
	return nil, nil
}

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

func (d *Dataset) find(id string) (located, bool, error) {
	rs, err := d.acquire()
	if err != nil {
		return located{}, false, err
	}
	l := located{d: d, rs: rs, id: id}
	if row, ok := rs.snap.Lookup(id); ok {
		l.row, l.inBase, l.pending = row, true, rs.delta.Touched(row)
		return l, true, nil
	}
	if rs.delta.Has(id) {
		l.pending = true
		return l, true, nil
	}
	rs.snap.Unref()
	return located{}, false, nil
}

// locate finds a series reference ("id" or "dataset:id").
func (s *Store) locate(ref string) (located, error) {
	if i := strings.IndexByte(ref, ':'); i > 0 {
		if d, err := s.Dataset(ref[:i]); err == nil {
			l, ok, err := d.find(ref[i+1:])
			if err != nil {
				return located{}, err
			}
			if !ok {
				return located{}, fmt.Errorf("%w: %q in dataset %s", ErrNotFound, ref[i+1:], d.name)
			}
			return l, nil
		}
	}
	ds, err := s.datasetList()
	if err != nil {
		return located{}, err
	}
	for _, d := range ds {
		if l, ok, err := d.find(ref); err == nil && ok {
			return l, nil
		}
	}
	return located{}, fmt.Errorf("%w: %q", ErrNotFound, ref)
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
func (r *Result) Release() {
	if r.snap != nil {
		r.snap.Unref()
		r.snap = nil
	}
	if r.buf != nil {
		r.buf.put()
		r.buf = nil
		r.Points = snapshot.Points{}
	}
}

// Get returns the points of series ref with from <= period <= to (unix
// seconds UTC, bucket starts; use snapshot.MinTime/MaxTime for open ends),
// the delta shadowing the snapshot. A series without pending changes is a
// slice of the mapping; one with changes is merged into a pooled buffer
// that Release recycles.
func (s *Store) Get(ref string, from, to int64) (Result, error) {
	l, err := s.locate(ref)
	if err != nil {
		return Result{}, err
	}
	res := Result{Dataset: l.d.name, snap: l.rs.snap}
	if !l.pending {
		res.Frequency = l.rs.snap.Frequency(l.row)
		if res.Points, err = l.rs.snap.Get(l.row, from, to); err != nil {
			res.Release()
			return Result{}, fmt.Errorf("get %s: %w", ref, err)
		}
		return res, nil
	}
	buf := getMergeBuf()
	pts, freq, _, err := l.merged(buf, from, to)
	if err != nil {
		buf.put()
		res.Release()
		return Result{}, fmt.Errorf("get %s: %w", ref, err)
	}
	res.Points, res.Frequency, res.buf = pts, freq, buf
	return res, nil
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
func (l located) merged(buf *mergeBuf, from, to int64) (snapshot.Points, format.Frequency, *delta.Meta, error) {
	var base snapshot.Points
	var freq format.Frequency
	if l.inBase {
		var err error
		if base, err = l.rs.snap.Get(l.row, from, to); err != nil {
			return snapshot.Points{}, "", nil, err
		}
		freq = l.rs.snap.Frequency(l.row)
	}
	var out snapshot.Points
	var meta *delta.Meta
	read := func(dp []delta.Point, dfreq format.Frequency, m *delta.Meta) {
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
	r, err := s.Get(ref, from, to)
	if err != nil {
		return nil, nil, err
	}
	defer r.Release()
	n := r.Points.Len()
	periods = make([]int64, n)
	for i := range periods {
		periods[i] = r.Points.Unix(i)
	}
	return periods, slices.Clone(r.Points.Values), nil
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
func (s *Store) Info(ref string) (Info, error) {
	l, err := s.locate(ref)
	if err != nil {
		return Info{}, err
	}
	defer l.rs.snap.Unref()
	m := l.rs.snap.Manifest
	in := Info{Dataset: l.d.name, SnapshotID: m.SnapshotID, Epoch: m.Epoch, Seq: l.rs.delta.LastSeq(), Updated: m.Created.Unix(), Pending: l.pending}
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
func (s *Store) Search(query string, limit int) ([]SearchHit, error) {
	ds, err := s.datasetList()
	if err != nil {
		return nil, err
	}
	q := strings.ToLower(strings.TrimSpace(query))
	var hits []SearchHit
	for _, d := range ds {
		rs, err := d.acquire()
		if err != nil {
			continue
		}
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
		rs.snap.Unref()
	}
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

// DatasetStatus describes a dataset for listings.
type DatasetStatus struct {
	Name         string
	Manifest     format.Manifest
	Dir          string // the snapshot directory in service
	Seq          uint64 // highest seq applied (snapshot + delta)
	DeltaSeries  int
	DeltaRows    int
	DeltaRecords int
	WALBytes     int64
	LastSync     int64 // unix nanos of the last Apply or Install by this process; 0 if none
}

// Status lists the datasets and their snapshots in service.
func (s *Store) Status() ([]DatasetStatus, error) {
	ds, err := s.datasetList()
	if err != nil {
		return nil, err
	}
	out := make([]DatasetStatus, 0, len(ds))
	for _, d := range ds {
		rs, err := d.acquire()
		if err != nil {
			continue
		}
		st := DatasetStatus{Name: d.name, Manifest: *rs.snap.Manifest, Dir: rs.snap.Dir, Seq: rs.delta.LastSeq()}
		st.DeltaSeries, st.DeltaRows, st.DeltaRecords, _ = rs.delta.Stats()
		d.wmu.Lock()
		if d.wal != nil {
			st.WALBytes = d.wal.Size()
		}
		d.wmu.Unlock()
		st.LastSync = d.lastSync.Load()
		rs.snap.Unref()
		out = append(out, st)
	}
	return out, nil
}
