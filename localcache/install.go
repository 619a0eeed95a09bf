package localcache

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/energyscope/energyscope/internal/fileutil"
	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// placeSnapshot renames a finished temporary snapshot directory to its id
// (or drops it if that snapshot is already there: same id, same bytes).
// created reports whether the directory is new.
func placeSnapshot(datasetDir, tmp, id string) (created bool, err error) {
	root := filepath.Join(datasetDir, format.SnapshotsDir)
	final := filepath.Join(root, id)
	if _, err := os.Stat(final); err == nil {
		return false, os.RemoveAll(tmp)
	}
	return true, fileutil.Rename(tmp, final)
}

// publishPlaced runs Options.Publish for the snapshot m placed in d's
// snapshots directory, before CURRENT moves. When it fails, a directory
// this install created is removed again (it would only wait for
// retention: nothing names it) and the error is returned. The caller
// holds d.cmu.
func (s *Store) publishPlaced(d *Dataset, m *format.Manifest, created bool) error {
	if s.opts.Publish == nil {
		return nil
	}
	dir := filepath.Join(d.dir, format.SnapshotsDir, m.SnapshotID)
	err := s.opts.Publish(d.name, dir, m)
	if err == nil {
		return nil
	}
	if created {
		if cur := d.cur.Load(); cur == nil || cur.snap.ID() != m.SnapshotID {
			if rerr := os.RemoveAll(dir); rerr != nil {
				s.opts.Logger.Warn("remove a snapshot that failed to publish", "dataset", d.name, "dir", dir, "err", rerr)
			}
		}
	}
	return fmt.Errorf("publish snapshot %s: %w", m.SnapshotID, err)
}

// installPublished opens the placed snapshot m, swaps it in with the delta
// records it does not cover, moves CURRENT, trims the log and retires old
// snapshots. newEpoch drops every pending record (a full replacement).
// d.cmu is held.
func (s *Store) installPublished(d *Dataset, m *format.Manifest, newEpoch bool) error {
	snap, err := s.openSnapshot(d, m.SnapshotID)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	cur := d.cur.Load()
	if cur == nil {
		snap.Close()
		return ErrClosed
	}
	covers := m.CoversThroughSeq
	var recs []format.Record
	lastSeq := covers
	if !newEpoch {
		recs = cur.delta.Records(covers)
	} else if l := cur.delta.LastSeq(); l > lastSeq && !s.opts.DeltaInMemory {
		// Sequence numbers keep increasing across epochs. (In memory, the
		// new epoch's delta starts at covers: the records above them are
		// the new epoch's, applied again by the store's owner from its
		// log; see Options.DeltaInMemory.)
		lastSeq = l
	}
	dl := delta.New(snap, lastSeq)
	dl.Apply(recs)
	if err := s.walReadyLocked(d, cur); err != nil {
		snap.Close()
		return fmt.Errorf("write-ahead log: %w", err)
	}
	if err := d.mu.wal.Rotate(max(lastSeq, cur.delta.LastSeq()) + 1); err != nil {
		snap.Close()
		return fmt.Errorf("rotate write-ahead log: %w", err)
	}
	// CURRENT moves after the snapshot is in place and before the log is
	// trimmed: a crash before this line restarts on the old snapshot with
	// the full log, one after it on the new snapshot with the records it
	// does not cover; both are the same state. It moves before the swap so
	// that a failure leaves everything as it was: the old state keeps
	// serving and the call fails (the swap itself cannot fail).
	if err := format.WriteCurrent(d.dir, m.SnapshotID); err != nil {
		snap.Close()
		return fmt.Errorf("move CURRENT: %w", err)
	}
	old := cur.snap
	// Hold the old snapshot until retireLocked has registered its deletion:
	// with no reader left, the swap would release it first and the
	// deletion would never run.
	if old.TryRef() {
		defer old.Unref()
	}
	d.swap(&readState{snap: snap, delta: dl})
	s.dropDirIfElsewhere(d, snap)
	d.lastSync.Store(time.Now().UnixNano())
	s.scrubLater(d, snap)
	dropThrough := covers
	if newEpoch {
		dropThrough = ^uint64(0)
		// After CURRENT: a crash before this line restarts on the new
		// snapshot with the old epoch's marker, and Open retires the log.
		if err := writeEpochMarker(d.dir, m.Epoch, lastSeq); err != nil {
			s.opts.Logger.Warn("write epoch marker", "dataset", d.name, "err", err)
		}
	}
	if err := d.mu.wal.DropThrough(dropThrough); err != nil {
		s.opts.Logger.Warn("trim write-ahead log", "dataset", d.name, "err", err)
	}
	s.retireLocked(d, m.SnapshotID, old)
	if newEpoch {
		go s.notify(d.name, nil) // every series may have changed
	}
	return nil
}

