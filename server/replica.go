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
	"strings"
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
	// installs counts vintages installed from the lake at run time,
	// lostCompactions compactions that lost to another replica's commit.
	installs, lostCompactions int64
	// ready: the server has read the lake's heads once and serves every
	// dataset the lake holds (set once; ReplicaHealth.Serving).
	ready bool
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
	s.lk.Lock()
	// A failure to list the tables or to install a vintage at New is the
	// last publish error (lakeFailed): the server is not ready until a
	// pass of followLakeOnce succeeds.
	s.rp.ready = s.opts.Lake == nil || s.lk.pubErr == nil
	s.lk.Unlock()
	if s.opts.Lake == nil || s.opts.LakePoll < 0 {
		return
	}
	every := s.opts.LakePoll
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
	cat, err := l.CatalogContext(ctx)
	if err != nil {
		s.rp.mu.Lock()
		s.rp.err = fmt.Errorf("open the lake's catalog: %w", err)
		s.rp.mu.Unlock()
		return
	}
	var names []string
	for id, err := range cat.ListTables(ctx, catalog.ToIdentifier(lake.Namespace)) {
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
	defer s.rp.mu.Unlock()
	s.rp.checked, s.rp.err = time.Now().UTC(), nil
	missing := false
	for n := range s.rp.pending {
		if !slices.Contains(names, n) {
			delete(s.rp.pending, n) // its table was dropped
		} else if _, _, _, err := s.store.State(n); err != nil {
			missing = true
		}
	}
	if !missing {
		s.rp.ready = true
	}
}

// followDataset installs the lake's current vintage of dataset name if
// this server does not serve it and is not changing it itself.
func (s *Server) followDataset(ctx context.Context, name string) {
	s.syncDataset(ctx, name, false)
}

// syncDataset installs the lake's current vintage of dataset name if this
// server does not serve it; unless force, not while the server changes
// the dataset itself (busy) nor during the backoff after a failed
// install. It returns the install's error.
func (s *Server) syncDataset(ctx context.Context, name string, force bool) error {
	l := s.opts.Lake
	// The head first, then what this server does: a commit of its own
	// that lands between the two reads is seen as busy or as served.
	head, err := l.Head(ctx, name)
	if err == nil && !head.Serving {
		head, err = l.Current(ctx, name) // another engine's head: the vintage below it
	}
	if errors.Is(err, lake.ErrUnknownVintage) || errors.Is(err, lake.ErrNoDataset) || errors.Is(err, lake.ErrNoServingIndex) {
		return nil // nothing to serve (reconcile and /healthz report foreign heads)
	}
	if err != nil {
		err = fmt.Errorf("read the lake's head: %w", err)
		s.setPending(name, head, err, false)
		return err
	}
	s.observeVintages(name)
	if !force && s.busy(name) {
		return nil
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
		return nil
	}
	if serr == nil {
		if _, m, ok := s.Head(name); ok && (head.Epoch < epoch || head.Epoch == epoch && head.CoversSeq < m.CoversThroughSeq) {
			err := fmt.Errorf("%w: the lake's vintage %s (epoch %d, covers %d) is older than snapshot %s (epoch %d, covers %d) in service", ErrStaleVintage, head.Snapshot, head.Epoch, head.CoversSeq, id, epoch, m.CoversThroughSeq)
			s.setPending(name, head, err, false)
			return err
		}
	}
	s.rp.mu.Lock()
	p, ok := s.rp.pending[name]
	s.rp.mu.Unlock()
	if !force && ok && p.want.IcebergSnapshot == head.IcebergSnapshot && time.Now().Before(p.next) {
		return nil // failed lately: back off
	}
	s.log.Info("the lake has a vintage this server does not serve; installing it", "dataset", name, "serving", id, "lake", head.Snapshot, "epoch", head.Epoch, "covers", head.CoversSeq)
	if err := s.installFromLake(name, head); err != nil {
		s.log.Error("installing the lake's vintage failed; serving the previous one", "dataset", name, "lake", head.Snapshot, "err", err)
		s.setPending(name, head, err, true)
		return err
	}
	if a, err := s.asOf(); err == nil {
		a.Invalidate(name)
	}
	s.rp.mu.Lock()
	s.rp.installs++
	delete(s.rp.pending, name)
	s.rp.mu.Unlock()
	return nil
}

