package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/energyscope/energyscope/internal/fileutil"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server/deltalog"
)

// The delta log (issue 13). Every dataset's live records live in its
// stream of the JetStream delta log (server/deltalog), not in the home:
//
//   - Ingest appends a batch to the log under an idempotency key and is
//     acknowledged once JetStream acknowledged it and this server applied
//     it (read-your-writes). The seqs are the log's.
//   - ONE apply path: each dataset has a follower (follow) that reads
//     its stream from the seq the store holds and applies what arrives
//     to the store (whose delta is in memory only,
//     localcache.Options.DeltaInMemory), keeps it in the in-memory tail
//     Since serves catch-ups from, and fans it out through the hub. A
//     record appended through another replica arrives the same way.
//   - At start, the store maps each dataset's snapshot (home or lake), and
//     the tail is rebuilt from the stream from the oldest retained
//     snapshot's covers (catchUp) before the server serves.
//   - A compaction trims the stream below the oldest retained snapshot's
//     covers, and on a lake-backed server below the oldest covers of the
//     epoch's vintages the lake retains (trimHistory, logFloor).

// NatsDir is the directory of a home that holds the embedded JetStream
// node's store (Options.DeltaLog nil).
const NatsDir = "nats"

// EmbeddedMaxPayload is the message limit of the embedded node: one
// ingest batch is one message, and 64 MiB (NATS's ceiling) keeps the
// MaxBatchBytes default of 60 MiB.
const EmbeddedMaxPayload = 64 << 20

// IdempotencyHeader is the HTTP header of an ingest's idempotency key.
const IdempotencyHeader = "Idempotency-Key"

// ErrNotApplied: an ingest was acknowledged by the delta log (it is
// durable, its seqs are assigned) but this server did not apply it in
// time (its follower is behind or failing), or its dataset is being
// installed here right now (nothing logged). A retry with the same
// idempotency key stores nothing twice. HTTP 503.
var ErrNotApplied = errors.New("logged but not yet applied here")

// ErrBadKey is the delta log's: an idempotency key that is empty, over
// deltalog.MaxKeyLen bytes or not printable ASCII. It wraps ErrBadInput
// where the server returns it.
var ErrBadKey = deltalog.ErrBadKey

// FollowState is where a dataset's follower stands.
type FollowState int

const (
	// FollowCatchingUp: reading the stream up to its head at start.
	FollowCatchingUp FollowState = iota
	// FollowLive: caught up; applying records as they are logged.
	FollowLive
	// FollowRetrying: the last read failed (LogDataset.Err); the follower
	// retries from the last applied seq.
	FollowRetrying
	// FollowStopped: the server is closing.
	FollowStopped
)

func (f FollowState) String() string {
	switch f {
	case FollowCatchingUp:
		return "catching-up"
	case FollowLive:
		return "live"
	case FollowRetrying:
		return "retrying"
	case FollowStopped:
		return "stopped"
	}
	return fmt.Sprintf("FollowState(%d)", int(f))
}

// LogState is where the server stands with its delta log (LogState).
type LogState struct {
	// Embedded: the server runs its own node in <home>/nats; else it is
	// connected to an external cluster (es serve --nats).
	Embedded bool
	// Replicas of each stream the server creates.
	Replicas int
	// MaxBatchBytes is the largest batch one ingest may log (the smaller
	// of Options.MaxBatchBytes and the log's message limit).
	MaxBatchBytes int64
	Datasets      []LogDataset // sorted by name
}

// LogDataset is one dataset's follower.
type LogDataset struct {
	Name    string
	State   FollowState
	Applied uint64 // the last seq applied to the store
	Err     error  // the last read error while State is FollowRetrying
	// Restarts counts reads restarted because an ingest saw the follower
	// stall (waitApplied).
	Restarts int64
}

