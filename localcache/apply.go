package localcache

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/format"
)

// Apply appends a batch of records to the dataset's write-ahead log,
// fsyncs it, and then makes the whole batch visible to readers at once.
// The batch is validated first (strictly increasing seqs, finite values,
// known ops); an invalid batch changes nothing. Records whose seq is at or
// below the dataset's last applied seq are skipped, so re-applying a batch
// is a no-op. It returns the number of records applied. When the call
// fails (a full disk, a failed fsync) nothing of the batch is visible and
// the store keeps serving its previous state.
func (s *Store) Apply(dataset string, batch []format.Record) (int, error) {
	// A read-only store with its delta in memory takes Apply and nothing
	// else that writes: a reader of a server home overlays the delta log's
	// records on its own view (Options.DeltaInMemory).
	write := s.writable
	if s.opts.ReadOnly && s.opts.DeltaInMemory {
		write = s.undamaged
	}
	d, err := write(dataset)
	if err != nil {
		return 0, err
	}
	if err := format.ValidateRecords(batch); err != nil {
		return 0, err
	}
	rs, err := d.lockWrite()
	if err != nil {
		return 0, err
	}
	last := rs.delta.LastSeq()
	i := sort.Search(len(batch), func(i int) bool { return batch[i].Seq > last })
	fresh := batch[i:]
	if len(fresh) == 0 {
		d.mu.Unlock()
		return 0, nil
	}
	if err := s.walReadyLocked(d, rs); err != nil {
		d.mu.Unlock()
		return 0, fmt.Errorf("dataset %s: %w", dataset, err)
	}
	if err := d.mu.wal.Append(fresh); err != nil {
		d.mu.Unlock()
		return 0, fmt.Errorf("dataset %s: %w", dataset, err)
	}
	n, err := s.applyGuarded(d, rs.delta, fresh)
	if err != nil {
		d.mu.Unlock()
		return 0, err
	}
	d.lastSync.Store(time.Now().UnixNano())
	_, rows, _, bytes := rs.delta.Stats()
	d.mu.Unlock()
	s.notify(dataset, fresh)

	if !s.opts.ReadOnly && ((s.opts.CompactRows > 0 && rows >= s.opts.CompactRows) || (s.opts.CompactBytes > 0 && bytes >= s.opts.CompactBytes)) {
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
// rather than served with a log that disagrees with its reads. d.mu is
// held.
func (s *Store) walReadyLocked(d *Dataset, rs *readState) error {
	if !d.mu.wal.Failed() {
		return nil
	}
	covers := rs.snap.Manifest.CoversThroughSeq
	got, err := d.mu.wal.Reopen(covers, s.opts.Logger)
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

// Watch registers fn to be called after every Apply with the dataset and
// the ids of the series it changed (ids == nil: anything may have changed,
// e.g. a replacement was installed). fn runs on the writer's goroutine
// after the batch is visible: it must be quick and must not call back
// into the store's write methods. The returned func unregisters it.
func (s *Store) Watch(fn func(dataset string, ids []string)) (cancel func()) {
	s.watch.Lock()
	defer s.watch.Unlock()
	id := s.watch.next
	s.watch.next++
	if s.watch.fns == nil {
		s.watch.fns = map[int]func(string, []string){}
	}
	s.watch.fns[id] = fn
	return func() {
		s.watch.Lock()
		delete(s.watch.fns, id)
		s.watch.Unlock()
	}
}

func (s *Store) notify(dataset string, recs []format.Record) {
	s.watch.Lock()
	fns := make([]func(string, []string), 0, len(s.watch.fns))
	for _, fn := range s.watch.fns {
		fns = append(fns, fn)
	}
	s.watch.Unlock()
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
