package server

// Replicas over one lake (issue 13; README "Running several servers").
// Several servers may share a catalog and a warehouse: each maps the
// vintage a dataset's table names and serves it. What one replica
// commits (a PUT, a compaction, a rollback) the others learn by
// following the lake's heads at run time:
//
//   - every Options.LakePoll (default 1 s) followLake lists the tables and
//     reads each head (one LoadTable per dataset: the catalog's row and
//     the table's metadata file). A vintage the server does not serve is
//     installed as the lake has it (installFromLake): a new epoch
//     replaces the dataset and its companions re-download; the same epoch
//     is a compaction, and the delta records above its covers stay.
//   - a dataset this server is publishing itself (a PUT, a compaction, a
//     rollback, an install running) is skipped until that is over: its
//     commit is this server's own.
//   - a head older than what the server serves (the same epoch with lower
//     covers, or a lower epoch) is never installed (the store refuses
//     it); it is reported in /healthz.
//
// The follower's state is what /healthz reports as the replica's waits
// (ReplicaHealth): the catalog not read since start, a vintage not
// installed yet.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/apache/iceberg-go/catalog"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server/lake"
)

// DefaultLakePoll is how often a lake-backed server checks the lake's
// heads when Options.LakePoll is zero.
const DefaultLakePoll = time.Second

// replicaState is what followLake learnt last (guarded by mu).
type replicaState struct {
	mu sync.Mutex
	// checked: the time of the last complete pass over the heads (zero:
	// none since start); err: the last pass's failure to list the tables.
	checked time.Time
	err     error
	// pending: datasets whose lake vintage is not served yet, and why.
	pending map[string]pendingVintage
	// installs counts vintages installed by followLake (Metrics, tests).
	installs int64
}

// pendingVintage is a lake vintage a dataset does not serve yet.
type pendingVintage struct {
	want  lake.Vintage
	err   error // the last install attempt's, nil if not tried yet
	tries int
	next  time.Time // no new attempt before this (backoff)
}

// startReplica starts following the lake's heads (a lake-backed server
// with a poll interval).
func (s *Server) startReplica() {
	s.rp.pending = map[string]pendingVintage{}
	if s.opts.Lake == nil || s.opts.LakePoll < 0 {
		return
	}
	every := s.opts.LakePoll
	if every == 0 {
		every = DefaultLakePoll
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.followLakeOnce()
			}
		}
	}()
}

// followLakeOnce reads every table's head once and installs the vintages
// this server does not serve (see the top of this file).
func (s *Server) followLakeOnce() {
	l := s.opts.Lake
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	var names []string
	for id, err := range l.Catalog().ListTables(ctx, catalog.ToIdentifier(lake.Namespace)) {
		if err != nil {
			s.rp.mu.Lock()
			s.rp.err = fmt.Errorf("list the lake's tables: %w", err)
			s.rp.mu.Unlock()
			return
		}
		if n := catalog.TableNameFromIdent(id); format.ValidDatasetName(n) == nil {
			names = append(names, n)
		}
	}
	for _, n := range names {
		if ctx.Err() != nil {
			return
		}
		s.followDataset(ctx, n)
	}
	s.rp.mu.Lock()
	s.rp.checked, s.rp.err = time.Now().UTC(), nil
	for n := range s.rp.pending {
		if !slices.Contains(names, n) {
			delete(s.rp.pending, n) // its table was dropped
		}
	}
	s.rp.mu.Unlock()
}

// followDataset installs the lake's current vintage of dataset name if
// this server does not serve it.
func (s *Server) followDataset(ctx context.Context, name string) {
	l := s.opts.Lake
	// The head first, then what this server does: a commit of its own
	// that lands between the two reads is seen as busy or as served.
	head, err := l.Head(ctx, name)
	if err == nil && !head.Serving {
		head, err = l.Current(ctx, name) // another engine's head: the vintage below it
	}
	if errors.Is(err, lake.ErrUnknownVintage) || errors.Is(err, lake.ErrNoDataset) || errors.Is(err, lake.ErrNoServingIndex) {
		return // nothing to serve (reconcile and /healthz report foreign heads)
	}
	if err != nil {
		s.setPending(name, head, fmt.Errorf("read the lake's head: %w", err), false)
		return
	}
	if s.busy(name) {
		return
	}
	s.lk.Lock()
	known := s.lk.vintages[name]
	s.lk.Unlock()
	epoch, id, _, serr := s.store.State(name)
	if serr == nil && id == head.Snapshot {
		if known.IcebergSnapshot != head.IcebergSnapshot {
			s.lk.Lock()
			s.lk.vintages[name] = head
			s.lk.Unlock()
		}
		s.clearPending(name)
		return
	}
	if serr == nil {
		if _, m, ok := s.Head(name); ok && (head.Epoch < epoch || head.Epoch == epoch && head.CoversSeq < m.CoversThroughSeq) {
			s.setPending(name, head, fmt.Errorf("%w: the lake's vintage %s (epoch %d, covers %d) is older than snapshot %s (epoch %d, covers %d) in service", ErrStaleVintage, head.Snapshot, head.Epoch, head.CoversSeq, id, epoch, m.CoversThroughSeq), false)
			return
		}
	}
	s.rp.mu.Lock()
	p, ok := s.rp.pending[name]
	s.rp.mu.Unlock()
	if ok && p.want.IcebergSnapshot == head.IcebergSnapshot && time.Now().Before(p.next) {
		return // failed lately: back off
	}
	s.log.Info("the lake has a vintage this server does not serve; installing it", "dataset", name, "serving", id, "lake", head.Snapshot, "epoch", head.Epoch, "covers", head.CoversSeq)
	if err := s.installFromLake(name, head); err != nil {
		s.log.Error("installing the lake's vintage failed; serving the previous one", "dataset", name, "lake", head.Snapshot, "err", err)
		s.setPending(name, head, err, true)
		return
	}
	if a, err := s.asOf(); err == nil {
		a.Invalidate(name)
	}
	s.rp.mu.Lock()
	s.rp.installs++
	delete(s.rp.pending, name)
	s.rp.mu.Unlock()
}

// ErrStaleVintage: the lake's head of a dataset is older than the
// snapshot this server serves (it is not installed).
var ErrStaleVintage = errors.New("the lake's vintage is older than the one served")

// busy reports whether this server is changing dataset name itself (a
// PUT, a rollback, an install under lockName, or a compaction).
func (s *Server) busy(name string) bool {
	if s.replacing(name) {
		return true
	}
	s.mu.Lock()
	d := s.ds[name]
	s.mu.Unlock()
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.compacting
}

func (s *Server) setPending(name string, want lake.Vintage, err error, tried bool) {
	s.rp.mu.Lock()
	defer s.rp.mu.Unlock()
	p := s.rp.pending[name]
	if p.want.IcebergSnapshot != want.IcebergSnapshot {
		p = pendingVintage{}
	}
	p.want, p.err = want, err
	if tried {
		p.tries++
		p.next = time.Now().Add(min(time.Duration(p.tries)*time.Second, 30*time.Second))
	}
	s.rp.pending[name] = p
}

func (s *Server) clearPending(name string) {
	s.rp.mu.Lock()
	delete(s.rp.pending, name)
	s.rp.mu.Unlock()
}
