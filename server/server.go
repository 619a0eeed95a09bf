// Package server is the central server: it ingests rows and source files,
// assigns sequence numbers, keeps datasets in the same localcache.Store the
// desktop uses, compacts and publishes snapshots by policy, keeps the delta
// history back to its oldest retained snapshot, and streams snapshots and
// deltas to companions through server/hub. It also serves lookups.
//
// Durability: the live delta lives in the JetStream delta log
// (server/deltalog; logfollow.go): an ingest is acknowledged only after
// JetStream acknowledged it (fsynced first on the embedded node) and this
// server applied it. Sequence numbers are the log's, contiguous per
// dataset. The store keeps its delta in memory only and applies the log
// again from its snapshot's covers after a restart.
package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/format"
	_ "github.com/energyscope/energyscope/localcache/format/tailwrite" // format.Write can write a cold tier (tail.parquet)
	"github.com/energyscope/energyscope/server/cook"
	"github.com/energyscope/energyscope/server/deltalog"
	"github.com/energyscope/energyscope/server/hub"
	"github.com/energyscope/energyscope/server/lake"
	"github.com/energyscope/energyscope/sync/protocol"
)

// Options for New.
type Options struct {
	Home   string
	Logger *slog.Logger
	// Tokens authenticates requests; nil or empty disables auth (only
	// for loopback development: es serve refuses it unless told).
	Tokens *Tokens
	// Compaction policy: compact a dataset when its delta holds this
	// many rows or bytes (defaults 1M rows, 64 MiB), and daily at
	// CompactAt ("HH:MM" UTC, empty = never).
	CompactRows  int
	CompactBytes int64
	CompactAt    string
	// Keep snapshots per dataset (>= 2; the delta history reaches back to
	// the oldest). Default 2.
	Keep int
	// FormatVersion is the snapshot format version the server writes:
	// compactions (localcache.Options.FormatVersion), re-cooks (Replace)
	// and rollbacks; 0: format.FormatVersion. A fleet with companions of
	// an older build keeps the version they read (es serve
	// --format-version).
	FormatVersion int
	// WarmSnapshots reads what lookups read of each large snapshot the
	// server opens into the page cache in 2 MiB folios in the background
	// (snapshot.Options.Warm; es serve --warm).
	WarmSnapshots bool
	// MappedIndex keeps lookups on index.hash's mapping
	// (localcache.Options.MappedIndex).
	MappedIndex bool
	// Hub options (queue sizes, ping interval).
	Hub hub.Options

	// Limits of the HTTP API (zero: the default in parentheses).
	// MaxIngestBody bounds a POST .../rows body (256 MiB), MaxUploadBody
	// a PUT source file (8 GiB), MaxBatchBytes the encoded size of one
	// ingest batch (60 MiB: it must fit one write-ahead log frame).
	MaxIngestBody int64
	MaxUploadBody int64
	MaxBatchBytes int64
	// Conn bounds connections and the time a request may take (see
	// ConnOptions and HTTPServer).
	Conn ConnOptions
	// SeparateMetrics leaves /metrics out of Handler: serve
	// MetricsHandler on a listener of its own (es serve --metrics-listen).
	SeparateMetrics bool
	// Lake, when set, is the server's store of record (lakeserve.go):
	// every snapshot is published to it before it serves, and New
	// reconciles the home with it. nil: no lake, snapshots live only in
	// the home. The caller opens it and closes it after Close.
	Lake *lake.Lake
	// KeepVintages and KeepVintageFor are the lake's retention, applied
	// after each publish (ExpireVintages): the newest KeepVintages
	// vintages and those younger than KeepVintageFor are kept, tagged and
	// current ones always. Both zero: every vintage is kept.
	KeepVintages   int
	KeepVintageFor time.Duration
	// LakePoll is how often a lake-backed server reads the lake's heads
	// to install what other replicas committed (replica.go; zero:
	// DefaultLakePoll, negative: never).
	LakePoll time.Duration
	// DeltaLog is the delta log every dataset's live records go through
	// (logfollow.go): a connection to an external JetStream cluster
	// (deltalog.Connect, es serve --nats), which the caller opens and
	// closes after Close. nil: New starts an embedded JetStream node in
	// <Home>/nats (NatsDir) and stops it at Close; the same code path on
	// one box.
	DeltaLog *deltalog.Log
	// LogWait bounds how long New waits for the datasets' streams of the
	// delta log in all (creating them, replaying them; default 2
	// minutes), and a later open of one dataset. A dataset whose log does
	// not answer in time is reported (Damaged, /healthz) and takes no
	// updates until its log answers: the heartbeat tries it again every
	// 5 s. es serve --log-wait.
	LogWait time.Duration
}

// ConnOptions are the connection limits of HTTPServer. Zero values take
// the defaults in parentheses; a negative value disables that limit.
type ConnOptions struct {
	// ReadHeaderTimeout bounds the time to read a request's headers,
	// which also bounds how long a new connection may stay silent (10 s).
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle between requests (60 s).
	IdleTimeout time.Duration
	// WriteTimeout bounds writing the response of a non-streaming route
	// (everything but /v1/sync and /v1/files) (60 s).
	WriteTimeout time.Duration
	// BodyGrace and MinBodyRate bound reading a request body: after
	// BodyGrace (30 s) the body must have arrived at MinBodyRate bytes per
	// second on average (32 KiB/s), else the request is cut with 408.
	BodyGrace   time.Duration
	MinBodyRate int64
	// FileChunkTimeout bounds each FileChunk (256 KiB) of a snapshot file
	// download (/v1/files): it must be written within this time (60 s),
	// or the download is cut and its connection closed. The deadline
	// moves with progress, so a download of any size at any rate above
	// about FileChunk per FileChunkTimeout completes, while a reader that
	// stops reading no longer holds a goroutine and a file open for ever.
	FileChunkTimeout time.Duration
	// MaxUnauthConns caps connections that have not yet passed auth
	// (256): over the cap, the oldest such connection is closed. An
	// authenticated connection never counts.
	MaxUnauthConns int
}

