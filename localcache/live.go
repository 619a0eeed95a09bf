package localcache

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/energyscope/energyscope/internal/fileutil"
	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// ErrReadOnly is returned by writes to a store opened read-only.
var ErrReadOnly = errors.New("store is read-only")

// Apply appends a batch of records to the dataset's write-ahead log,
// fsyncs it, and then makes the whole batch visible to readers at once.
// The batch is validated first (strictly increasing seqs, finite values,
// known ops); an invalid batch changes nothing. Records whose seq is at or
// below the dataset's last applied seq are skipped, so re-applying a batch
// is a no-op. It returns the number of records applied. When the call
// fails (a full disk, a failed fsync) nothing of the batch is visible and
// the store keeps serving its previous state.
func (s *Store) Apply(dataset string, batch []delta.Record) (int, error) {
	if s.opts.ReadOnly {
		return 0, ErrReadOnly
	}
	d, err := s.Dataset(dataset)
	if err != nil {
		return 0, err
	}
	if de := d.damage.Load(); de != nil {
		return 0, de
	}
	if err := delta.Validate(batch); err != nil {
		return 0, err
	}
	d.wmu.Lock()
	rs := d.cur.Load()
	if rs == nil {
		d.wmu.Unlock()
		return 0, ErrClosed
	}
	last := rs.delta.LastSeq()
	i := sort.Search(len(batch), func(i int) bool { return batch[i].Seq > last })
	fresh := batch[i:]
	if len(fresh) == 0 {
		d.wmu.Unlock()
		return 0, nil
	}
	if err := s.walReadyLocked(d, rs); err != nil {
		d.wmu.Unlock()
		return 0, fmt.Errorf("dataset %s: %w", dataset, err)
	}
	if err := d.wal.Append(fresh); err != nil {
		d.wmu.Unlock()
		return 0, fmt.Errorf("dataset %s: %w", dataset, err)
	}
	n, err := s.applyGuarded(d, rs.delta, fresh)
	if err != nil {
		d.wmu.Unlock()
		return 0, err
	}
	d.lastSync.Store(time.Now().UnixNano())
	_, rows, _, bytes := rs.delta.Stats()
	d.wmu.Unlock()
	s.notify(dataset, fresh)

	if (s.opts.CompactRows > 0 && rows >= s.opts.CompactRows) || (s.opts.CompactBytes > 0 && bytes >= s.opts.CompactBytes) {
		if d.compacting.CompareAndSwap(false, true) {
			go func() {
				defer d.compacting.Store(false)
				if _, err := s.Compact(dataset); err != nil && !errors.Is(err, ErrClosed) {
					s.opts.Logger.Error("automatic compaction failed", "dataset", dataset, "err", err)
				}
			}()
		}
	}
	return n, nil
}

