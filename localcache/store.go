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
	"runtime/debug"
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
	// ScrubBytesPerSec is the read rate of the background scrub that
	// re-hashes each snapshot put in service (see scrub.go). Zero means
	// DefaultScrubBytesPerSec; negative disables the scrub. A read-only
	// store never scrubs.
	ScrubBytesPerSec int64
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
	if out.ScrubBytesPerSec == 0 {
		out.ScrubBytesPerSec = DefaultScrubBytesPerSec
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

	// nameMu serializes, per dataset name, the operations that create or
	// replace a dataset's snapshot (Install, the first open of a dataset
	// by Refresh), including for names that do not exist yet.
	nameMuMu sync.Mutex
	nameMu   map[string]*sync.Mutex

	metrics storeMetrics
	scrub   *scrubber // nil when disabled or read-only
}

// lockName takes the per-name install lock of dataset name and returns
// its unlock.
func (s *Store) lockName(name string) func() {
	s.nameMuMu.Lock()
	if s.nameMu == nil {
		s.nameMu = map[string]*sync.Mutex{}
	}
	m := s.nameMu[name]
	if m == nil {
		m = new(sync.Mutex)
		s.nameMu[name] = m
	}
	s.nameMuMu.Unlock()
	m.Lock()
	return m.Unlock
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

	// damage is non-nil while the dataset is damaged (see damage.go);
	// readers check it before they touch the read state. cur may be nil
	// then (nothing could be opened) or the state that faulted.
	damage atomic.Pointer[DamageError]
	// lostCurrent: the dataset was found without a readable CURRENT, so
	// the epoch of its write-ahead log records is unknown. Guarded by wmu.
	lostCurrent bool
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
// snapshot; release it with rs.snap.Unref(). A damaged dataset gives its
// *DamageError.
func (d *Dataset) acquire() (*readState, error) {
	for {
		if de := d.damage.Load(); de != nil {
			return nil, de
		}
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
// an empty store, not an error. Each dataset opens on its own: one whose
// CURRENT, snapshot or write-ahead log is damaged is listed as damaged
// (see Damaged, Status) and refuses lookups, while the others serve; it
// is never served half-checked.
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
	s.startScrub()
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
// A dataset with nothing to serve (its first open failed) is marked
// damaged instead, and a later Refresh that opens it clears that.
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
		unlock := s.lockName(e.Name())
		err := s.refreshDataset(e.Name())
		unlock()
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// refreshDataset opens dataset name, or its new snapshot. The caller
// holds lockName(name).
func (s *Store) refreshDataset(name string) error {
	dir := s.DatasetDir(name)
	id, err := format.ReadCurrent(dir)
	lost := false
	if errors.Is(err, os.ErrNotExist) {
		if !hadLife(dir) {
			return nil // being created
		}
		// A dataset that was opened before (it has a write-ahead log) and
		// lost CURRENT is damaged, not absent: its records are still there.
		lost = true
		err = &format.CorruptionError{File: format.CurrentFile, Offset: -1, Err: errors.New("missing, but the dataset has a write-ahead log")}
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
	if err != nil {
		if d.cur.Load() != nil {
			// Still serving what it opened: report, keep serving.
			return fmt.Errorf("dataset %s: %w", name, err)
		}
		if lost || errors.As(err, new(*format.CorruptionError)) {
			d.lostCurrent = true
		}
		return s.registerDamagedLocked(d, err)
	}
	if cur := d.cur.Load(); cur != nil && cur.snap.ID() == id {
		return nil
	}
	if !s.opts.ReadOnly && d.cur.Load() == nil && d.damage.Load() == nil {
		// Only at the first open of the dataset by this store, under the
		// name lock: no install of this store is writing a temp directory
		// of it, and the home lock keeps other writers out.
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
		if d.cur.Load() == nil {
			return s.registerDamagedLocked(d, err)
		}
		return fmt.Errorf("dataset %s: %w", name, err)
	}
	snap := rs.snap

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		snap.Close()
		return ErrClosed
	}
	s.registerLocked(d)
	d.swap(rs)
	d.lostCurrent = false
	if d.damage.Swap(nil) != nil {
		s.opts.Logger.Info("damaged dataset serves again", "dataset", name, "snapshot", snap.ID())
	}
	s.scrubLater(d, snap)
	return nil
}

// registerLocked adds d to the store's datasets if it is new. s.mu is
// held.
func (s *Store) registerLocked(d *Dataset) {
	if s.datasets[d.name] != nil {
		return
	}
	s.datasets[d.name] = d
	s.names = append(s.names, d.name)
	sort.Strings(s.names)
	list := make([]*Dataset, len(s.names))
	for i, n := range s.names {
		list[i] = s.datasets[n]
	}
	s.list.Store(&list)
}

// registerDamagedLocked lists d as damaged by cause: it is reported, and
// refuses lookups, but does not fail Open or Refresh. d.wmu is held.
func (s *Store) registerDamagedLocked(d *Dataset, cause error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.registerLocked(d)
	s.markDamaged(d, cause)
	return nil
}

// hadLife reports whether a dataset directory without CURRENT was opened
// by a writable store before (it has a write-ahead log or an epoch
// marker): then CURRENT was lost. A dataset being created has neither
// until its CURRENT is written.
func hadLife(dir string) bool {
	for _, n := range []string{WALDir, EpochFile} {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			return true
		}
	}
	return false
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
		return nil, &format.CorruptionError{File: format.ManifestFile, Offset: -1,
			Err: fmt.Errorf("snapshot %s belongs to dataset %q", id, snap.Manifest.Dataset)}
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
// the records above what snap covers into a fresh delta, unless they
// belong to another epoch (see epoch.go). d.wmu is held.
func (s *Store) openDeltaLocked(d *Dataset, snap *snapshot.Snapshot) (*readState, error) {
	covers := snap.Manifest.CoversThroughSeq
	last := covers
	var recs []delta.Record
	if d.wal == nil {
		mk, err := readEpochMarker(d.dir)
		if err != nil {
			return nil, err
		}
		if mk.ok {
			last = max(last, mk.floor)
		}
		retire := mk.ok && mk.epoch != snap.Manifest.Epoch
		skip := last
		if retire {
			skip = 0 // read them all, for the highest seq
		}
		w, r, err := delta.OpenWAL(filepath.Join(d.dir, WALDir), s.opts.ReadOnly, skip, s.opts.Logger)
		if err != nil {
			return nil, fmt.Errorf("open write-ahead log: %w", err)
		}
		d.wal, recs = w, r
		if retire {
			for _, r := range recs {
				last = max(last, r.Seq)
			}
			recs = nil
			s.opts.Logger.Warn("write-ahead log belongs to another epoch; retiring it", "dataset", d.name, "log_epoch", mk.epoch, "snapshot_epoch", snap.Manifest.Epoch, "floor", last)
			if !s.opts.ReadOnly {
				if err := s.retireWALLocked(d, snap.Manifest.Epoch, last); err != nil {
					return nil, err
				}
			}
		} else if !mk.ok && !s.opts.ReadOnly {
			// A log from before epoch markers: it belongs to the snapshot in
			// service, as it always did.
			if err := writeEpochMarker(d.dir, snap.Manifest.Epoch, 0); err != nil {
				return nil, fmt.Errorf("write %s: %w", EpochFile, err)
			}
		}
	} else if cur := d.cur.Load(); cur != nil {
		if cur.snap.Manifest.Epoch == snap.Manifest.Epoch {
			recs = cur.delta.Records(covers)
		} else {
			last = max(last, cur.delta.LastSeq())
		}
	}
	dl := delta.New(snap, last)
	dl.Apply(recs)
	return &readState{snap: snap, delta: dl}, nil
}

// retireWALLocked makes every record of d's log with seq <= floor history:
// the marker first (from then on nothing at or below floor is replayed),
// then a fresh segment above floor, then the old segments go. d.wmu is
// held.
func (s *Store) retireWALLocked(d *Dataset, epoch, floor uint64) error {
	if err := writeEpochMarker(d.dir, epoch, floor); err != nil {
		return fmt.Errorf("write %s: %w", EpochFile, err)
	}
	if err := d.wal.Rotate(floor + 1); err != nil {
		return fmt.Errorf("rotate write-ahead log: %w", err)
	}
	if err := d.wal.DropThrough(floor); err != nil {
		s.opts.Logger.Warn("drop retired write-ahead log segments", "dataset", d.name, "err", err)
	}
	return nil
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
	if s.scrub != nil {
		s.scrub.stop() // it takes no s.mu: no deadlock
	}
	var errs []error
	for _, d := range s.datasets {
		d.cmu.Lock() // let a running compaction finish
		d.wmu.Lock()
		d.swap(nil)
		if d.wal != nil {
			errs = append(errs, d.wal.Close())
			d.wal = nil
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

// find looks id up in d. r records what is being read for the fault
// guard of the caller.
func (d *Dataset) find(id string, r *reading) (located, bool, error) {
	r.d = d
	rs, err := d.acquire()
	if err != nil {
		return located{}, false, err
	}
	r.snap = rs.snap
	l := located{d: d, rs: rs, id: id}
	if row, ok := rs.snap.Lookup(id); ok {
		l.row, l.inBase, l.pending = row, true, rs.delta.Touched(row)
		return l, true, nil
	}
	if rs.delta.Has(id) {
		l.pending = true
		return l, true, nil
	}
	r.snap = nil
	rs.snap.Unref()
	return located{}, false, nil
}

// locate finds a series reference ("id" or "dataset:id"). A damaged
// dataset named explicitly gives its *DamageError; an id found in no
// healthy dataset while some dataset is damaged gives an error that wraps
// both ErrNotFound and the damage (the series may be in the damaged one).
// r is the caller's fault-guard record; on success r.snap is l.rs.snap.
func (s *Store) locate(ref string, r *reading) (located, error) {
	if i := strings.IndexByte(ref, ':'); i > 0 {
		if d, err := s.Dataset(ref[:i]); err == nil {
			l, ok, err := d.find(ref[i+1:], r)
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
	var damaged error
	for _, d := range ds {
		l, ok, err := d.find(ref, r)
		if err == nil && ok {
			return l, nil
		}
		if damaged == nil && errors.Is(err, ErrDamaged) {
			damaged = err
		}
	}
	r.d = nil
	if damaged != nil {
		return located{}, fmt.Errorf("%w: %q (%w)", ErrNotFound, ref, damaged)
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
//
// Get itself never faults on a mapped file that shrank underneath (the
// fault becomes a CorruptionError and marks the dataset damaged), but the
// caller's reads of Points are outside that guard: callers that cannot
// afford a fault read through Copy or View.
func (s *Store) Get(ref string, from, to int64) (res Result, err error) {
	var r reading
	defer s.guard(debug.SetPanicOnFault(true), &r, &err)
	// The plain path is get's, inlined: one call level less is what keeps
	// the guard within a few percent of a lookup (BenchmarkTrustGetGuard).
	l, err := s.locate(ref, &r)
	if err != nil {
		return Result{}, err
	}
	if l.pending {
		err = s.getMerged(l, ref, from, to, &r, &res)
		return res, err
	}
	res = Result{Dataset: l.d.name, snap: l.rs.snap, Frequency: l.rs.snap.Frequency(l.row)}
	if res.Points, err = l.rs.snap.Get(l.row, from, to); err != nil {
		r.snap = nil
		res.Release()
		return Result{}, fmt.Errorf("get %s: %w", ref, s.damagedIf(l.d, err))
	}
	r.snap = nil // handed to the caller with res
	return res, nil
}

// get is Get into *res (not returned: a Result is 15 words, and copying it
// through one more call level cost more than the fault guard), for the
// guarded callers. r is the caller's fault-guard record.
func (s *Store) get(ref string, from, to int64, r *reading, res *Result) error {
	l, err := s.locate(ref, r)
	if err != nil {
		return err
	}
	*res = Result{Dataset: l.d.name, snap: l.rs.snap}
	if !l.pending {
		res.Frequency = l.rs.snap.Frequency(l.row)
		if res.Points, err = l.rs.snap.Get(l.row, from, to); err != nil {
			r.snap = nil
			res.Release()
			return fmt.Errorf("get %s: %w", ref, s.damagedIf(l.d, err))
		}
		r.snap = nil // handed to the caller with res
		return nil
	}
	return s.getMerged(l, ref, from, to, r, res)
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
	l, err := s.locate(ref, &r)
	if err != nil {
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

// DatasetStatus describes a dataset for listings. A damaged dataset has
// Health Damaged and Err (a *DamageError) set; its other fields hold what
// is known (all zero when nothing could be opened).
type DatasetStatus struct {
	Name         string
	Health       Health
	Err          error // why the dataset is damaged; nil when Healthy
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
		st := DatasetStatus{Name: d.name}
		if de := d.damage.Load(); de != nil {
			st.Health, st.Err = Damaged, de
		}
		rs := d.cur.Load()
		if rs == nil || !rs.snap.TryRef() {
			if st.Health == Damaged {
				out = append(out, st)
			}
			continue
		}
		st.Manifest, st.Dir, st.Seq = *rs.snap.Manifest, rs.snap.Dir, rs.delta.LastSeq()
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