func (c ConnOptions) withDefaults() ConnOptions {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		} else if *v < 0 {
			*v = 0
		}
	}
	def(&c.ReadHeaderTimeout, 10*time.Second)
	def(&c.IdleTimeout, 60*time.Second)
	def(&c.WriteTimeout, 60*time.Second)
	def(&c.BodyGrace, 30*time.Second)
	def(&c.FileChunkTimeout, 60*time.Second)
	if c.MinBodyRate == 0 {
		c.MinBodyRate = 32 << 10
	} else if c.MinBodyRate < 0 {
		c.MinBodyRate = 0
	}
	if c.MaxUnauthConns == 0 {
		c.MaxUnauthConns = 256
	} else if c.MaxUnauthConns < 0 {
		c.MaxUnauthConns = 0
	}
	return c
}

// Server is the central server.
type Server struct {
	opts  Options
	store *localcache.Store
	dlog  *deltalog.Log
	node  *deltalog.Node // the embedded node when Options.DeltaLog is nil (owned)
	// openMu serializes openDataset (its catch-up reads the log without
	// holding mu).
	openMu sync.Mutex
	hub    *hub.Hub
	log    *slog.Logger
	m      *metrics

	// authOff: no tokens were configured at New (development on
	// loopback). Fixed at New: removing the last token later refuses
	// every request instead of opening the server.
	authOff bool
	conns   *connLimiter
	// beforeHandle, when set (tests), runs first in every request.
	beforeHandle func(*http.Request)

	mu sync.Mutex // guards ds, broken, names, uploads
	ds map[string]*dataset
	// broken: datasets the store serves whose server state (history)
	// failed to open, with the reason; they take no ingest.
	broken map[string]string
	// names serializes creating and replacing datasets by case-folded
	// name (lockName).
	names map[string]*nameLock
	// uploads are the upload directories in use (never swept).
	uploads map[string]bool

	// lk is the lake's side of the server (lakeserve.go).
	lk struct {
		sync.Mutex
		vintages map[string]lake.Vintage // the vintage each dataset serves
		// refused: datasets whose table head is not served, and why.
		refused map[string]string
		// installing: dataset -> the lake vintage's es snapshot id that
		// installFromLake is installing (the Publish hook skips it).
		installing map[string]string
		// rollbackOf: dataset -> the rollback being installed (its es
		// snapshot id and the Iceberg snapshot it restores): the Publish
		// hook records the marker in the commit.
		rollbackOf map[string]rollbackMark
		pubErr     error // the last failed publish, until one succeeds
		pubErrAt   time.Time
	}
	// ctx is cancelled by Close (bounds publishes and lake checks).
	ctx    context.Context
	cancel context.CancelFunc

	vint vintageState // as-of reads, rollback, retention (vintages.go)

	reopening atomic.Bool  // reopenBroken runs
	rp        replicaState // following the lake's heads (replica.go)

	stop chan struct{}
	// closing makes Close run once; closeErr is what it returned.
	closing  sync.Once
	closeErr error
	wg       sync.WaitGroup
}

type nameLock struct {
	mu   sync.Mutex
	refs int // guarded by Server.mu
}

// dataset is the server-side state of one dataset beyond the store.
type dataset struct {
	name string
	// mu serializes this server's appends to the log with replacements
	// (a replacement's covers is the log's head under mu), and the
	// compaction bookkeeping.
	mu sync.Mutex
	// hist is the in-memory tail: every record since the oldest retained
	// snapshot, with seq > histFrom, contiguous, rebuilt from the log at
	// start. Guarded by hmu (readers: the hub).
	hmu      sync.RWMutex
	hist     []format.Record
	histFrom uint64
	// applyMu serializes applying records from the log to the store with
	// installs of a new epoch (reapplyAboveLocked).
	applyMu sync.Mutex
	// amu guards the follower's progress: applied (the last seq the store
	// holds; appliedCh is closed and replaced when it moves), state and
	// followErr.
	amu       sync.Mutex
	applied   uint64
	appliedCh chan struct{}
	state     FollowState
	followErr error
	kicks     int64 // follower reads restarted by a waiting ingest
	// kick asks the follower to restart its read (waitApplied).
	kick chan struct{}
	// files maps sha256 -> path for the retained snapshots; guarded by hmu.
	files      map[string]string
	compacting bool // guarded by mu
}

// HistoryDir is where a server kept the delta history in its home
// before the delta log (issue 13): New moves what it holds into the log
// once and removes it (migrateHome).
const HistoryDir = "server-history"

