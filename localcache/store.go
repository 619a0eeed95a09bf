package localcache

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/bits"
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
	// Publish, when set, is called for every snapshot a writable store is
	// about to put in service (Compact, CompactThrough, Install, the
	// install over a damaged dataset), with the finished snapshot placed
	// at dir (snapshots/<id>; its files were just written by format.Write
	// or checked against its manifest by Install, so the hook may trust
	// the manifest's hashes) and before CURRENT moves: the server
	// publishes it to its lake there, so the lake never lags what is
	// served. An error aborts that install: CURRENT does not move, the old
	// snapshot keeps serving, the delta keeps its records, and the placed
	// directory is removed (unless it was there before). The call holds
	// the dataset's compaction lock, not its write lock: Apply goes on
	// while it runs (except over a damaged dataset, which takes no Apply).
	Publish func(dataset, dir string, m *format.Manifest) error
	// CookPublish, when set, replaces format.Write into snapshots/<id>
	// followed by Publish for the snapshots a writable store's compaction
	// (Compact, CompactThrough) writes: the store calls it with cook, which
	// writes the snapshot into the format.Container it is given
	// (format.WriteSortedInto or WriteInto: the same bytes) and returns
	// its manifest; the hook creates the container where the snapshot is
	// to live, calls cook, publishes it and returns the manifest. The
	// store then opens the snapshot through OpenSnapshot (required with
	// CookPublish: the home holds no directory of it) and moves CURRENT:
	// the serving files are written once. The server cooks straight into
	// its lake's Puffin file (lake.PublishCooked). An error aborts the
	// compaction as a failed Publish does (CURRENT does not move, the old
	// snapshot keeps serving, the delta keeps its records); the hook
	// removes what it wrote. Snapshots written elsewhere and installed
	// (Install, the install over a damaged dataset) still go through
	// Publish with their directory. Same locks as Publish.
	CookPublish func(dataset string, cook func(*format.Container) (*format.Manifest, error)) (*format.Manifest, error)
	// OpenSnapshot, when set, opens snapshot id of dataset in place of
	// snapshot.Open of its directory: the server maps a vintage's
	// artifacts in place out of its lake's Puffin file. A snapshot it
	// returns with Dir "" lives elsewhere: a writable store then removes
	// the directory snapshots/<id> once that snapshot serves (the home
	// keeps no second copy); the scrub re-reads such a snapshot's
	// regions (snapshot.Region) as it re-reads a directory. The
	// hook falls back to the directory itself when it must (see
	// OpenSnapshotDir).
	OpenSnapshot func(dataset, id string) (*snapshot.Snapshot, error)
	// DeltaInMemory keeps each dataset's delta in memory only, with no
	// write-ahead log (delta.MemoryWAL): Apply makes a batch visible
	// without writing or fsyncing anything, and after a restart a
	// dataset's delta starts empty at the seq its snapshot covers. It is
	// for a store whose records are made durable elsewhere and applied
	// again from there after a restart: the server's, whose delta lives
	// in its JetStream delta log (server/deltalog). A companion's store
	// keeps its write-ahead log (the default). Write-ahead log
	// directories left in the home are neither read nor removed. An
	// install of another epoch starts the delta at its snapshot's covers
	// (the owner applies the records above them again from its log). With
	// ReadOnly, Apply is allowed and changes only this process's memory:
	// a reader of a server home overlays the records it read from the
	// server's delta log (server.OverlayHomeLog).
	DeltaInMemory bool
	// FormatVersion is the snapshot format version the store's
	// compactions (Compact, CompactThrough and the background ones)
	// write: 0 means format.FormatVersion; format.MinFormatVersion up to
	// it are allowed. A server of a fleet whose companions are not all
	// upgraded keeps writing the version they read (FORMAT.md,
	// "Compatibility"). A companion's local rebase writes the version of
	// the server's snapshot it reproduces (CompactThroughVersion).
	FormatVersion int
	// WarmSnapshots opens snapshots with snapshot.Options.Warm: large ones
	// are read into the page cache in 2 MiB folios in the background.
	WarmSnapshots bool
	// MappedIndex keeps every lookup on index.hash's file mapping. By
	// default a snapshot whose index.hash is 64 MiB or more (full scale:
	// 185 MiB) serves lookups from a copy of it in 2 MiB pages once the
	// copy is made, in the background after open
	// (snapshot.Options.HugeIndex): it costs that much RAM from the
	// start, and spares every lookup the page walks of a table read at
	// random through 4 KiB page-cache folios.
	MappedIndex bool
}