// LogState reports the delta log's side of the server: for /healthz,
// which says what a replica waits for.
func (s *Server) LogState() LogState {
	ls := LogState{Embedded: s.node != nil, Replicas: s.dlog.Replicas(), MaxBatchBytes: s.maxBatchBytes()}
	s.mu.Lock()
	for _, d := range s.ds {
		d.amu.Lock()
		ls.Datasets = append(ls.Datasets, LogDataset{Name: d.name, State: d.state, Applied: d.applied, Err: d.followErr, Restarts: d.kicks})
		d.amu.Unlock()
	}
	s.mu.Unlock()
	slices.SortFunc(ls.Datasets, func(a, b LogDataset) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return ls
}

// DeltaLog is the server's delta log.
func (s *Server) DeltaLog() *deltalog.Log { return s.dlog }

// maxBatchBytes is the largest encoded batch an ingest takes.
func (s *Server) maxBatchBytes() int64 {
	return min(s.opts.MaxBatchBytes, int64(s.dlog.MaxBatchBytes()))
}

// ClientURLFile, in a home's NatsDir, holds the embedded node's client
// URL (nats://127.0.0.1:PORT) while a server runs it: readers of the home
// (es get --home) read the live records from it (OverlayHomeLog).
const ClientURLFile = "client-url"

// openEmbeddedLog opens the delta log of Options.DeltaLog nil: an
// embedded node in <home>/nats, owned by the server, whose client URL is
// written to ClientURLFile.
func openEmbeddedLog(home string, o Options) (*deltalog.Node, *deltalog.Log, error) {
	dir := filepath.Join(home, NatsDir)
	n, err := deltalog.StartNode(deltalog.NodeOptions{Dir: dir, MaxPayload: EmbeddedMaxPayload})
	if err != nil {
		return nil, nil, err
	}
	l, err := n.Connect(deltalog.Options{Logger: o.Logger, ClientName: "es-serve"})
	if err != nil {
		n.Shutdown()
		return nil, nil, err
	}
	if err := fileutil.WriteFile(filepath.Join(dir, ClientURLFile), []byte(n.ClientURL()+"\n"), 0o644); err != nil {
		l.Close()
		n.Shutdown()
		return nil, nil, err
	}
	return n, l, nil
}

// OverlayHomeLog applies to st, a read-only store of server home home
// opened with DeltaInMemory, each dataset's records of the home's delta
// log above what st holds: a reader of a server home (es get --home)
// sees the live rows, as it saw the server's write-ahead log before. The
// log is the running server's embedded node (ClientURLFile), or, when no
// server runs, the node started here for the call. An error leaves st
// serving what it applied so far (the snapshots at least).
func OverlayHomeLog(ctx context.Context, home string, st *localcache.Store) error {
	l, release, err := openHomeLog(home)
	if err != nil {
		return err
	}
	defer release()
	for _, name := range st.DatasetNames() {
		seq, err := st.LastSeq(name)
		if err != nil {
			continue // damaged: reported by the store
		}
		recs, err := l.Read(ctx, name, seq+1)
		if errors.Is(err, deltalog.ErrUnknownDataset) {
			continue
		}
		if err != nil {
			return fmt.Errorf("delta log of %s: %w", name, err)
		}
		if len(recs) > 0 {
			if _, err := st.Apply(name, recs); err != nil {
				return fmt.Errorf("delta log of %s: %w", name, err)
			}
		}
	}
	return nil
}

// EmbeddedLogHead is dataset's head seq in the delta log of a server
// home whose server is not running (es cook --home on a server home: a
// new epoch covers every seq the log handed out). It starts the home's
// embedded node for the call (openHomeLog); 0 when the log has no such
// dataset.
func EmbeddedLogHead(ctx context.Context, home, dataset string) (uint64, error) {
	l, release, err := openHomeLog(home)
	if err != nil {
		return 0, err
	}
	defer release()
	h, err := l.Head(ctx, dataset)
	if errors.Is(err, deltalog.ErrUnknownDataset) {
		return 0, nil
	}
	return h, err
}

// ReadHomeLog reads dataset's records from seq from on out of server
// home home's delta log (its running server's node, or one started for
// the call; see OverlayHomeLog).
func ReadHomeLog(ctx context.Context, home, dataset string, from uint64) ([]format.Record, error) {
	l, release, err := openHomeLog(home)
	if err != nil {
		return nil, err
	}
	defer release()
	return l.Read(ctx, dataset, from)
}

// openHomeLog connects to the delta log of server home home: its running
// server's embedded node (ClientURLFile), or, when none answers, a node
// started here until release.
func openHomeLog(home string) (l *deltalog.Log, release func(), err error) {
	if b, err := os.ReadFile(filepath.Join(home, NatsDir, ClientURLFile)); err == nil {
		if u := strings.TrimSpace(string(b)); strings.HasPrefix(u, "nats://127.0.0.1:") {
			if l, err := deltalog.Connect(u, deltalog.Options{ClientName: "es-reader"}); err == nil {
				return l, l.Close, nil
			}
		}
	}
	// No server runs (or its URL is stale: a kill): start the node here.
	n, err := deltalog.StartNode(deltalog.NodeOptions{Dir: filepath.Join(home, NatsDir), MaxPayload: EmbeddedMaxPayload})
	if err != nil {
		return nil, nil, fmt.Errorf("delta log of %s: %w", home, err)
	}
	if l, err = n.Connect(deltalog.Options{ClientName: "es-reader"}); err != nil {
		n.Shutdown()
		return nil, nil, fmt.Errorf("delta log of %s: %w", home, err)
	}
	return l, func() { l.Close(); n.Shutdown() }, nil
}

// newKey makes an idempotency key for an ingest that came without one.
func newKey() string {
	var b [16]byte
	rand.Read(b[:])
	return "es-" + hex.EncodeToString(b[:])
}

// setApplied records that the store holds every seq through seq and
// wakes the ingests waiting for it.
func (d *dataset) setApplied(seq uint64) {
	d.amu.Lock()
	if seq > d.applied {
		d.applied = seq
		close(d.appliedCh)
		d.appliedCh = make(chan struct{})
	}
	d.amu.Unlock()
}

// stallKick is how long an ingest waits for the follower to move before
// it restarts the follower's read (kick).
const stallKick = 2 * time.Second

// waitApplied waits until the store holds seq (read-your-writes). A
// follower that does not move for stallKick while the ingest waits is
// restarted (d.kick): its consumer may hang on a connection cut from a
// node that died (the ordered consumer notices missing heartbeats only
// after tens of seconds), and a new read from the last applied seq on the
// reconnected connection delivers what was logged.
func (d *dataset) waitApplied(ctx context.Context, seq uint64) error {
	stall := time.NewTicker(stallKick)
	defer stall.Stop()
	var seen uint64
	for {
		d.amu.Lock()
		applied, ch, ferr := d.applied, d.appliedCh, d.followErr
		d.amu.Unlock()
		if applied >= seq {
			return nil
		}
		select {
		case <-ch:
		case <-stall.C:
			if applied == seen {
				select {
				case d.kick <- struct{}{}:
				default: // a kick is pending
				}
			}
			seen = applied
		case <-ctx.Done():
			if ferr != nil {
				return fmt.Errorf("%w: seq %d of %s (applied through %d; the follower: %v)", ErrNotApplied, seq, d.name, applied, ferr)
			}
			return fmt.Errorf("%w: seq %d of %s (applied through %d)", ErrNotApplied, seq, d.name, applied)
		}
	}
}

func (d *dataset) setState(st FollowState, err error) {
	d.amu.Lock()
	d.state, d.followErr = st, err
	d.amu.Unlock()
}

// applyLogged applies records read from the log to the store, keeps the
// ones the store took in the tail and fans them out. It is the one apply
// path of live records: the follower's.
func (s *Server) applyLogged(d *dataset, recs []format.Record) error {
	if len(recs) == 0 {
		return nil
	}
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	n, err := s.store.Apply(d.name, recs)
	if err != nil {
		return fmt.Errorf("apply to the store: %w", err)
	}
	// Records at or below the store's head are skipped: already there,
	// or of an epoch a replacement retired.
	fresh := recs[len(recs)-n:]
	if n > 0 {
		d.hmu.Lock()
		if k := len(d.hist); k == 0 || d.hist[k-1].Seq < fresh[0].Seq {
			d.hist = append(d.hist, fresh...)
		}
		d.hmu.Unlock()
	}
	d.setApplied(recs[len(recs)-1].Seq)
	// After setApplied: an acknowledged ingest waits for the store, not
	// for the fan-out, which writes to each companion that keeps up
	// itself (hub.Publish) and so grows with the companions. applyMu,
	// still held, keeps the publishes in seq order.
	if n > 0 {
		s.hub.Publish(d.name, fresh)
	}
	return nil
}

// reapplyAboveLocked applies to the store, just put on a new epoch
// covering through covers, the log's records above covers that the
// follower had applied to the epoch before: the log numbered them after
// the replacement's covers (written through another replica while the
// replacement was made, or before this replica installed another's), so
// they belong to the new epoch, whose delta starts empty at covers
// (localcache.Options.DeltaInMemory). They stay in the tail; companions
// of the new epoch catch up from it. d.applyMu is held.
func (s *Server) reapplyAboveLocked(d *dataset, covers uint64) {
	d.amu.Lock()
	applied := d.applied
	d.amu.Unlock()
	if applied <= covers {
		return // nothing above covers was applied: the follower brings it
	}
	ctx, cancel := context.WithTimeout(s.ctx, startTimeout)
	defer cancel()
	recs, err := s.dlog.Read(ctx, d.name, covers+1)
	if err == nil && len(recs) > 0 {
		if k := histSearch(recs, applied); k < len(recs) {
			recs = recs[:k] // the follower applies the rest
		}
		_, err = s.store.Apply(d.name, recs)
	}
	if err != nil {
		s.log.Error("delta log: re-apply the records above a new epoch's covers", "dataset", d.name, "covers", covers, "err", err)
	}
}

// catchUp reads the dataset's stream from the oldest retained snapshot's
// covers into the store and the tail, through the stream's head at the
// call, and returns the next seq to follow from.
func (s *Server) catchUp(ctx context.Context, d *dataset) (uint64, error) {
	head, err := s.store.LastSeq(d.name)
	if err != nil {
		return 0, err
	}
	if err := s.dlog.Create(ctx, d.name, deltalog.CreateOptions{After: head}); err != nil {
		return 0, fmt.Errorf("delta log: %w", err)
	}
	// A snapshot that covers more than the log holds (a vintage from the
	// lake): the log's next seq goes above it.
	if err := s.dlog.Advance(ctx, d.name, head); err != nil {
		return 0, fmt.Errorf("delta log: %w", err)
	}
	// The tail reaches back to the lowest covers of the retained
	// snapshots and the one in service.
	from := head + 1
	if oldest, ok := s.retainedCovers(d.name); ok {
		from = min(oldest, head) + 1
	}
	recs, err := s.dlog.Read(ctx, d.name, from)
	if errors.Is(err, deltalog.ErrTrimmed) && from <= head {
		// The log no longer reaches back to the oldest retained snapshot:
		// the tail starts at the one in service.
		from = head + 1
		recs, err = s.dlog.Read(ctx, d.name, from)
	}
	if err != nil {
		return 0, fmt.Errorf("delta log: catch up from seq %d: %w", from, err)
	}
	// Every record read goes to the tail (the ones at or below the head
	// are in the snapshot: a companion behind it catches up from here);
	// the store takes those above its head.
	d.hmu.Lock()
	d.hist, d.histFrom = recs, from-1
	d.hmu.Unlock()
	n, err := s.store.Apply(d.name, recs)
	if err != nil {
		return 0, fmt.Errorf("apply to the store: %w", err)
	}
	if n > 0 {
		s.hub.Publish(d.name, recs[len(recs)-n:])
	}
	last := head
	if k := len(recs); k > 0 {
		last = max(last, recs[k-1].Seq)
	}
	d.setApplied(last)
	return last + 1, nil
}

// follow applies the dataset's stream from seq next on until the server
// closes, retrying failed reads from the last applied seq.
func (s *Server) follow(d *dataset, next uint64) {
	defer s.wg.Done()
	backoff := 100 * time.Millisecond
	for {
		d.setState(FollowLive, nil)
		fctx, fcancel := context.WithCancel(s.ctx)
		go func() {
			select {
			case <-d.kick: // an ingest saw no progress (waitApplied)
				fcancel()
			case <-fctx.Done():
			}
		}()
		err := s.dlog.Follow(fctx, d.name, next, func(recs []format.Record) error {
			backoff = 100 * time.Millisecond
			return s.applyLogged(d, recs)
		})
		kicked := fctx.Err() != nil && s.ctx.Err() == nil
		fcancel()
		if s.ctx.Err() != nil {
			d.setState(FollowStopped, nil)
			return
		}
		if kicked {
			s.log.Warn("delta log: the follower did not move while an ingest waited; reading again", "dataset", d.name, "from", next)
			d.amu.Lock()
			next = d.applied + 1
			d.kicks++
			d.amu.Unlock()
			continue
		}
		d.setState(FollowRetrying, err)
		s.log.Warn("delta log: following failed, retrying", "dataset", d.name, "from", next, "err", err)
		select {
		case <-s.ctx.Done():
			d.setState(FollowStopped, nil)
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
		d.amu.Lock()
		next = d.applied + 1
		d.amu.Unlock()
		if seq, err := s.store.LastSeq(d.name); err == nil && seq+1 > next {
			next = seq + 1 // a replacement moved the store past it
		}
	}
}

// histSearch is the index of the first record of hist above seq.
func histSearch(hist []format.Record, seq uint64) int {
	return sort.Search(len(hist), func(i int) bool { return hist[i].Seq > seq })
}