// New opens the server's home.
func New(o Options) (*Server, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Keep < 2 {
		o.Keep = 2
	}
	if o.CompactRows == 0 {
		o.CompactRows = 1_000_000
	}
	if o.CompactBytes == 0 {
		o.CompactBytes = 64 << 20
	}
	if o.Hub.Logger == nil {
		o.Hub.Logger = o.Logger
	}
	if o.MaxIngestBody <= 0 {
		o.MaxIngestBody = 256 << 20
	}
	if o.MaxUploadBody <= 0 {
		o.MaxUploadBody = 8 << 30
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = 60 << 20
	}
	o.Conn = o.Conn.withDefaults()
	if o.LogWait <= 0 {
		o.LogWait = 2 * time.Minute
	}
	if o.LakePoll == 0 {
		o.LakePoll = DefaultLakePoll
	}
	s := &Server{opts: o, log: o.Logger, ds: map[string]*dataset{}, broken: map[string]string{},
		names: map[string]*nameLock{}, uploads: map[string]bool{}, stop: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.lk.vintages, s.lk.refused, s.lk.installing = map[string]lake.Vintage{}, map[string]string{}, map[string]string{}
	if o.DeltaLog == nil {
		n, l, err := openEmbeddedLog(o.Home, o)
		if err != nil {
			s.cancel()
			return nil, fmt.Errorf("delta log: %w", err)
		}
		s.node, o.DeltaLog = n, l
		s.opts.DeltaLog = l
	}
	s.dlog = o.DeltaLog
	fail := func(err error) (*Server, error) {
		s.cancel()
		if s.store != nil {
			s.store.Close()
		}
		s.closeLog()
		return nil, err
	}
	s.lk.rollbackOf = map[string]rollbackMark{}
	lo := &localcache.Options{Logger: o.Logger, CompactRows: -1, CompactBytes: -1, Keep: o.Keep, DeltaInMemory: true, FormatVersion: o.FormatVersion, WarmSnapshots: o.WarmSnapshots, MappedIndex: o.MappedIndex}
	var heads func() map[string]lakeHead
	if o.Lake != nil {
		heads = s.startLake(lo) // lakeserve.go: reads the heads while the store opens
	}
	st, err := localcache.Open(o.Home, lo)
	if err != nil {
		return fail(err)
	}
	s.store = st
	if err := s.migrateHome(); err != nil {
		return fail(err)
	}
	s.authOff = o.Tokens == nil || o.Tokens.Empty()
	s.conns = newConnLimiter(o.Conn.MaxUnauthConns)
	s.m = newMetrics(s)
	o.Hub.OnAck = func(client, ds string, seq uint64) { s.m.acks.Inc() }
	s.hub = hub.New(s, o.Hub)
	// The store holds the home's lock: no other process uses the home, so
	// every upload directory left in it was interrupted.
	s.sweepUploads()
	// One budget for every dataset's log: a log that does not answer holds
	// the start for LogWait, not LogWait per dataset.
	startCtx, cancelStart := context.WithTimeout(s.ctx, o.LogWait)
	defer cancelStart()
	for _, name := range st.DatasetNames() {
		if st.Damaged(name) != nil {
			continue // reported by Damaged; a PUT heals it
		}
		if _, err := s.openDataset(startCtx, name); err != nil {
			// One dataset's history never takes the others down: it is
			// reported (Health) and refuses ingest; lookups still serve.
			s.log.Error("dataset history failed to open; the dataset takes no updates", "dataset", name, "err", err)
			s.mu.Lock()
			s.broken[name] = err.Error()
			s.mu.Unlock()
		}
	}
	if o.Lake != nil {
		s.reconcileLake(heads())
	}
	s.startReplica()
	s.wg.Add(1)
	go s.background()
	return s, nil
}

// Store is the server's store (lookups).
func (s *Server) Store() *localcache.Store { return s.store }

// Hub is the websocket hub.
func (s *Server) Hub() *hub.Hub { return s.hub }

// openDataset opens dataset name's side of the delta log: it makes the
// stream if the log has none (after the store's head), rebuilds the tail
// and applies what the store lacks (catchUp), then starts the follower.
func (s *Server) openDataset(ctx context.Context, name string) (*dataset, error) {
	s.openMu.Lock()
	defer s.openMu.Unlock()
	s.mu.Lock()
	d := s.ds[name]
	s.mu.Unlock()
	if d != nil {
		return d, nil
	}
	d = &dataset{name: name, appliedCh: make(chan struct{}), kick: make(chan struct{}, 1)}
	s.refreshFilesLocked(d)
	next, err := s.catchUp(ctx, d)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", name, err)
	}
	s.mu.Lock()
	s.ds[name] = d
	s.mu.Unlock()
	s.wg.Add(1)
	go s.follow(d, next)
	return d, nil
}

// reopenBroken tries again to open the datasets that failed to (their
// delta log did not answer at start, or refused): one that opens now
// takes updates again and leaves the damaged list. The heartbeat starts
// it (one at a time: reopening).
func (s *Server) reopenBroken() {
	s.mu.Lock()
	names := make([]string, 0, len(s.broken))
	for name := range s.broken {
		names = append(names, name)
	}
	s.mu.Unlock()
	for _, name := range names {
		if s.store.Damaged(name) != nil || s.ctx.Err() != nil {
			continue // a PUT heals a damaged one
		}
		unlock := s.lockName(name) // no replacement of it meanwhile
		ctx, cancel := context.WithTimeout(s.ctx, s.opts.LogWait)
		_, err := s.openDataset(ctx, name)
		cancel()
		s.mu.Lock()
		if _, still := s.broken[name]; still && err == nil {
			delete(s.broken, name)
		} else if still {
			s.broken[name] = err.Error()
		}
		s.mu.Unlock()
		unlock()
		if err == nil {
			s.log.Info("dataset opened on its delta log after a failure; it takes updates again", "dataset", name)
		}
	}
}

