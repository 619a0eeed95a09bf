package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/energyscope/energyscope/internal/fileutil"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server/deltalog"
)

// migrateHome moves a home from before the delta log (issue 13) onto it,
// once: for each dataset, the records its write-ahead log holds above the
// store's head, and the server history's records back to the oldest
// retained snapshot, are appended to the dataset's stream with the same
// seqs (its stream is created after the first of them); then the history
// directory and each dataset's write-ahead log are removed.
//
// Crash-safe: the files are removed only once every dataset's stream
// holds their records, and a migration that stopped half way appends
// only the records above the stream's head the next time, checking that
// the log numbers them as they were (so a record is never logged twice
// or under another seq). A home with neither is left as it is.
func (s *Server) migrateHome() error {
	histRoot := filepath.Join(s.opts.Home, HistoryDir)
	_, herr := os.Stat(histRoot)
	names := s.store.DatasetNames()
	var wals []string
	for _, name := range names {
		if s.store.Damaged(name) != nil {
			continue // not moved (below): its log stays until a PUT heals it
		}
		if dir := filepath.Join(s.store.DatasetDir(name), localcache.WALDir); exists(dir) {
			wals = append(wals, dir)
		}
	}
	if herr != nil && len(wals) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, startTimeout)
	defer cancel()
	for _, name := range names {
		if s.store.Damaged(name) != nil {
			continue // a PUT heals it; its logs stay until then
		}
		if err := s.migrateDataset(ctx, name); err != nil {
			return fmt.Errorf("move dataset %s to the delta log: %w", name, err)
		}
	}
	for _, dir := range wals {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("remove the moved write-ahead log: %w", err)
		}
		if err := fileutil.SyncDir(filepath.Dir(dir)); err != nil {
			return err
		}
	}
	if herr == nil {
		if err := os.RemoveAll(histRoot); err != nil {
			return fmt.Errorf("remove the moved history: %w", err)
		}
		if err := fileutil.SyncDir(s.opts.Home); err != nil {
			return err
		}
	}
	s.log.Info("moved the home's write-ahead logs and history into the delta log", "datasets", len(names))
	return nil
}

// migrateDataset appends dataset name's logged records to its stream
// (migrateHome).
func (s *Server) migrateDataset(ctx context.Context, name string) error {
	covers, err := s.store.LastSeq(name) // in memory: the snapshot's covers (or the epoch's floor)
	if err != nil {
		return err
	}
	walRecs, err := readLog(filepath.Join(s.store.DatasetDir(name), localcache.WALDir), s.log)
	if err != nil {
		return fmt.Errorf("write-ahead log: %w", err)
	}
	// The store's pending records: contiguous above covers.
	var pending []format.Record
	for _, r := range walRecs {
		if r.Seq == covers+uint64(len(pending))+1 {
			pending = append(pending, r)
		}
	}
	top := covers + uint64(len(pending))
	histRecs, err := readLog(filepath.Join(s.opts.Home, HistoryDir, name), s.log)
	if err != nil {
		s.log.Warn("server history unreadable; moving the write-ahead log's records only", "dataset", name, "err", err)
		histRecs = nil
	}
	recs := usableHistory(histRecs, top)
	if len(recs) == 0 || recs[0].Seq > covers+1 {
		recs = pending // the history does not reach back to the store's head
	}
	after := top - uint64(len(recs))
	if err := s.dlog.Create(ctx, name, deltalog.CreateOptions{After: after}); err != nil {
		return err
	}
	head, err := s.dlog.Head(ctx, name)
	if err != nil {
		return err
	}
	if head >= top {
		return nil // moved before (a migration that stopped before the removal)
	}
	if head < after {
		return fmt.Errorf("the log's head %d is below the first record to move (%d)", head, after+1)
	}
	recs = recs[head-after:]
	limit := int(s.maxBatchBytes())
	for len(recs) > 0 {
		n := 0
		for size := int64(0); n < len(recs); n++ {
			size += batchBytesBound(recs[n : n+1])
			if n > 0 && size > int64(limit) {
				break
			}
		}
		batch := recs[:n]
		key := fmt.Sprintf("es-migrate-%d-%d", batch[0].Seq, batch[n-1].Seq)
		first, last, err := s.dlog.Append(ctx, name, batch, key)
		if err != nil {
			return err
		}
		if first != batch[0].Seq || last != batch[n-1].Seq {
			return fmt.Errorf("the log numbered seqs %d..%d as %d..%d", batch[0].Seq, batch[n-1].Seq, first, last)
		}
		recs = recs[n:]
	}
	return nil
}

// readLog reads every record of the write-ahead log in dir, read-only
// (none when it does not exist).
func readLog(dir string, log *slog.Logger) ([]format.Record, error) {
	if !exists(dir) {
		return nil, nil
	}
	w, recs, err := delta.OpenWAL(dir, true, 0, log)
	if err != nil {
		return nil, err
	}
	w.Close()
	return recs, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}