// walReadyLocked recovers d's write-ahead log if an append failed and
// left it refusing appends (a full disk whose cut-back failed, a failed
// fsync, an unwritable segment): it reopens the log from disk
// (delta.WAL.Reopen) so that the write in hand, and every later one,
// succeeds as soon as the disk takes writes again, without a restart.
// The failed batch was never acknowledged and is not in the log; a
// companion's sync client fetches it again.
//
// Every record acknowledged over rs's snapshot must be found on disk, and
// nothing above the last one: otherwise the disk lost what it had
// acknowledged, and the dataset is damaged (a companion re-downloads it)
// rather than served with a log that disagrees with its reads. d.wmu is
// held.
func (s *Store) walReadyLocked(d *Dataset, rs *readState) error {
	if !d.wal.Failed() {
		return nil
	}
	covers := rs.snap.Manifest.CoversThroughSeq
	got, err := d.wal.Reopen(covers, s.opts.Logger)
	if err != nil {
		if errors.As(err, new(*delta.CorruptionError)) {
			return s.markDamaged(d, err)
		}
		return err
	}
	last := rs.delta.LastSeq()
	on := make(map[uint64]bool, len(got))
	for _, r := range got {
		if r.Seq > last {
			return s.markDamaged(d, &delta.CorruptionError{Segment: filepath.Join(d.dir, WALDir), Offset: -1,
				Err: fmt.Errorf("reopened after a failed write, the log holds seq %d above the last acknowledged %d", r.Seq, last)})
		}
		on[r.Seq] = true
	}
	for _, r := range rs.delta.Records(covers) {
		if !on[r.Seq] {
			return s.markDamaged(d, &delta.CorruptionError{Segment: filepath.Join(d.dir, WALDir), Offset: -1,
				Err: fmt.Errorf("reopened after a failed write, the log lacks acknowledged seq %d", r.Seq)})
		}
	}
	s.opts.Logger.Info("write-ahead log reopened after a failed write", "dataset", d.name, "records", len(got), "last_seq", last)
	return nil
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

// Compact folds the dataset's delta into a new snapshot written with the
// cook's code (format.WriteSorted, which writes what format.Write would),
// publishes it beside the old one, moves CURRENT, swaps the read state,
// then drops the write-ahead log segments the new snapshot covers. If any
// step up to moving CURRENT fails, the call fails and the old state keeps
// serving. Apply keeps working while the snapshot
// is written; readers are never blocked. With nothing pending it returns
// the current manifest and does nothing. The same base and delta always
// give byte-identical data, index and hash files.
func (s *Store) Compact(dataset string) (*format.Manifest, error) {
	return s.CompactThrough(dataset, ^uint64(0))
}

// CompactThrough is Compact folding only the records with seq <= upTo
// (records above stay pending). A companion uses it to rebuild exactly the
// server's snapshot that covers upTo and compare SHA-256s.
func (s *Store) CompactThrough(dataset string, upTo uint64) (*format.Manifest, error) {
	if s.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	d, err := s.Dataset(dataset)
	if err != nil {
		return nil, err
	}
	if de := d.damage.Load(); de != nil {
		return nil, de
	}
	d.cmu.Lock()
	defer d.cmu.Unlock()

	// Freeze what to fold: everything applied so far (seq <= upTo).
	d.wmu.Lock()
	rs := d.cur.Load()
	if rs == nil || !rs.snap.TryRef() {
		d.wmu.Unlock()
		return nil, ErrClosed
	}
	defer rs.snap.Unref()
	pending, last := rs.delta.Snapshot()
	if upTo >= last {
		upTo = last
	} else {
		// Fold only a prefix: rebuild the pending series from it.
		partial := delta.New(rs.snap, rs.snap.Manifest.CoversThroughSeq)
		recs := rs.delta.Records(rs.snap.Manifest.CoversThroughSeq)
		n := sort.Search(len(recs), func(i int) bool { return recs[i].Seq > upTo })
		partial.Apply(recs[:n])
		pending, _ = partial.Snapshot()
		if n > 0 {
			upTo = recs[n-1].Seq
		}
	}
	if upTo < rs.snap.Manifest.CoversThroughSeq {
		d.wmu.Unlock()
		return nil, fmt.Errorf("compact %s: seq %d is below the snapshot's %d", dataset, upTo, rs.snap.Manifest.CoversThroughSeq)
	}
	if len(pending) == 0 {
		d.wmu.Unlock()
		m := *rs.snap.Manifest
		return &m, nil
	}
	// Records from here on go to a new segment, so the old ones can be
	// deleted whole once the new snapshot is in place.
	err = s.walReadyLocked(d, rs)
	if err == nil {
		err = d.wal.Rotate(last + 1) // records in (upTo, last] stay in the older segment
	}
	d.wmu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("compact %s: rotate write-ahead log: %w", dataset, err)
	}

	base := rs.snap.Manifest
	o := format.WriteOptions{Dataset: dataset, Epoch: base.Epoch, CoversThroughSeq: upTo}
	fold := func(dir string) (*format.Manifest, error) {
		// The base's columns are already sorted and normalized: copy them
		// and merge in the pending series, which spares Write's sort.
		st, err := foldSorted(rs.snap, pending)
		if err != nil {
			return nil, err
		}
		m, _, err := format.WriteSorted(dir, st, o)
		if errors.Is(err, format.ErrNotSorted) {
			s.opts.Logger.Warn("compaction: snapshot columns not in sorted form; rewriting from scratch", "dataset", dataset, "err", err)
			t, ferr := foldTable(rs.snap, pending)
			if ferr != nil {
				return nil, ferr
			}
			m, _, err = format.Write(dir, t, o)
		}
		return m, err
	}
	m, err := s.writeSnapshot(d, func(dir string) (m *format.Manifest, err error) {
		// The fold reads every byte of the base's mappings.
		r := reading{d: d}
		defer s.guard(debug.SetPanicOnFault(true), &r, &err)
		m, err = fold(dir)
		return m, s.damagedIf(d, err)
	})
	if err != nil {
		return nil, fmt.Errorf("compact %s: %w", dataset, err)
	}
	if err := s.installPublished(d, m, false); err != nil {
		return nil, fmt.Errorf("compact %s: %w", dataset, err)
	}
	return m, nil
}

// writeSnapshot writes a snapshot into a temporary directory and renames it into
// snapshots/<id> (CURRENT is not touched).
func (s *Store) writeSnapshot(d *Dataset, write func(dir string) (*format.Manifest, error)) (*format.Manifest, error) {
	tmp, err := format.TempSnapshotDir(d.dir)
	if err != nil {
		return nil, err
	}
	m, err := write(tmp)
	if err != nil {
		return nil, err
	}
	if err := placeSnapshot(d.dir, tmp, m.SnapshotID); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	return m, nil
}