// retireLocked deletes snapshots beyond the retention count, newest kept
// first. A replaced snapshot is deleted only after its last reader lets go
// (Windows cannot delete an open file; elsewhere this keeps the directory
// while it is mapped, for tools that inspect it). d.mu is held.
func (s *Store) retireLocked(d *Dataset, current string, replaced *snapshot.Snapshot) {
	if replaced != nil {
		d.mu.retired = append(d.mu.retired, replaced)
	}
	defer func() {
		d.mu.retired = slices.DeleteFunc(d.mu.retired, func(r *snapshot.Snapshot) bool { return r.Refs() <= 0 })
	}()
	root := filepath.Join(d.dir, format.SnapshotsDir)
	ents, err := os.ReadDir(root)
	if err != nil {
		return
	}
	type snapDir struct {
		name    string
		modTime time.Time
	}
	var others []snapDir
	for _, e := range ents {
		// Dot-named directories are unfinished: temporary snapshots (swept at
		// open) and download staging (see Stage), not retired ones.
		if !e.IsDir() || e.Name() == current || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		var mt time.Time
		if fi, err := e.Info(); err == nil {
			mt = fi.ModTime()
		}
		others = append(others, snapDir{e.Name(), mt})
	}
	// Newest first (directories are renamed into place when finished).
	slices.SortFunc(others, func(a, b snapDir) int { return b.modTime.Compare(a.modTime) })
	keep := s.opts.Keep - 1
	if keep < 0 {
		keep = 0
	}
	for i, o := range others {
		if i < keep {
			continue
		}
		name, dir := o.name, filepath.Join(root, o.name)
		remove := func() {
			if err := os.RemoveAll(dir); err != nil {
				s.opts.Logger.Warn("delete retired snapshot", "dir", dir, "err", err)
			}
		}
		i := slices.IndexFunc(d.mu.retired, func(r *snapshot.Snapshot) bool { return r.ID() == name })
		if i >= 0 && d.mu.retired[i].TryRef() {
			// Still mapped by a reader: delete when the last one lets go,
			// unless the same snapshot is in service again by then.
			r := d.mu.retired[i]
			r.OnClose(func() {
				if cur := d.cur.Load(); cur != nil && cur.snap.ID() == name {
					return
				}
				remove()
			})
			r.Unref()
			continue
		}
		remove()
	}
}