// observeVintages hands the retained vintages of dataset name, as the
// head just read loaded them, to the as-of reads (AsOf.Observe): a
// vintage another server expired is no longer answered from within a
// poll of the lake's heads.
func (s *Server) observeVintages(name string) {
	vs, ok := s.opts.Lake.LoadedVintages(name)
	if !ok {
		return
	}
	if a, err := s.asOf(); err == nil {
		a.Observe(name, vs)
	}
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

// WaitKind is what a replica waits for (Wait.Kind).
type WaitKind string

// Wait kinds.
const (
	// WaitCatalog: the lake's tables could not be listed (since start, or
	// at the last check).
	WaitCatalog WaitKind = "catalog"
	// WaitVintage: a dataset's current lake vintage is not served yet
	// (its install failed and is retried, or it is older than the one
	// served: see Reason).
	WaitVintage WaitKind = "vintage"
	// WaitStream: a dataset's delta log is not followed up to its head.
	WaitStream WaitKind = "stream"
)

// Wait is one thing a replica waits for.
type Wait struct {
	Kind    WaitKind `json:"kind"`
	Dataset string   `json:"dataset,omitempty"`
	// Vintage is the es snapshot id of the lake vintage waited for
	// (WaitVintage), Serving the one served instead ("" if none).
	Vintage string `json:"vintage,omitempty"`
	Serving string `json:"serving,omitempty"`
	// Tries counts failed installs of Vintage.
	Tries int `json:"tries,omitempty"`
	// Applied is the last seq applied from the stream (WaitStream).
	Applied uint64 `json:"applied,omitempty"`
	Reason  string `json:"reason"`
}

// ReplicaHealth is the replica part of Health (a lake-backed server).
type ReplicaHealth struct {
	// Serving: the server read the lake's heads since it started, serves
	// every dataset the lake holds and caught up with every dataset's
	// stream (none catching up). Until then /healthz answers
	// 503 (a load balancer sends it nothing yet); once true it stays
	// true, and what it waits for later makes the state degraded.
	Serving bool `json:"serving"`
	// LakeCheckedAt is the end of the last complete check of the lake's
	// heads (nil: none since start), LakePoll its interval.
	LakeCheckedAt *time.Time `json:"lake_checked_at,omitempty"`
	LakePoll      string     `json:"lake_poll"`
	// Installed counts vintages installed from the lake since start,
	// LostCompactions compactions that lost to another replica's (the
	// winner's vintage was installed instead).
	Installed       int64  `json:"installed"`
	LostCompactions int64  `json:"lost_compactions"`
	Waits           []Wait `json:"waits,omitempty"`
}

// replicaHealth reports the follower's state (nil without a lake).
func (s *Server) replicaHealth() *ReplicaHealth {
	if s.opts.Lake == nil && s.dlog == nil {
		return nil
	}
	// The delta log's side first (it takes its own locks).
	var streams []Wait
	catchingUp := false
	if s.dlog != nil {
		up, state := s.dlog.Connected()
		for _, d := range s.LogState().Datasets {
			if !up && d.State != FollowStopped {
				// Cut off: the follower waits for the reconnection and
				// does not know it; say so.
				streams = append(streams, Wait{Kind: WaitStream, Dataset: d.Name, Applied: d.Applied,
					Reason: "not connected to the delta log's NATS servers (" + state + "); records logged by other replicas are not applied here"})
				continue
			}
			if d.State == FollowLive || d.State == FollowStopped {
				continue
			}
			catchingUp = catchingUp || d.State == FollowCatchingUp
			w := Wait{Kind: WaitStream, Dataset: d.Name, Applied: d.Applied, Reason: d.State.String()}
			if d.Err != nil {
				w.Reason += ": " + s.scrub(d.Err.Error())
			}
			streams = append(streams, w)
		}
	}
	poll := s.opts.LakePoll
	h := &ReplicaHealth{LakePoll: poll.String()}
	if poll < 0 || s.opts.Lake == nil {
		h.LakePoll = "never"
	}
	s.rp.mu.Lock()
	defer s.rp.mu.Unlock()
	h.Serving, h.Installed, h.LostCompactions = s.rp.ready && !catchingUp, s.rp.installs, s.rp.lostCompactions
	h.Waits = streams
	if !s.rp.checked.IsZero() {
		at := s.rp.checked
		h.LakeCheckedAt = &at
	}
	if s.rp.err != nil {
		h.Waits = append(h.Waits, Wait{Kind: WaitCatalog, Reason: s.scrub(s.rp.err.Error())})
	} else if !s.rp.ready && s.rp.checked.IsZero() {
		why := "the lake's heads were not read since start"
		s.lk.Lock()
		if s.lk.pubErr != nil {
			why += ": " + s.scrub(s.lk.pubErr.Error())
		}
		s.lk.Unlock()
		h.Waits = append(h.Waits, Wait{Kind: WaitCatalog, Reason: why})
	}
	for n, p := range s.rp.pending {
		w := Wait{Kind: WaitVintage, Dataset: n, Vintage: p.want.Snapshot, Tries: p.tries, Reason: "not installed yet"}
		if p.err != nil {
			w.Reason = s.scrub(p.err.Error())
		}
		if _, id, _, err := s.store.State(n); err == nil {
			w.Serving = id
		}
		h.Waits = append(h.Waits, w)
	}
	slices.SortFunc(h.Waits, func(a, b Wait) int {
		if a.Kind != b.Kind {
			return strings.Compare(string(a.Kind), string(b.Kind))
		}
		return strings.Compare(a.Dataset, b.Dataset)
	})
	return h
}

// publishOver is the parent a publish of dataset's snapshot m is pinned
// to (lake.PublishOptions.Over): for a compaction (the epoch of the
// vintage served), that vintage: the pinned Iceberg commit is the arbiter
// between replicas compacting at once. 0 for anything else (a new epoch:
// a PUT, a rollback lands on whatever the head is), and while the head is
// another engine's commit (refused: no compaction could land over it).
func (s *Server) publishOver(dataset string, m *format.Manifest) int64 {
	s.lk.Lock()
	defer s.lk.Unlock()
	cur, ok := s.lk.vintages[dataset]
	if !ok || s.lk.refused[dataset] != "" || cur.Epoch != m.Epoch {
		return 0
	}
	return cur.IcebergSnapshot
}

// compactStore compacts dataset name's store (Compact). On a replica
// whose compaction lost to another's (lake.ErrHeadMoved) it installs the
// winner's vintage instead of retrying, and returns its manifest with
// lost set (installFromLake announced it).
func (s *Server) compactStore(name string) (m *format.Manifest, lost bool, err error) {
	m, err = s.store.Compact(name)
	if err == nil || !errors.Is(err, lake.ErrHeadMoved) {
		return m, false, err
	}
	s.log.Info("another replica published this dataset first; installing its vintage instead of this compaction", "dataset", name, "err", err)
	s.rp.mu.Lock()
	s.rp.lostCompactions++
	s.rp.mu.Unlock()
	if ierr := s.syncDataset(s.ctx, name, true); ierr != nil {
		return nil, true, fmt.Errorf("%w; installing the lake's vintage instead failed: %w", err, ierr)
	}
	_, cur, ok := s.Head(name)
	if !ok {
		return nil, true, fmt.Errorf("%w; the dataset is not served after installing the lake's vintage", err)
	}
	return cur, true, nil
}