// startTimeout bounds a dataset's catch-up from the delta log at open.
const startTimeout = 2 * time.Minute

// installReplacement puts the snapshot in dir, manifest m, in service as
// a new epoch of dataset name (a PUT, a rollback), forgets the history at
// or below covers and tells companions the dataset was replaced. d is the
// dataset with d.mu held by the caller, or nil when it is not open: then
// it is opened after the install and locked, and release unlocks
// it (else release does nothing). The caller defers release.
func (s *Server) installReplacement(name string, d *dataset, dir string, m *format.Manifest, covers uint64) (release func(), err error) {
	_, release, err = s.installReplacementWith(name, d, func() (*format.Manifest, error) {
		if _, err := s.store.Install(name, dir); err != nil {
			return nil, err
		}
		return m, nil
	}, covers)
	return release, err
}

// installReplacementWith is installReplacement of the snapshot install
// puts in service (Install of a directory, or InstallCooked); it returns
// its manifest.
func (s *Server) installReplacementWith(name string, d *dataset, install func() (*format.Manifest, error), covers uint64) (m *format.Manifest, release func(), err error) {
	if d != nil {
		// The follower waits: the records above covers go to the new epoch.
		d.applyMu.Lock()
		m, err = install()
		if err == nil {
			s.reapplyAboveLocked(d, covers)
		}
		d.applyMu.Unlock()
		if err != nil {
			return nil, nil, err
		}
	} else if m, err = install(); err != nil {
		return nil, nil, err
	}
	release = func() {}
	if d == nil {
		if d, err = s.openInstalled(name); err != nil {
			return nil, nil, err
		}
		release = d.mu.Unlock
	}
	s.resetHistoryLocked(d, covers)
	s.refreshFilesLocked(d)
	s.hub.Announce(name, m, hub.Replaced)
	return m, release, nil
}

// lockOpen locks d.mu of dataset name when it is open and returns it
// (nil when it is not) with the function that unlocks it, for a
// replacement under lockName.
func (s *Server) lockOpen(name string) (*dataset, func()) {
	d, _ := s.dataset(name)
	if d == nil {
		return nil, func() {}
	}
	d.mu.Lock()
	return d, d.mu.Unlock
}

// openInstalled opens dataset name once a snapshot was installed for it
// while it was not open (new, or listed as broken), clears its broken
// mark, and returns it with d.mu held.
func (s *Server) openInstalled(name string) (*dataset, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.LogWait)
	d, err := s.openDataset(ctx, name)
	cancel()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	delete(s.broken, name)
	s.mu.Unlock()
	d.mu.Lock()
	return d, nil
}

// usableHistory returns the records of the history log the server can
// serve catch-ups from: the contiguous run that ends at the store's head.
// A crash between the history append and the store's apply leaves a record
// in the history that the store does not have (an orphan above the head);
// the next ingest reuses its seq and appends the real record after it. So,
// scanning backwards, the last record written with a seq is the one the
// store holds, and orphans (above the head, or earlier writes of a seq
// already taken) are skipped.
func usableHistory(recs []format.Record, head uint64) []format.Record {
	want := head
	i := len(recs)
	for j := len(recs) - 1; j >= 0 && want > 0; j-- {
		seq := recs[j].Seq
		if seq > want {
			continue // an orphan, or an earlier write of a seq already taken
		}
		if seq < want {
			break // a gap
		}
		i--
		recs[i] = recs[j]
		want--
	}
	return recs[i:]
}

// refreshFilesLocked indexes the files of the retained snapshots by SHA-256.
func (s *Server) refreshFilesLocked(d *dataset) {
	files := map[string]string{}
	root := filepath.Join(s.store.DatasetDir(d.name), format.SnapshotsDir)
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), format.TempPrefix) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		m, err := format.ReadManifest(dir)
		if err != nil {
			continue
		}
		for _, f := range m.Files {
			files[f.SHA256] = filepath.Join(dir, f.Name)
		}
	}
	d.hmu.Lock()
	d.files = files
	d.hmu.Unlock()
}

func (s *Server) dataset(name string) (*dataset, error) {
	s.mu.Lock()
	d := s.ds[name]
	s.mu.Unlock()
	if d == nil {
		if err := s.store.Damaged(name); errors.Is(err, localcache.ErrDamaged) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %q", localcache.ErrNoDataset, name)
	}
	return d, nil
}

// Heads implements hub.Source.
func (s *Server) Heads() []protocol.Head {
	st, err := s.store.Status()
	if err != nil {
		return nil
	}
	out := make([]protocol.Head, 0, len(st))
	for _, d := range st {
		if d.Health == localcache.Healthy {
			out = append(out, headOf(d))
		}
	}
	return out
}

func headOf(d localcache.DatasetStatus) protocol.Head {
	var size int64
	for _, f := range d.Manifest.Files {
		size += f.Size
	}
	return protocol.Head{Dataset: d.Name, Epoch: d.Manifest.Epoch, Snapshot: d.Manifest.SnapshotID, Seq: d.Seq, Bytes: size}
}

// Head implements hub.Source.
func (s *Server) Head(name string) (protocol.Head, *format.Manifest, bool) {
	st, err := s.store.Status()
	if err != nil {
		return protocol.Head{}, nil, false
	}
	for _, d := range st {
		if d.Name == name && d.Health == localcache.Healthy {
			m := d.Manifest
			return headOf(d), &m, true
		}
	}
	return protocol.Head{}, nil, false
}