// Install swaps in a snapshot built elsewhere (downloaded from the server,
// or compacted by another process). Every file is first checked against
// the manifest's sizes and SHA-256; a snapshot that fails is refused and
// the current one keeps serving. Delta records above the new snapshot's
// covers_through_seq are kept. A snapshot of a later epoch (a full
// replacement) drops all pending records. dir is copied into the store,
// or moved when it is a dot-named staging directory directly under the
// dataset's snapshots directory (Stage.Commit).
func (s *Store) Install(dataset, dir string) (*format.Manifest, error) {
	if s.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	m, err := format.ReadManifest(dir)
	if err != nil {
		return nil, fmt.Errorf("install: %w", err)
	}
	if m.Dataset != dataset {
		return nil, fmt.Errorf("install: snapshot belongs to dataset %q, not %q", m.Dataset, dataset)
	}
	if err := format.VerifyFiles(dir, m); err != nil {
		return nil, fmt.Errorf("install: %w", err)
	}
	// Installs of one name run one at a time, also for a dataset that does
	// not exist yet (concurrent creations would race for CURRENT).
	unlock := s.lockName(dataset)
	defer unlock()
	dsDir := s.DatasetDir(dataset)
	d, derr := s.Dataset(dataset)
	if derr != nil {
		// Not opened yet (created or damaged by another process since the
		// last Refresh): open it first, so that it is not taken for new.
		if err := s.refreshDataset(dataset); err != nil && !errors.Is(err, ErrDamaged) {
			return nil, fmt.Errorf("install: %w", err)
		}
		d, derr = s.Dataset(dataset)
	}
	if derr == nil {
		d.cmu.Lock()
		defer d.cmu.Unlock()
		if d.damage.Load() != nil {
			if err := s.installOverDamaged(d, dir, m); err != nil {
				return nil, fmt.Errorf("install: %w", err)
			}
			return m, nil
		}
		cur := d.cur.Load()
		if cur == nil {
			return nil, ErrClosed
		}
		cm := cur.snap.Manifest
		if m.Epoch < cm.Epoch || (m.Epoch == cm.Epoch && m.CoversThroughSeq < cm.CoversThroughSeq) {
			return nil, fmt.Errorf("install: snapshot %s is older than %s in service", m.SnapshotID, cm.SnapshotID)
		}
		if m.SnapshotID == cm.SnapshotID {
			return m, nil
		}
	}
	tmp, err := s.stageCopy(dsDir, dir, m)
	if err != nil {
		return nil, fmt.Errorf("install: %w", err)
	}
	if derr != nil {
		// A dataset new to this store: place, publish (Options.Publish),
		// then CURRENT, which makes it exist.
		created, err := placeSnapshot(dsDir, tmp, m.SnapshotID)
		if err != nil {
			os.RemoveAll(tmp)
			return nil, fmt.Errorf("install: %w", err)
		}
		if s.opts.Publish != nil {
			if err := s.opts.Publish(dataset, filepath.Join(dsDir, format.SnapshotsDir, m.SnapshotID), m); err != nil {
				if created {
					os.RemoveAll(filepath.Join(dsDir, format.SnapshotsDir, m.SnapshotID))
				}
				return nil, fmt.Errorf("install: publish snapshot %s: %w", m.SnapshotID, err)
			}
		}
		if err := format.WriteCurrent(dsDir, m.SnapshotID); err != nil {
			return nil, fmt.Errorf("install: %w", err)
		}
		if err := s.refreshDataset(dataset); err != nil {
			return nil, fmt.Errorf("install: %w", err)
		}
		return m, nil
	}
	created, err := placeSnapshot(dsDir, tmp, m.SnapshotID)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("install: %w", err)
	}
	if err := s.publishPlaced(d, m, created); err != nil {
		return nil, fmt.Errorf("install: %w", err)
	}
	newEpoch := m.Epoch > d.cur.Load().snap.Manifest.Epoch
	if err := s.installPublished(d, m, newEpoch); err != nil {
		return nil, fmt.Errorf("install: %w", err)
	}
	return m, nil
}

// stageCopy brings dir's files into a temporary snapshot directory of the
// dataset: by rename when dir already is one, else by copy (re-checking
// nothing: VerifyFiles ran on the source and the copy is fsynced).
func (s *Store) stageCopy(dsDir, dir string, m *format.Manifest) (string, error) {
	root := filepath.Join(dsDir, format.SnapshotsDir)
	if filepath.Dir(filepath.Clean(dir)) == filepath.Clean(root) && strings.HasPrefix(filepath.Base(dir), ".") {
		return dir, nil // a staging directory of this dataset: rename it
	}
	tmp, err := format.TempSnapshotDir(dsDir)
	if err != nil {
		return "", err
	}
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return "", err
	}
	names := []string{format.ManifestFile}
	for _, f := range m.Files {
		names = append(names, f.Name)
	}
	for _, n := range names {
		if err := copyFileSync(filepath.Join(dir, n), filepath.Join(tmp, n)); err != nil {
			os.RemoveAll(tmp)
			return "", err
		}
	}
	if err := format.SyncDir(tmp); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	return tmp, nil
}

func copyFileSync(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return fileutil.SyncClose(out)
}