// openWAL opens the write-ahead log in dir, or a MemoryWAL when the
// delta is kept in memory only.
func (s *Store) openWAL(dir string, readOnly bool, skipThrough uint64) (*delta.WAL, []format.Record, error) {
	if s.opts.DeltaInMemory {
		return delta.MemoryWAL(), nil, nil
	}
	return delta.OpenWAL(dir, readOnly, skipThrough, s.opts.Logger)
}

// openSnapshot opens snapshot id of d through Options.OpenSnapshot, or
// its directory.
func (s *Store) openSnapshot(d *Dataset, id string) (*snapshot.Snapshot, error) {
	if s.opts.OpenSnapshot != nil {
		return s.opts.OpenSnapshot(d.name, id)
	}
	return s.OpenSnapshotDir(d.name, id)
}

// OpenSnapshotDir opens snapshot id of dataset from its directory in the
// home (what the store does without Options.OpenSnapshot).
func (s *Store) OpenSnapshotDir(dataset, id string) (*snapshot.Snapshot, error) {
	return snapshot.OpenOptions(filepath.Join(s.DatasetDir(dataset), format.SnapshotsDir, id), snapshot.Options{Warm: s.opts.WarmSnapshots, HugeIndex: !s.opts.MappedIndex})
}

// dropDirIfElsewhere removes the directory of snap's id when snap is
// mapped from elsewhere (Dir ""): the home keeps no second copy. d.mu is
// held; snap serves.
func (s *Store) dropDirIfElsewhere(d *Dataset, snap *snapshot.Snapshot) {
	if snap.Dir != "" || s.opts.ReadOnly {
		return
	}
	dir := filepath.Join(d.dir, format.SnapshotsDir, snap.ID())
	if _, err := os.Stat(dir); err != nil {
		return
	}
	if err := os.RemoveAll(dir); err != nil {
		s.opts.Logger.Warn("remove the directory of a snapshot served from elsewhere", "dataset", d.name, "dir", dir, "err", err)
	}
}

// Remap opens the snapshot dataset serves again through
// Options.OpenSnapshot and swaps it in with the same delta: the server
// calls it once the snapshot it served from the home's directory has
// been published to its lake, to serve it from there.
func (s *Store) Remap(dataset string) error {
	d, err := s.writable(dataset)
	if err != nil {
		return err
	}
	d.cmu.Lock()
	defer d.cmu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	cur := d.cur.Load()
	if cur == nil {
		return ErrClosed
	}
	snap, err := s.openSnapshot(d, cur.snap.ID())
	if err != nil {
		return fmt.Errorf("remap %s: %w", dataset, err)
	}
	if snap.ID() != cur.snap.ID() {
		snap.Close()
		return fmt.Errorf("remap %s: opened %s for %s", dataset, snap.ID(), cur.snap.ID())
	}
	// The same records over the same snapshot's other mapping. With none
	// pending, the delta may start above covers (a new epoch's floor).
	recs := cur.delta.Records(snap.Manifest.CoversThroughSeq)
	floor := snap.Manifest.CoversThroughSeq
	if len(recs) == 0 {
		floor = cur.delta.LastSeq()
	}
	dl := delta.New(snap, floor)
	dl.Apply(recs)
	old := cur.snap
	if old.TryRef() {
		// The directory goes after the old mapping's last reader (below).
		defer old.Unref()
	}
	d.swap(&readState{snap: snap, delta: dl})
	if snap.Dir == "" && old.Dir != "" {
		dir := old.Dir
		old.OnClose(func() {
			if err := os.RemoveAll(dir); err != nil {
				s.opts.Logger.Warn("remove the directory of a snapshot served from elsewhere", "dataset", d.name, "dir", dir, "err", err)
			}
		})
	}
	return nil
}