// DamageOf implements hub.Source: whether name is one of the home's
// damaged datasets (Damaged), and why.
func (s *Server) DamageOf(name string) (string, bool) {
	for _, d := range s.Damaged() {
		if d.Name == name {
			return d.Reason, true
		}
	}
	return "", false
}

// Since implements hub.Source.
func (s *Server) Since(name string, after uint64) ([]format.Record, bool) {
	d, err := s.dataset(name)
	if err != nil {
		return nil, false
	}
	d.hmu.RLock()
	defer d.hmu.RUnlock()
	if after < d.histFrom {
		return nil, false
	}
	i := histSearch(d.hist, after)
	return slices.Clone(d.hist[i:]), true
}

// OpenFile implements hub.Source: a file of the dataset's retained
// snapshot directories, or of the snapshot it serves wherever that lives
// (mapped from the lake's Puffin file on a lake-backed server).
func (s *Server) OpenFile(name, sha string) (hub.ReadAtCloser, error) {
	d, err := s.dataset(name)
	if err != nil {
		return nil, err
	}
	d.hmu.RLock()
	p, ok := d.files[sha]
	d.hmu.RUnlock()
	if ok {
		if f, err := os.Open(p); err == nil {
			return f, nil
		}
	}
	f, err := s.store.OpenSnapshotFile(name, sha)
	if err != nil {
		return nil, fmt.Errorf("no retained snapshot file with sha256 %s in %s", sha, name)
	}
	return f, nil
}

// Ingest logs records under a new idempotency key (IngestKey).
func (s *Server) Ingest(name string, recs []format.Record) (first, last uint64, err error) {
	return s.IngestKey(context.Background(), name, recs, "")
}

// ingestApplyTimeout bounds how long an ingest the log acknowledged
// waits for this server to apply it.
const ingestApplyTimeout = 30 * time.Second

// IngestKey validates records, appends them to the dataset's delta log as
// one message under idempotency key key ("" makes one), waits until
// JetStream acknowledged it and this server applied it (read-your-writes),
// and returns the seqs the log assigned (first..last, contiguous). The
// follower applies and fans out the records (the one apply path).
//
// A retry with the same key, to this server or another replica, within
// the log's duplicate window (10 minutes) stores nothing and returns the
// first append's seqs. A batch whose encoded size is over the log's
// message limit (LogState().MaxBatchBytes) is refused whole (ErrTooLarge,
// HTTP 413): a batch is all in the log or not there. A bad key wraps
// ErrBadInput and ErrBadKey. ErrNotApplied: logged (durable), but not
// applied here within 30 s; retry with the same key.
func (s *Server) IngestKey(ctx context.Context, name string, recs []format.Record, key string) (first, last uint64, err error) {
	if len(recs) == 0 {
		return 0, 0, fmt.Errorf("%w: no rows", ErrBadInput)
	}
	if key == "" {
		key = newKey()
	} else if err := deltalog.CheckKey(key); err != nil {
		return 0, 0, fmt.Errorf("%w: %w", ErrBadInput, err)
	}
	limit := s.maxBatchBytes()
	if n := batchBytesBound(recs); n > limit {
		return 0, 0, fmt.Errorf("%w: a batch of %d rows may take %d bytes in the delta log, over its %d-byte limit of one message: send it in smaller batches", ErrTooLarge, len(recs), n, limit)
	}
	d, err := s.dataset(name)
	if errors.Is(err, localcache.ErrNoDataset) && s.replacing(name) {
		// Being created or installed (a PUT, a vintage from the lake):
		// retry, rather than a 404 for a dataset about to exist.
		return 0, 0, fmt.Errorf("%w: dataset %s is being installed; retry with the same key", ErrNotApplied, name)
	}
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	for i := range recs {
		recs[i].Seq = uint64(i) + 1 // validity does not depend on the seqs; the log assigns them
	}
	if err := format.ValidateRecords(recs); err != nil {
		return 0, 0, err
	}
	d.mu.Lock()
	// A new series without a frequency gets the one cook would infer (on
	// metadata that counts towards the batch's bytes).
	if added, err := inferNewSeries(recs, func(id string) (bool, error) { return s.store.Has(name, id) }); err != nil || added > 0 && batchBytesBound(recs) > limit {
		d.mu.Unlock()
		if err == nil {
			err = fmt.Errorf("%w: a batch of %d rows (%d new series) may take %d bytes in the delta log, over its %d-byte limit of one message: send it in smaller batches", ErrTooLarge, len(recs), added, batchBytesBound(recs), limit)
		}
		return 0, 0, err
	}
	actx, cancel := context.WithTimeout(ctx, ingestApplyTimeout)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel) // Close: no wait for a follower that stopped
	defer stop()
	first, last, err = s.dlog.Append(actx, name, recs, key)
	d.mu.Unlock()
	if err != nil {
		if errors.Is(err, deltalog.ErrTooLarge) {
			return 0, 0, fmt.Errorf("%w: %w", ErrTooLarge, err)
		}
		return 0, 0, fmt.Errorf("delta log: %w", err)
	}
	for i := range recs {
		recs[i].Seq = first + uint64(i)
	}
	if err := d.waitApplied(actx, last); err != nil {
		return first, last, err
	}
	s.m.ingestRows.Add(float64(len(recs)))
	s.m.ingestSeconds.Observe(time.Since(start).Seconds())
	s.maybeCompact(name)
	return first, last, nil
}

