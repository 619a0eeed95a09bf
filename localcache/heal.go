package localcache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// DamagedPrefix names what an install over a damaged dataset moves aside
// (a damaged snapshot directory of the same id, a write-ahead log that
// cannot be opened) before it is deleted.
const DamagedPrefix = ".damaged-"

// installOverDamaged heals a damaged dataset with the verified snapshot
// in dir (manifest m): whatever its epoch and seq, it replaces what is
// there.
//
// The write-ahead log's records above m's covers_through_seq are kept
// only when they are known to belong to m's epoch: the dataset's CURRENT
// was readable, the epoch marker names m's epoch and the log opens (a
// companion re-downloading the snapshot of the epoch it follows). In
// every other case (CURRENT lost, another epoch, an unreadable log) the
// log is retired: nothing of it is replayed, and the dataset's seq starts
// above every seq seen before. d.cmu and the name lock are held.
func (s *Store) installOverDamaged(d *Dataset, dir string, m *format.Manifest) error {
	// Writers of a damaged dataset are refused and readers never take
	// d.mu: holding it throughout costs nobody.
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.isClosed.Load() {
		return ErrClosed
	}
	cur := d.cur.Load()
	mk, mkErr := readEpochMarker(d.dir)
	floor := mk.floor
	var recs []format.Record // every readable record of the log
	if cur != nil {
		floor = max(floor, cur.delta.LastSeq())
	}
	{
		// The records come from the log on disk, not from the delta in
		// memory: a fault may have stopped an Apply half way, and an
		// earlier heal may have dropped the state.
		if d.mu.wal != nil {
			d.mu.wal.Close()
			d.mu.wal = nil
		}
		w, r, err := s.openWAL(filepath.Join(d.dir, WALDir), false, 0)
		if err != nil {
			// Keep the unreadable log for inspection; start a fresh one
			// above every seq it may have handed out (delta.SalvageSeq).
			salvage, serr := delta.SalvageSeq(filepath.Join(d.dir, WALDir))
			if serr != nil {
				return fmt.Errorf("read the damaged write-ahead log's seqs: %w (it failed to open: %v)", serr, err)
			}
			floor = max(floor, salvage)
			a := filepath.Join(d.dir, fmt.Sprintf("%s%s-%d", DamagedPrefix, WALDir, time.Now().UnixNano()))
			if rerr := os.Rename(filepath.Join(d.dir, WALDir), a); rerr != nil {
				return fmt.Errorf("set the damaged write-ahead log aside: %w (it failed to open: %v)", rerr, err)
			}
			s.opts.Logger.Warn("write-ahead log set aside", "dataset", d.name, "path", a, "err", err)
			if w, r, err = s.openWAL(filepath.Join(d.dir, WALDir), false, 0); err != nil {
				return fmt.Errorf("open write-ahead log: %w", err)
			}
			mkErr = errors.New("write-ahead log was unreadable")
		}
		d.mu.wal, recs = w, r
	}
	for _, r := range recs {
		floor = max(floor, r.Seq)
	}
	if cur != nil && cur.snap.ID() == m.SnapshotID {
		// The damaged copy of this very snapshot is in service: drop the
		// store's mapping of it (Windows cannot rename a mapped file). It
		// served nothing anyway; on failure below the dataset stays
		// damaged with nothing in service.
		d.swap(nil)
		cur = nil
	}

	tmp, err := s.stageCopy(d.dir, dir, m)
	if err != nil {
		return err
	}
	root := filepath.Join(d.dir, format.SnapshotsDir)
	final := filepath.Join(root, m.SnapshotID)
	var aside []string
	defer func() {
		for _, a := range aside {
			if err := os.RemoveAll(a); err != nil {
				s.opts.Logger.Warn("delete damaged files set aside", "path", a, "err", err)
			}
		}
	}()
	if _, err := os.Stat(final); err == nil {
		// Maybe the damaged copy of this very snapshot: never trust it.
		a := filepath.Join(root, fmt.Sprintf("%s%s-%d", DamagedPrefix, m.SnapshotID, time.Now().UnixNano()))
		if err := renameRetry(final, a); err != nil {
			os.RemoveAll(tmp)
			return fmt.Errorf("set the damaged snapshot aside: %w", err)
		}
		aside = append(aside, a)
	}
	if _, err := placeSnapshot(d.dir, tmp, m.SnapshotID); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	// final did not exist (set aside above): this install created it.
	if err := s.publishPlaced(d, m, true); err != nil {
		return err
	}
	snap, err := s.openSnapshot(d, m.SnapshotID)
	if err != nil {
		return err
	}

	covers := m.CoversThroughSeq
	keep := !d.mu.lostCurrent && mkErr == nil && mk.ok && mk.epoch == m.Epoch
	last := covers
	var kept []format.Record
	if keep {
		for _, r := range recs {
			if r.Seq > max(covers, mk.floor) {
				kept = append(kept, r)
			}
		}
	} else {
		last = max(covers, floor)
		// Before CURRENT: there is no good state to fall back to, and from
		// here on nothing of the old log is ever replayed.
		if err := writeEpochMarker(d.dir, m.Epoch, last); err != nil {
			snap.Close()
			return fmt.Errorf("write %s: %w", EpochFile, err)
		}
	}
	dl := delta.New(snap, last)
	dl.Apply(kept)
	if err := d.mu.wal.Rotate(max(last, floor, dl.LastSeq()) + 1); err != nil {
		snap.Close()
		return fmt.Errorf("rotate write-ahead log: %w", err)
	}
	if err := format.WriteCurrent(d.dir, m.SnapshotID); err != nil {
		snap.Close()
		return fmt.Errorf("move CURRENT: %w", err)
	}
	if keep && !mk.ok {
		if err := writeEpochMarker(d.dir, m.Epoch, 0); err != nil {
			s.opts.Logger.Warn("write epoch marker", "dataset", d.name, "err", err)
		}
	}
	var old *snapshot.Snapshot
	if cur != nil {
		old = cur.snap
		if old.TryRef() {
			defer old.Unref()
		}
	}
	d.swap(&readState{snap: snap, delta: dl})
	s.dropDirIfElsewhere(d, snap)
	d.mu.lostCurrent = false
	d.damage.Store(nil)
	d.lastSync.Store(time.Now().UnixNano())
	dropThrough := covers
	if !keep {
		dropThrough = last
	}
	if err := d.mu.wal.DropThrough(dropThrough); err != nil {
		s.opts.Logger.Warn("trim write-ahead log", "dataset", d.name, "err", err)
	}
	s.retireLocked(d, m.SnapshotID, old)
	s.scrubLater(d, snap)
	s.opts.Logger.Info("damaged dataset healed", "dataset", d.name, "snapshot", m.SnapshotID, "kept_log_records", len(kept))
	go s.notify(d.name, nil)
	return nil
}

// renameRetry renames, retrying for up to a second: on Windows a file
// that a reader still maps cannot be renamed until it lets go.
func renameRetry(from, to string) error {
	var err error
	for range 20 {
		if err = os.Rename(from, to); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}