// SnapshotFile is one file of a snapshot in service, open for reading
// wherever it lives. It holds a reference on the snapshot until Close.
type SnapshotFile struct {
	*io.SectionReader
	snap   *snapshot.Snapshot
	closed atomic.Bool
}

// Close releases the snapshot.
func (f *SnapshotFile) Close() error {
	if f.closed.CompareAndSwap(false, true) {
		f.snap.Unref()
	}
	return nil
}

// OpenSnapshotFile opens the file whose SHA-256 is sha of the snapshot
// dataset serves (a directory's file or a mapped region: the server
// streams it to companions). ErrNotFound if it has none.
func (s *Store) OpenSnapshotFile(dataset, sha string) (*SnapshotFile, error) {
	d, err := s.Dataset(dataset)
	if err != nil {
		return nil, err
	}
	rs, err := d.acquire()
	if err != nil {
		return nil, err
	}
	for _, f := range rs.snap.Manifest.Files {
		if f.SHA256 != sha {
			continue
		}
		r, size, err := rs.snap.OpenFile(f.Name)
		if err != nil {
			break
		}
		return &SnapshotFile{SectionReader: io.NewSectionReader(r, 0, size), snap: rs.snap}, nil
	}
	rs.snap.Unref()
	return nil, fmt.Errorf("%w: no file with sha256 %s in the snapshot %s serves", ErrNotFound, sha, dataset)
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

	// mu guards the set of datasets and the closed flag. Writers of the
	// set (refreshDataset, Close) take it exclusively; Dataset and
	// DatasetNames share it.
	mu struct {
		sync.RWMutex
		datasets map[string]*Dataset
		names    []string // sorted keys of datasets
		closed   bool
	}
	// list is mu.datasets in mu.names order, copy-on-write; isClosed
	// mirrors mu.closed. Both are read without mu on the lookup path.
	list     atomic.Pointer[datasetList]
	isClosed atomic.Bool
	lock     *flock.Lock // held by a writable store
	// closeMu serializes Close, so that a second Close returns only once
	// the first has closed everything. Nothing else takes it.
	closeMu sync.Mutex

	// watch guards the callbacks registered by Watch.
	watch struct {
		sync.Mutex
		fns  map[int]func(dataset string, ids []string)
		next int // id of the next registration
	}

	// nameLocks guards m, the per-name mutexes that serialize the
	// operations that create or replace a dataset's snapshot (Install,
	// the first open of a dataset by Refresh), including for names that
	// do not exist yet (see lockName).
	nameLocks struct {
		sync.Mutex
		m map[string]*sync.Mutex
	}

	metrics storeMetrics
	scrub   *scrubber // nil when disabled or read-only
}

// lockName takes the per-name install lock of dataset name and returns
// its unlock.
func (s *Store) lockName(name string) func() {
	s.nameLocks.Lock()
	if s.nameLocks.m == nil {
		s.nameLocks.m = map[string]*sync.Mutex{}
	}
	m := s.nameLocks.m[name]
	if m == nil {
		m = new(sync.Mutex)
		s.nameLocks.m[name] = m
	}
	s.nameLocks.Unlock()
	m.Lock()
	return m.Unlock
}