func (s *Server) maybeCompact(name string) {
	st, err := s.store.Status()
	if err != nil {
		return
	}
	for _, d := range st {
		if d.Name != name {
			continue
		}
		if (s.opts.CompactRows > 0 && d.DeltaRows >= s.opts.CompactRows) || (s.opts.CompactBytes > 0 && int64(d.DeltaRows)*40 >= s.opts.CompactBytes) {
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				if _, err := s.Compact(name); err != nil {
					s.log.Error("compaction failed", "dataset", name, "err", err)
				}
			}()
		}
	}
}

// Compact folds the dataset's delta into a new snapshot, trims the history
// to the oldest retained snapshot and announces the snapshot to
// subscribers.
func (s *Server) Compact(name string) (*format.Manifest, error) {
	d, err := s.dataset(name)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	if d.compacting {
		d.mu.Unlock()
		return nil, nil
	}
	d.compacting = true
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.compacting = false
		d.mu.Unlock()
	}()
	before, _, _ := s.Head(name)
	start := time.Now()
	m, lost, err := s.compactStore(name)
	if err != nil {
		return nil, err
	}
	if lost || m.SnapshotID == before.Snapshot {
		return m, nil
	}
	s.m.compactions.Inc()
	s.m.compactSeconds.Observe(time.Since(start).Seconds())
	s.refreshFilesLocked(d)
	s.trimHistory(d)
	s.hub.Announce(name, m, hub.Compacted)
	s.log.Info("published snapshot", "dataset", name, "snapshot", m.SnapshotID, "covers", m.CoversThroughSeq, "rows", m.Rows)
	return m, nil
}

// retainedCovers is the lowest covers_through_seq of the snapshot in
// service (also when it lives in the lake, with no directory) and the
// dataset's retained snapshot directories of its epoch; false when none
// serves. Records of an earlier epoch are never served again (a
// companion of that epoch downloads the new one).
func (s *Server) retainedCovers(name string) (uint64, bool) {
	_, cur, ok := s.Head(name)
	if !ok {
		return 0, false
	}
	oldest := cur.CoversThroughSeq
	root := filepath.Join(s.store.DatasetDir(name), format.SnapshotsDir)
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), format.TempPrefix) {
			continue
		}
		if m, err := format.ReadManifest(filepath.Join(root, e.Name())); err == nil && m.Epoch == cur.Epoch {
			oldest = min(oldest, m.CoversThroughSeq)
		}
	}
	return oldest, true
}

// trimHistory keeps the tail above the oldest retained snapshot's covers
// and trims the delta log below what any retained snapshot or vintage
// needs (logFloor): a companion further behind gets a snapshot, and no
// retained snapshot needs a record below its covers.
func (s *Server) trimHistory(d *dataset) {
	oldest, ok := s.retainedCovers(d.name)
	if !ok {
		return
	}
	d.hmu.Lock()
	if oldest > d.histFrom {
		i := histSearch(d.hist, oldest)
		d.hist = slices.Clone(d.hist[i:])
		d.histFrom = oldest
	}
	d.hmu.Unlock()
	s.trimLog(d.name, oldest)
}

// trimLog trims dataset name's delta log below logFloor; oldest is the
// home's retainedCovers.
func (s *Server) trimLog(name string, oldest uint64) {
	floor, ok := s.logFloor(name, oldest)
	if !ok {
		return
	}
	if err := s.dlog.Trim(s.ctx, name, floor+1); err != nil {
		s.log.Warn("delta log: trim", "dataset", name, "below", floor+1, "err", err)
	}
}