// ErrCookNeedsDirectory: InstallCooked cannot cook this install straight
// to where Options.CookPublish publishes (no CookPublish, or a damaged
// dataset, whose install rebuilds from a directory): nothing was written;
// cook into a directory and Install it.
var ErrCookNeedsDirectory = errors.New("install: this install needs a snapshot directory")

// InstallCooked is Install of a snapshot cooked straight to where
// Options.CookPublish publishes it (the server: its lake's Puffin file),
// instead of into a directory that Install verifies, copies and
// publishes: cook writes the snapshot into the container it is given
// (format.WriteInto) and returns its manifest; the store then puts it in
// service as Install does (a later epoch drops every pending record; a
// snapshot older than the one in service is refused before it is
// published, and the one in service is not published again). It fails with
// ErrCookNeedsDirectory, having written nothing, without CookPublish or
// over a damaged dataset.
func (s *Store) InstallCooked(dataset string, cook func(*format.Container) (*format.Manifest, error)) (*format.Manifest, error) {
	if s.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	if s.opts.CookPublish == nil {
		return nil, ErrCookNeedsDirectory
	}
	if err := format.ValidDatasetName(dataset); err != nil {
		return nil, fmt.Errorf("install: %w", err)
	}
	unlock := s.lockName(dataset)
	defer unlock()
	d, derr := s.Dataset(dataset)
	if derr != nil {
		if err := s.refreshDataset(dataset); err != nil && !errors.Is(err, ErrDamaged) {
			return nil, fmt.Errorf("install: %w", err)
		}
		d, derr = s.Dataset(dataset)
	}
	checked := func(c *format.Container) (*format.Manifest, error) {
		m, err := cook(c)
		if err == nil && m.Dataset != dataset {
			err = fmt.Errorf("install: snapshot belongs to dataset %q, not %q", m.Dataset, dataset)
		}
		return m, err
	}
	if derr != nil {
		if errors.Is(derr, ErrDamaged) {
			return nil, ErrCookNeedsDirectory
		}
		// A dataset new to this store: publish, then CURRENT, which makes
		// it exist.
		dsDir := s.DatasetDir(dataset)
		m, err := s.opts.CookPublish(dataset, checked)
		if err != nil {
			return nil, fmt.Errorf("install: publish: %w", err)
		}
		if err := os.MkdirAll(filepath.Join(dsDir, format.SnapshotsDir), 0o755); err != nil {
			return nil, fmt.Errorf("install: %w", err)
		}
		if err := fileutil.SyncDir(filepath.Dir(dsDir)); err != nil {
			return nil, fmt.Errorf("install: %w", err)
		}
		if err := format.WriteCurrent(dsDir, m.SnapshotID); err != nil {
			return nil, fmt.Errorf("install: %w", err)
		}
		if err := s.refreshDataset(dataset); err != nil {
			return nil, fmt.Errorf("install: %w", err)
		}
		return m, nil
	}
	d.cmu.Lock()
	defer d.cmu.Unlock()
	if d.damage.Load() != nil {
		return nil, ErrCookNeedsDirectory
	}
	cur := d.cur.Load()
	if cur == nil {
		return nil, ErrClosed
	}
	cm := cur.snap.Manifest
	var same *format.Manifest
	m, err := s.opts.CookPublish(dataset, func(c *format.Container) (*format.Manifest, error) {
		m, err := checked(c)
		switch {
		case err != nil:
		case m.SnapshotID == cm.SnapshotID:
			same, err = m, errSameSnapshot // in service already: nothing to publish
		case m.Epoch < cm.Epoch || (m.Epoch == cm.Epoch && m.CoversThroughSeq < cm.CoversThroughSeq):
			err = fmt.Errorf("snapshot %s is older than %s in service", m.SnapshotID, cm.SnapshotID)
		}
		return m, err
	})
	if same != nil {
		return same, nil
	}
	if err != nil {
		return nil, fmt.Errorf("install: publish: %w", err)
	}
	if err := s.installPublished(d, m, m.Epoch > cm.Epoch); err != nil {
		return nil, fmt.Errorf("install: %w", err)
	}
	return m, nil
}

// errSameSnapshot: InstallCooked cooked the snapshot in service.
var errSameSnapshot = errors.New("the snapshot in service")