// Dataset is one dataset of a store.
type Dataset struct {
	name string
	dir  string
	cur  atomic.Pointer[readState] // the state in service; holds one reference on its snapshot

	// mu serializes writers (Apply, the swap of Compact and Install,
	// Refresh, Truncate); readers never take it. It guards the fields
	// of the struct.
	mu struct {
		sync.Mutex
		wal *delta.WAL
		// retired holds replaced snapshots that readers may still map, so
		// that retention deletes their directories only once the last
		// reader lets go.
		retired []*snapshot.Snapshot
		// lostCurrent: the dataset was found without a readable CURRENT,
		// so the epoch of its write-ahead log records is unknown.
		lostCurrent bool
	}
	// cmu serializes compactions and installs, which run mostly outside
	// mu so that Apply keeps flowing while a snapshot is written. It
	// guards no field; it is taken before mu.
	cmu        sync.Mutex
	compacting atomic.Bool
	lastSync   atomic.Int64 // unix nanos of the last Apply or Install

	// damage is non-nil while the dataset is damaged (see damage.go);
	// readers check it before they touch the read state. cur may be nil
	// then (nothing could be opened) or the state that faulted.
	damage atomic.Pointer[DamageError]
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

// lockWrite locks d.mu for a write and returns the state in service.
// When the dataset is closed it returns ErrClosed with d.mu not held.
func (d *Dataset) lockWrite() (*readState, error) {
	d.mu.Lock()
	rs := d.cur.Load()
	if rs == nil {
		d.mu.Unlock()
		return nil, ErrClosed
	}
	return rs, nil
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
	s := &Store{home: home, opts: opts.withDefaults()}
	if v := s.opts.FormatVersion; v != 0 && (v < format.MinFormatVersion || v > format.FormatVersion) {
		return nil, fmt.Errorf("localcache: Options.FormatVersion %d is not %d..%d: %w", v, format.MinFormatVersion, format.FormatVersion, ErrFormatVersion)
	}
	if s.opts.CookPublish != nil && s.opts.OpenSnapshot == nil {
		return nil, errors.New("localcache: Options.CookPublish needs Options.OpenSnapshot (the snapshot it publishes has no directory in the home)")
	}
	s.mu.datasets = map[string]*Dataset{}
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
	if s.mu.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	d := s.mu.datasets[name]
	if d == nil {
		d = &Dataset{name: name, dir: dir}
	}
	s.mu.Unlock()

	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		if d.cur.Load() != nil {
			// Still serving what it opened: report, keep serving.
			return fmt.Errorf("dataset %s: %w", name, err)
		}
		if lost || errors.As(err, new(*format.CorruptionError)) {
			d.mu.lostCurrent = true
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
	fresh := d.mu.wal == nil
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
		d.mu.wal, id = nil, now
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
	if s.mu.closed {
		snap.Close()
		return ErrClosed
	}
	s.registerLocked(d)
	d.swap(rs)
	s.dropDirIfElsewhere(d, snap)
	d.mu.lostCurrent = false
	if d.damage.Swap(nil) != nil {
		s.opts.Logger.Info("damaged dataset serves again", "dataset", name, "snapshot", snap.ID())
	}
	s.scrubLater(d, snap)
	return nil
}

// registerLocked adds d to the store's datasets if it is new. s.mu is
// held.
func (s *Store) registerLocked(d *Dataset) {
	if s.mu.datasets[d.name] != nil {
		return
	}
	s.mu.datasets[d.name] = d
	s.mu.names = append(s.mu.names, d.name)
	sort.Strings(s.mu.names)
	list := &datasetList{ds: make([]*Dataset, len(s.mu.names))}
	for i, n := range s.mu.names {
		list.ds[i] = s.mu.datasets[n]
		if len(n) < 64 && !strings.Contains(n, ":") {
			list.nameLens |= 1 << len(n)
		} else {
			list.nameLens |= 1 // never for a valid name (format.ValidDatasetName)
		}
	}
	s.list.Store(list)
}

// datasetList is the store's datasets in name order, with what the
// lookup path needs to tell "dataset:id" from a plain id without
// scanning ref for ':' (strings.IndexByte was ~34 of a lookup's ~1,280
// instructions, BENCHMARKS.md "Fewer instructions on the mapped Get").
type datasetList struct {
	ds []*Dataset
	// nameLens has bit k set when a dataset's name is k bytes long; bit
	// 0 when a name is 64 bytes or longer or holds ':' (names are
	// validated, so never), which sends every ref through locate.
	nameLens uint64
}

// mayName reports whether ref may start with "name:" for one of the
// datasets: a ':' right after the first k bytes, k a name length. (Names
// hold no ':', so ref[:i] names a dataset, i = strings.IndexByte(ref,
// ':'), only if ref[k] == ':' for k = i.) False means ref is a plain id.
func (l *datasetList) mayName(ref string) bool {
	for m := l.nameLens; m != 0; m &= m - 1 {
		k := bits.TrailingZeros64(m)
		if k == 0 || k < len(ref) && ref[k] == ':' {
			return true
		}
	}
	return false
}

// registerDamagedLocked lists d as damaged by cause: it is reported, and
// refuses lookups, but does not fail Open or Refresh. d.mu is held.
func (s *Store) registerDamagedLocked(d *Dataset, cause error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
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

// openStateLocked opens snapshot id of d and the delta over it. d.mu is
// held.
func (s *Store) openStateLocked(d *Dataset, id string) (*readState, error) {
	snap, err := s.openSnapshot(d, id)
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
// belong to another epoch (see epoch.go). d.mu is held.
func (s *Store) openDeltaLocked(d *Dataset, snap *snapshot.Snapshot) (*readState, error) {
	covers := snap.Manifest.CoversThroughSeq
	last := covers
	var recs []format.Record
	if d.mu.wal == nil {
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
		w, r, err := s.openWAL(filepath.Join(d.dir, WALDir), s.opts.ReadOnly, skip)
		if err != nil {
			return nil, fmt.Errorf("open write-ahead log: %w", err)
		}
		d.mu.wal, recs = w, r
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
		} else if !s.opts.DeltaInMemory {
			last = max(last, cur.delta.LastSeq())
		}
		// In memory, a new epoch's delta starts at its covers: the records
		// the store applied above them belong to the new epoch (the log
		// numbered them after the replacement's covers) and its owner
		// applies them again from its log.
	}
	dl := delta.New(snap, last)
	dl.Apply(recs)
	return &readState{snap: snap, delta: dl}, nil
}

// retireWALLocked makes every record of d's log with seq <= floor history:
// the marker first (from then on nothing at or below floor is replayed),
// then a fresh segment above floor, then the old segments go. d.mu is
// held.
func (s *Store) retireWALLocked(d *Dataset, epoch, floor uint64) error {
	if err := writeEpochMarker(d.dir, epoch, floor); err != nil {
		return fmt.Errorf("write %s: %w", EpochFile, err)
	}
	if err := d.mu.wal.Rotate(floor + 1); err != nil {
		return fmt.Errorf("rotate write-ahead log: %w", err)
	}
	if err := d.mu.wal.DropThrough(floor); err != nil {
		s.opts.Logger.Warn("drop retired write-ahead log segments", "dataset", d.name, "err", err)
	}
	return nil
}

// Close stops serving. Readers holding results keep their mappings until
// they Release them.
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	s.isClosed.Store(true)
	if s.scrub != nil {
		s.scrub.stop() // it takes no s.mu: no deadlock
	}
	// Closed, the set of datasets no longer changes. s.mu is let go before
	// any d.mu is taken: refreshDataset takes s.mu while it holds d.mu, so
	// holding both here in the other order deadlocked a Close that ran
	// during a Refresh (TestCloseDuringRefreshDoesNotDeadlock).
	ds := make([]*Dataset, 0, len(s.mu.datasets))
	for _, d := range s.mu.datasets {
		ds = append(ds, d)
	}
	s.mu.Unlock()
	var errs []error
	for _, d := range ds {
		d.cmu.Lock() // let a running compaction finish
		d.mu.Lock()
		d.swap(nil)
		if d.mu.wal != nil {
			errs = append(errs, d.mu.wal.Close())
			d.mu.wal = nil
		}
		d.mu.Unlock()
		d.cmu.Unlock()
	}
	errs = append(errs, s.lock.Unlock())
	return errors.Join(errs...)
}

// DatasetNames lists the datasets, sorted.
func (s *Store) DatasetNames() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.mu.names)
}

// Dataset returns the named dataset.
func (s *Store) Dataset(name string) (*Dataset, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed {
		return nil, ErrClosed
	}
	d := s.mu.datasets[name]
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
		return l.ds, nil
	}
	return nil, nil
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
	LastSync     int64              // unix nanos of the last Apply or Install by this process; 0 if none
	Index        snapshot.IndexCopy // where lookups read index.hash from (Options.MappedIndex)
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
		d.mu.Lock()
		if d.mu.wal != nil {
			st.WALBytes = d.mu.wal.Size()
		}
		d.mu.Unlock()
		st.LastSync = d.lastSync.Load()
		st.Index = rs.snap.IndexCopy()
		rs.snap.Unref()
		out = append(out, st)
	}
	return out, nil
}