// logFloor is the seq the delta log of dataset name must keep the
// records above: the home's oldest retained covers (oldest) and, on a
// lake-backed server, the lowest covers of the vintages of the epoch in
// service the lake retains (--keep-vintages, --keep-vintage-days, tags
// and the current one), whichever replica committed them. A replica
// still serving an older retained vintage (it has not installed the
// newer one yet, or it was cut off from the log meanwhile) follows the
// log from that vintage's covers: the trim must not cut what it needs.
// Vintages of an earlier epoch need nothing (a replica on one installs
// the new epoch, whose covers reach the log's head when it was made).
// false: the lake could not be read, trim nothing now (the next
// compaction or expiry trims).
func (s *Server) logFloor(name string, oldest uint64) (uint64, bool) {
	l := s.opts.Lake
	if l == nil {
		return oldest, true
	}
	_, cur, ok := s.Head(name)
	if !ok {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	vs, err := l.Vintages(ctx, name)
	if err != nil {
		s.log.Warn("delta log: not trimmed (the lake's retained vintages could not be read)", "dataset", name, "err", err)
		return 0, false
	}
	for _, v := range vs {
		if v.Serving && v.Epoch == cur.Epoch {
			oldest = min(oldest, v.CoversSeq)
		}
	}
	return oldest, true
}

// Replace cooks source files into a new epoch of a dataset (creating it if
// needed) and announces it: subscribers re-download. Sequence numbers keep
// increasing across epochs, also over a dataset the store lost (its
// CURRENT gone): the new epoch covers every seq its logs ever held, so no
// record of an earlier epoch is replayed into it.
//
// Replacements and creations of one name (case-folded) run one at a time;
// the input is read before that, concurrently. A new name that differs
// only by case from an existing dataset is refused (ErrConflict).
func (s *Server) Replace(name string, files []string, o cook.InputOptions) (*format.Manifest, error) {
	if err := format.ValidDatasetName(name); err != nil {
		return nil, badInput(err)
	}
	b := cook.NewBuilder()
	for _, f := range files {
		if _, err := b.AddFile(f, o); err != nil {
			return nil, badInput(err)
		}
	}
	unlock := s.lockName(name)
	defer unlock()
	if err := s.checkNameFree(name); err != nil {
		return nil, err
	}
	d, unlockD := s.lockOpen(name)
	defer unlockD()
	epoch, covers := s.nextEpoch(name)
	wo := format.WriteOptions{Dataset: name, Epoch: epoch, CoversThroughSeq: covers, Version: s.opts.FormatVersion}
	// With a lake, the snapshot is cooked straight into its Puffin file
	// (written once); over a damaged dataset, through a directory. The
	// cook runs under installReplacementWith's apply lock: on a replica,
	// the records other replicas append meanwhile are applied (and fanned
	// out to its companions) once the install is done, a delay as long as
	// the cook (seconds at pet scale) that a replacement, an operator's
	// action, accepts in exchange for writing the files once.
	m, release, err := s.installReplacementWith(name, d, func() (*format.Manifest, error) {
		return s.store.InstallCooked(name, func(c *format.Container) (*format.Manifest, error) {
			m, _, err := format.WriteInto(c, b.Table(), wo)
			return m, err
		})
	}, covers)
	if errors.Is(err, localcache.ErrCookNeedsDirectory) {
		m, release, err = s.replaceFromDirectory(name, d, b.Table(), wo)
	}
	if err != nil {
		return nil, err
	}
	defer release()
	s.log.Info("replaced dataset", "dataset", name, "epoch", epoch, "snapshot", m.SnapshotID, "rows", m.Rows)
	return m, nil
}

// replaceFromDirectory cooks t into an upload directory and installs it
// as installReplacement does (a server without a lake, or a damaged
// dataset).
func (s *Server) replaceFromDirectory(name string, d *dataset, t *format.Table, o format.WriteOptions) (*format.Manifest, func(), error) {
	tmp, err := s.newUploadDir()
	if err != nil {
		return nil, nil, err
	}
	defer s.removeUploadDir(tmp)
	dir := filepath.Join(tmp, "snap")
	m, _, err := format.Write(dir, t, o)
	if err != nil {
		return nil, nil, err
	}
	release, err := s.installReplacement(name, d, dir, m, o.CoversThroughSeq)
	return m, release, err
}

// resetHistoryLocked forgets the history at or below covers (an earlier
// epoch's records: no subscriber of the new epoch asks for them), in
// memory and on disk. d.mu is held.
func (s *Server) resetHistoryLocked(d *dataset, covers uint64) {
	d.hmu.Lock()
	i := histSearch(d.hist, covers)
	d.hist, d.histFrom = slices.Clone(d.hist[i:]), covers
	d.hmu.Unlock()
	// The store serves through covers: an ingest waiting for a seq the
	// replacement covers returns (its records were replaced).
	d.setApplied(covers)
	// The log numbers the next record above covers.
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	if err := s.dlog.Advance(ctx, d.name, covers); err != nil {
		s.log.Error("delta log: advance past an installed snapshot", "dataset", d.name, "covers", covers, "err", err)
	}
}

// nextEpoch returns the epoch and covers_through_seq of a replacement of
// name: one epoch above and the head seq of the dataset in service; for a
// dataset the store does not serve (new, or its CURRENT lost), one above
// every epoch and at or above every seq left in its directory and logs.
func (s *Server) nextEpoch(name string) (epoch, covers uint64) {
	if head, _, ok := s.Head(name); ok {
		epoch, covers = head.Epoch+1, head.Seq
	} else {
		epoch, covers = NextEpoch(s.store, name)
	}
	// The log's head: records logged (maybe through another replica) and
	// not yet applied here belong to the epoch being replaced.
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	if h, err := s.dlog.Head(ctx, name); err == nil {
		covers = max(covers, h)
	} else if !errors.Is(err, deltalog.ErrUnknownDataset) {
		s.log.Warn("delta log: head for a replacement", "dataset", name, "err", err)
	}
	return epoch, covers
}

// NextEpoch returns the epoch and covers_through_seq for a full
// replacement of dataset name in st's home (es cook, or the server for a
// dataset it does not serve): one above the epoch and at the seq in
// service, or, for a dataset the store does not serve (new, or its
// CURRENT lost), one above every epoch and at or above every seq left in
// its directory, its write-ahead log and the server's history of it.
func NextEpoch(st *localcache.Store, name string) (epoch, covers uint64) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if e, _, seq, err := st.State(name); err == nil {
		return e + 1, seq
	}
	dsDir := st.DatasetDir(name)
	root := filepath.Join(dsDir, format.SnapshotsDir)
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if m, err := format.ReadManifest(filepath.Join(root, e.Name())); err == nil {
			epoch, covers = max(epoch, m.Epoch), max(covers, m.CoversThroughSeq)
		}
	}
	for _, dir := range []string{filepath.Join(dsDir, localcache.WALDir), filepath.Join(st.Home(), HistoryDir, name)} {
		covers = max(covers, lastLoggedSeq(dir, log))
	}
	return epoch + 1, covers
}

// lastLoggedSeq is the highest seq in the write-ahead log in dir (0 if
// none or unreadable). The log is not open elsewhere: its dataset is not
// served.
func lastLoggedSeq(dir string, log *slog.Logger) uint64 {
	if _, err := os.Stat(dir); err != nil {
		return 0
	}
	w, recs, err := delta.OpenWAL(dir, true, 0, log)
	if err != nil {
		log.Warn("read an orphaned log for its last seq", "dir", dir, "err", err)
		return 0
	}
	w.Close()
	var last uint64
	for _, r := range recs {
		last = max(last, r.Seq)
	}
	return last
}