// placeSnapshot renames a finished temporary snapshot directory to its id
// (or drops it if that snapshot is already there: same id, same bytes).
func placeSnapshot(datasetDir, tmp, id string) error {
	root := filepath.Join(datasetDir, format.SnapshotsDir)
	final := filepath.Join(root, id)
	if _, err := os.Stat(final); err == nil {
		return os.RemoveAll(tmp)
	}
	return fileutil.Rename(tmp, final)
}

// installPublished opens the placed snapshot m, swaps it in with the delta
// records it does not cover, moves CURRENT, trims the log and retires old
// snapshots. newEpoch drops every pending record (a full replacement).
// d.cmu is held.
func (s *Store) installPublished(d *Dataset, m *format.Manifest, newEpoch bool) error {
	snap, err := snapshot.Open(filepath.Join(d.dir, format.SnapshotsDir, m.SnapshotID))
	if err != nil {
		return err
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	cur := d.cur.Load()
	if cur == nil {
		snap.Close()
		return ErrClosed
	}
	covers := m.CoversThroughSeq
	var recs []delta.Record
	lastSeq := covers
	if !newEpoch {
		recs = cur.delta.Records(covers)
	} else if l := cur.delta.LastSeq(); l > lastSeq {
		// Sequence numbers keep increasing across epochs.
		lastSeq = l
	}
	dl := delta.New(snap, lastSeq)
	dl.Apply(recs)
	if err := s.walReadyLocked(d, cur); err != nil {
		snap.Close()
		return fmt.Errorf("write-ahead log: %w", err)
	}
	if err := d.wal.Rotate(max(lastSeq, cur.delta.LastSeq()) + 1); err != nil {
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
	if err := d.wal.DropThrough(dropThrough); err != nil {
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
// while it is mapped, for tools that inspect it). d.wmu is held.
func (s *Store) retireLocked(d *Dataset, current string, replaced *snapshot.Snapshot) {
	if replaced != nil {
		d.retired = append(d.retired, replaced)
	}
	defer func() {
		d.retired = slices.DeleteFunc(d.retired, func(r *snapshot.Snapshot) bool { return r.Refs() <= 0 })
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
		// open) and download staging (see StagingDir), not retired ones.
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
		i := slices.IndexFunc(d.retired, func(r *snapshot.Snapshot) bool { return r.ID() == name })
		if i >= 0 && d.retired[i].TryRef() {
			// Still mapped by a reader: delete when the last one lets go,
			// unless the same snapshot is in service again by then.
			r := d.retired[i]
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
// dataset's snapshots directory (see StagingDir).
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
		// A dataset new to this store.
		if _, err := format.Publish(dsDir, tmp, m); err != nil {
			os.RemoveAll(tmp)
			return nil, fmt.Errorf("install: %w", err)
		}
		if err := s.refreshDataset(dataset); err != nil {
			return nil, fmt.Errorf("install: %w", err)
		}
		return m, nil
	}
	if err := placeSnapshot(dsDir, tmp, m.SnapshotID); err != nil {
		os.RemoveAll(tmp)
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

// foldTable builds the rows of base + pending for format.Write: every
// base series (its metadata overridden by the delta's latest, if any) and
// every series only the delta has.
func foldTable(snap *snapshot.Snapshot, pending map[string]*delta.Series) (*format.Table, error) {
	n := snap.NumSeries()
	rows := int(snap.Manifest.Rows)
	for _, p := range pending {
		rows += len(p.Points)
	}
	t := &format.Table{
		Series:    make([]format.SeriesMeta, 0, n+len(pending)),
		SeriesIdx: make([]uint32, 0, rows),
		Period:    make([]int64, 0, rows),
		Value:     make([]float64, 0, rows),
	}
	add := func(meta format.SeriesMeta, pts snapshot.Points) {
		si := uint32(len(t.Series))
		t.Series = append(t.Series, meta)
		for i := 0; i < pts.Len(); i++ {
			t.SeriesIdx = append(t.SeriesIdx, si)
			t.Period = append(t.Period, pts.Unix(i))
		}
		t.Value = append(t.Value, pts.Values...)
	}
	for row := uint32(0); row < uint32(n); row++ {
		meta, pts, err := foldSeries(snap, row, pending)
		if err != nil {
			return nil, err
		}
		add(meta, pts)
	}
	for _, id := range sortedKeys(pending) {
		if _, ok := snap.Lookup(id); ok {
			continue
		}
		p := pending[id]
		meta := format.SeriesMeta{ID: id, Frequency: p.Freq}
		overrideMeta(&meta, p)
		add(meta, mergePoints(snapshot.Points{}, p.Points))
	}
	return t, nil
}

// foldSorted is foldTable in the sorted form format.WriteSorted takes:
// the base's series in index order (which is id order) with their
// columns copied as they are, the pending series merged in, and the
// series only the delta has inserted at their place in id order.
func foldSorted(snap *snapshot.Snapshot, pending map[string]*delta.Series) (*format.SortedTable, error) {
	n := snap.NumSeries()
	rows := int(snap.Manifest.Rows)
	for _, p := range pending {
		rows += len(p.Points)
	}
	var added []string // series only the delta has, sorted
	for _, id := range sortedKeys(pending) {
		if _, ok := snap.Lookup(id); !ok {
			added = append(added, id)
		}
	}
	pt := format.PeriodDate32
	for row := uint32(0); row < uint32(n) && pt == format.PeriodDate32; row++ {
		if snap.Frequency(row).Intraday() {
			pt = format.PeriodTimestamp
		}
	}
	for _, id := range added {
		if pending[id].Freq.Intraday() {
			pt = format.PeriodTimestamp
		}
	}
	t := format.NewSortedTable(pt, n+len(added), rows)
	add := func(meta format.SeriesMeta, pts snapshot.Points) {
		t.AddSeries(meta)
		if pts.Secs != nil {
			t.AppendSecs(pts.Secs, pts.Values)
		} else {
			t.AppendDays(pts.Days, pts.Values)
		}
	}
	addNew := func(id string) {
		p := pending[id]
		meta := format.SeriesMeta{ID: id, Frequency: p.Freq}
		overrideMeta(&meta, p)
		add(meta, mergePoints(snapshot.Points{}, p.Points))
	}
	next := 0 // into added
	for row := uint32(0); row < uint32(n); row++ {
		in := snap.Info(row)
		for next < len(added) && added[next] < in.ID {
			addNew(added[next])
			next++
		}
		meta, pts, err := foldSeries(snap, row, pending)
		if err != nil {
			return nil, err
		}
		add(meta, pts)
	}
	for ; next < len(added); next++ {
		addNew(added[next])
	}
	return t, nil
}

// foldSeries is base row row with its pending rows merged in and its
// metadata overridden by the delta's latest. A base series that cannot be
// read (a corrupt cold-tier block) fails the compaction: dropping its
// points would lose data.
func foldSeries(snap *snapshot.Snapshot, row uint32, pending map[string]*delta.Series) (format.SeriesMeta, snapshot.Points, error) {
	in := snap.Info(row)
	meta := format.SeriesMeta{ID: in.ID, Name: in.Name, Unit: in.Unit, Source: in.Source, Frequency: snap.Frequency(row), Tier: in.Tier}
	pts, err := snap.Get(row, snapshot.MinTime, snapshot.MaxTime)
	if err != nil {
		return meta, pts, fmt.Errorf("read series %q of snapshot %s: %w", in.ID, snap.ID(), err)
	}
	if p := pending[in.ID]; p != nil {
		overrideMeta(&meta, p)
		pts = mergePoints(pts, p.Points)
	}
	return meta, pts, nil
}

// overrideMeta gives meta the delta's latest name, unit and source, if
// the delta has any.
func overrideMeta(meta *format.SeriesMeta, p *delta.Series) {
	if p.Meta != nil {
		meta.Name, meta.Unit, meta.Source = p.Meta.Name, p.Meta.Unit, p.Meta.Source
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// StagingDir is where a download of snapshot id for dataset should be
// assembled so that Install can move it into place without copying. It is
// not swept at open (so a download can resume); Install consumes it.
func (s *Store) StagingDir(dataset, id string) string {
	return filepath.Join(s.DatasetDir(dataset), format.SnapshotsDir, ".dl-"+id)
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

// Watch registers fn to be called after every Apply with the dataset and
// the ids of the series it changed (ids == nil: anything may have changed,
// e.g. a replacement was installed). fn runs on the writer's goroutine
// after the batch is visible: it must be quick and must not call back
// into the store's write methods. The returned func unregisters it.
func (s *Store) Watch(fn func(dataset string, ids []string)) (cancel func()) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	id := s.nextWatch
	s.nextWatch++
	if s.watchers == nil {
		s.watchers = map[int]func(string, []string){}
	}
	s.watchers[id] = fn
	return func() {
		s.watchMu.Lock()
		delete(s.watchers, id)
		s.watchMu.Unlock()
	}
}

func (s *Store) notify(dataset string, recs []delta.Record) {
	s.watchMu.Lock()
	fns := make([]func(string, []string), 0, len(s.watchers))
	for _, fn := range s.watchers {
		fns = append(fns, fn)
	}
	s.watchMu.Unlock()
	if len(fns) == 0 {
		return
	}
	var ids []string
	if recs != nil {
		seen := make(map[string]bool, len(recs))
		for _, r := range recs {
			if !seen[r.SeriesID] {
				seen[r.SeriesID] = true
				ids = append(ids, r.SeriesID)
			}
		}
	}
	for _, fn := range fns {
		fn(dataset, ids)
	}
}