// lockName serializes creations and replacements of a dataset name,
// case-folded (so "A" and "a" wait for each other). It returns the unlock.
func (s *Server) lockName(name string) func() {
	key := strings.ToLower(name)
	s.mu.Lock()
	l := s.names[key]
	if l == nil {
		l = &nameLock{}
		s.names[key] = l
	}
	l.refs++
	s.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(s.names, key)
		}
		s.mu.Unlock()
	}
}

// replacing reports whether a creation or replacement of name is running.
func (s *Server) replacing(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.names[strings.ToLower(name)] != nil
}

// checkNameFree refuses a name that differs only by case from a dataset
// of the home (served or not): Windows and macOS companions hold datasets
// in directories of a case-insensitive file system.
func (s *Server) checkNameFree(name string) error { return CheckNameFree(s.opts.Home, name) }

// CheckNameFree refuses (ErrConflict) a dataset name that differs only by
// case from a dataset directory of home.
func CheckNameFree(home, name string) error {
	ents, _ := os.ReadDir(filepath.Join(home, localcache.DatasetsDir))
	for _, e := range ents {
		if e.Name() != name && strings.EqualFold(e.Name(), name) {
			return fmt.Errorf("%w: dataset %q exists; names that differ only by case cannot live side by side on Windows and macOS", ErrConflict, e.Name())
		}
	}
	return nil
}

// uploadPrefix starts the name of an upload directory in the home.
const uploadPrefix = ".upload-"

// newUploadDir makes a directory for one upload, registered as in use
// until removeUploadDir.
func (s *Server) newUploadDir() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dir, err := os.MkdirTemp(s.opts.Home, uploadPrefix)
	if err != nil {
		return "", err
	}
	s.uploads[dir] = true
	return dir, nil
}

func (s *Server) removeUploadDir(dir string) {
	if err := os.RemoveAll(dir); err != nil {
		s.log.Warn("remove upload directory", "dir", dir, "err", err)
	}
	s.mu.Lock()
	delete(s.uploads, dir)
	s.mu.Unlock()
}

// sweepUploads removes upload directories of the home that no request
// uses: left by a crash or a kill (they can be as large as MaxUploadBody).
// The server holds the home's lock, so no other process has uploads here.
func (s *Server) sweepUploads() {
	ents, err := os.ReadDir(s.opts.Home)
	if err != nil {
		return
	}
	var stale []string
	s.mu.Lock()
	for _, e := range ents {
		// An upload made after the listing has a name not listed.
		dir := filepath.Join(s.opts.Home, e.Name())
		if strings.HasPrefix(e.Name(), uploadPrefix) && !s.uploads[dir] {
			stale = append(stale, dir)
		}
	}
	s.mu.Unlock()
	for _, dir := range stale {
		if err := os.RemoveAll(dir); err != nil {
			s.log.Warn("remove an interrupted upload", "dir", dir, "err", err)
			continue
		}
		s.m.uploadsSwept.Inc()
		s.log.Warn("removed an interrupted upload", "dir", dir)
	}
}

// batchBytesBound is an upper bound of the size of recs in a write-ahead
// log frame (every varint counted at its widest).
func batchBytesBound(recs []format.Record) int64 {
	const varint = binary.MaxVarintLen64
	n := int64(varint)
	for i := range recs {
		r := &recs[i]
		n += 3*varint + 1 + 8 + int64(len(r.SeriesID)) + 1
		if m := r.Meta; m != nil {
			n += 4*varint + int64(len(m.Name)+len(m.Unit)+len(m.Source)+len(m.Frequency))
		}
	}
	return n
}

// background runs the heartbeat and the time-of-day compaction.
func (s *Server) background() {
	defer s.wg.Done()
	hb := time.NewTicker(5 * time.Second)
	defer hb.Stop()
	tok := time.NewTicker(tokenPoll)
	defer tok.Stop()
	sweep := time.NewTicker(10 * time.Minute)
	defer sweep.Stop()
	lastDay := ""
	for {
		select {
		case <-s.stop:
			return
		case <-tok.C:
			s.reloadTokens()
		case <-sweep.C:
			s.sweepUploads()
		case <-hb.C:
			s.hub.Heartbeat()
			if s.reopening.CompareAndSwap(false, true) {
				s.wg.Add(1)
				go func() {
					defer s.wg.Done()
					defer s.reopening.Store(false)
					s.reopenBroken()
				}()
			}
			if at := s.opts.CompactAt; at != "" {
				now := time.Now().UTC()
				if now.Format("15:04") >= at && lastDay != now.Format("2006-01-02") {
					lastDay = now.Format("2006-01-02")
					for _, n := range s.store.DatasetNames() {
						if _, err := s.Compact(n); err != nil {
							s.log.Error("scheduled compaction failed", "dataset", n, "err", err)
						}
					}
				}
			}
		}
	}
}

// Close stops the server's background work, disconnects clients and
// closes the store.
func (s *Server) Close() error {
	s.closing.Do(func() {
		s.cancel()
		close(s.stop)
		s.hub.Close()
		s.wg.Wait()
		s.closeVintages()
		s.closeErr = s.store.Close()
		s.closeLog()
	})
	return s.closeErr
}

// closeLog closes the embedded node and its connection (an external
// log's owner closes it).
func (s *Server) closeLog() {
	if s.node != nil {
		os.Remove(filepath.Join(s.opts.Home, NatsDir, ClientURLFile))
		s.dlog.Close()
		s.node.Shutdown()
		s.node = nil
	}
}
