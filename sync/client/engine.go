package client

import (
	"context"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/sync/protocol"
)

// Sink is where the engine writes. Implementations must be safe for use
// from the engine's goroutine while others read.
type Sink interface {
	// State reports what the client holds of a dataset; ok is false when
	// it holds nothing.
	State(dataset string) (epoch uint64, snapshot string, seq uint64, ok bool)
	// Apply makes records durable and visible (all at once).
	Apply(dataset string, recs []format.Record) error
	// CompactThrough folds pending records up to seq into a new snapshot
	// of format version version (the server's snapshot's, which the
	// engine only passes when this build writes it: format.MinFormatVersion
	// to format.FormatVersion), installs it and returns its manifest.
	CompactThrough(dataset string, seq uint64, version int) (*format.Manifest, error)
	// Stage opens the sink's staging of snapshot m of dataset, where a
	// download is assembled and from which it is installed. A stage of
	// the same snapshot resumes from what an earlier one kept; one of
	// another snapshot of the dataset replaces it.
	Stage(dataset string, m *format.Manifest) (Stage, error)
	// Truncate durably drops the records above seq through (the server
	// lost them) and returns how many it dropped; nothing above it is a
	// no-op. It fails, changing nothing, when through is below what the
	// local snapshot covers.
	Truncate(dataset string, through uint64) (int, error)
	// Pending returns the snapshot in service, the seq it covers through
	// and the records applied on top of it, in seq order, all of one
	// state: the client's history chain (protocol.Chain) is computed
	// over them.
	Pending(dataset string) (snapshot string, covers uint64, recs []format.Record, err error)
	// Damaged returns non-nil when the sink holds the dataset but it is
	// damaged (its files failed a check or a read): the engine then
	// downloads the server's snapshot again and Installs it over it.
	Damaged(dataset string) error
}

// Stage is a snapshot being downloaded into the sink, file by file in the
// manifest's order; the sink owns its files (localcache.Stage is the
// one implementation). The engine drives it from its session goroutine.
type Stage interface {
	// Verify positions the stage at the first byte it does not hold,
	// keeping the chunks an earlier stage left that verify: skipped is
	// the bytes of whole files held, kept the verified prefix of the
	// file now open.
	Verify() (skipped, kept int64, err error)
	// Pos is the file (index in the manifest) and offset the next Append
	// writes; open is false when every file is held.
	Pos() (file int, off int64, open bool)
	// Append writes bytes at Pos, checking each chunk they complete
	// (verified counts them). A chunk that does not match is dropped: the
	// error wraps format.ErrChunkMismatch in a *format.CorruptionError
	// whose Offset is where to fetch again.
	Append(p []byte) (verified int, err error)
	// Finish checks and keeps the file whose bytes are all in, then
	// Verifies the next one.
	Finish() (skipped, kept int64, err error)
	// Commit installs the snapshot once every file is held.
	Commit() (*format.Manifest, error)
	// Close lets go of open files, keeping what is staged; Abort also
	// removes it.
	Close() error
	Abort() error
}

// Options for New.
type Options struct {
	// Server is the server's base URL (http://host:port or https://...),
	// or several, comma-separated (ParseServers): replicas of the same
	// datasets, tried in order. The engine stays on the one that works;
	// when a connection to it fails or is refused it moves to the next at
	// once, and waits (the reconnect backoff) only after a full cycle of
	// the list failed. A list ParseServers refuses makes every session
	// fail with its error.
	Server string
	Token  string
	// Datasets to subscribe; empty means every dataset the server has.
	Datasets []string
	// Name identifies this client in the server's logs.
	Name   string
	Logger *slog.Logger
	// BandwidthLimit caps snapshot downloads in bytes per second (0 = no
	// limit).
	BandwidthLimit int64
	// MinBackoff and MaxBackoff bound the reconnect delay (full jitter).
	// Defaults 250 ms and 60 s.
	MinBackoff, MaxBackoff time.Duration
	// StallTimeout: a snapshot download that receives none of the bytes
	// it asked for in this long (a lost or damaged frame) is resumed on a
	// new connection. Default 60 s, and at least three 1 MiB frames' time
	// at BandwidthLimit.
	StallTimeout time.Duration
	// WelcomeTimeout: a connection on which the server's welcome has not
	// arrived in this long (a hello damaged in transit leaves both sides
	// waiting) is dropped and made again. Default 15 s.
	WelcomeTimeout time.Duration
	// TLSInsecure is never set by the product; tests use plain http.
	Dialer *websocket.Dialer
}

// Engine is the sync engine.
type Engine struct {
	opts Options
	sink Sink
	log  *slog.Logger

	// servers is Options.Server parsed (nil with serversErr when it does
	// not parse); cur indexes the one in use. Only Run's goroutine
	// touches cur; prog.Server mirrors it for other goroutines.
	servers    []string
	serversErr error
	cur        int

	mu        sync.Mutex // guards prog, dsProg, listen, conn, downloads, rebases
	prog      Progress
	dsProg    map[string]*DatasetProgress
	listen    []func(Progress)
	conn      *websocket.Conn
	downloads []DownloadMetrics // completed, oldest first (Metrics)
	rebases   []RebaseMetrics   // oldest first (Metrics)
	attempts  int

	vint vintageState // vintage and revisions requests (vintage.go)

	paused   atomic.Bool
	resumeCh chan struct{}

	// acct accounts snapshot downloads across the sessions of this
	// process, by snapshot id; only the session goroutine touches it.
	acct map[string]*dlAcct
	// failing holds the datasets whose last local apply failed, across
	// sessions; only the session goroutine touches it.
	failing map[string]*ApplyError

	// Counters; Metrics returns them as a struct.
	Stats struct {
		ChunksRefetched      atomic.Int64 // chunks whose hash did not match
		BytesDownloaded      atomic.Int64
		LocalRebases         atomic.Int64 // snapshots matched by local compaction
		DownloadRebases      atomic.Int64
		DeltasApplied        atomic.Int64
		ResumedBytesSkipped  atomic.Int64 // bytes kept from .partial files at resume
		Sessions             atomic.Int64 // connections made (a reconnect is one more)
		ApplyFailures        atomic.Int64 // local applies that failed (each retried later)
		ChecksumErrors       atomic.Int64 // frames refused for a bad or missing checksum (each ends its connection)
		Heals                atomic.Int64 // damaged local datasets downloaded again
		Diverged             atomic.Int64 // resets for records that differ from the server's (protocol.ResetDiverged)
		Reconnects           atomic.Int64 // connections lost or refused, after which the engine connects again (after the backoff, or at once to the next server)
		Unauthorized         atomic.Int64 // connections the server refused the token of (ErrUnauthorized)
		WelcomeTimeouts      atomic.Int64 // connections dropped for a welcome that did not come
		Stalls               atomic.Int64 // connections dropped for a download that got nothing it asked for
		Malformed            atomic.Int64 // connections ended for a malformed message or frame from the server
		Resets               atomic.Int64 // resets that dropped local records
		ResetDiscarded       atomic.Int64 // local records dropped because the server no longer has them (reset)
		CompactionMismatches atomic.Int64 // local compactions that differed from the server's snapshot (downloaded instead)
		Failovers            atomic.Int64 // moves to the next server of Options.Server's list after a failed or lost connection
	}
}

// New returns an engine; Run starts it.
func New(sink Sink, o Options) *Engine {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 250 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 60 * time.Second
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = 60 * time.Second
	}
	if o.WelcomeTimeout <= 0 {
		o.WelcomeTimeout = 15 * time.Second
	}
	if o.BandwidthLimit > 0 {
		o.StallTimeout = max(o.StallTimeout, time.Duration(3*float64(protocol.MaxChunk)/float64(o.BandwidthLimit)*float64(time.Second)))
	}
	if o.Name == "" {
		o.Name, _ = os.Hostname()
	}
	if o.Dialer == nil {
		o.Dialer = &websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 64 << 10, WriteBufferSize: 4096}
	}
	e := &Engine{opts: o, sink: sink, log: o.Logger, dsProg: map[string]*DatasetProgress{}, resumeCh: make(chan struct{}, 1), acct: map[string]*dlAcct{}, failing: map[string]*ApplyError{}}
	e.servers, e.serversErr = ParseServers(o.Server)
	e.prog.Server = o.Server
	if e.serversErr == nil {
		e.prog.Server = e.servers[0]
		e.prog.Servers = slices.Clone(e.servers)
	}
	return e
}

// Pause disconnects and stays offline until Resume; local data keeps
// serving.
func (e *Engine) Pause() {
	e.paused.Store(true)
	e.mu.Lock()
	if e.conn != nil {
		e.conn.Close()
	}
	e.mu.Unlock()
	e.update(func(*Progress, func(string) *DatasetProgress) {})
}

// Resume reconnects after Pause.
func (e *Engine) Resume() {
	e.paused.Store(false)
	select {
	case e.resumeCh <- struct{}{}:
	default:
	}
	e.update(func(*Progress, func(string) *DatasetProgress) {})
}

// Run connects and keeps the datasets in sync until ctx ends, reconnecting
// with full-jitter exponential backoff. It returns ctx's error.
//
// With several servers (Options.Server) it starts on the first; a
// session that fails (a refused dial or upgrade, a connection lost)
// moves to the next server at once, unless that closes a full cycle of
// the list since the last server that got live: then it waits the
// backoff first. A session that got live and then dropped is retried on
// the same server first (after the backoff's short first step), so that
// a blip does not move a client. Resuming on another server is the same
// resume as on the same one: the hello carries what the client holds.
func (e *Engine) Run(ctx context.Context) error {
	cycleStart := 0 // the server the current cycle of failures started on
	for {
		if e.paused.Load() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-e.resumeCh:
				continue
			}
		}
		var live bool
		var err error
		if e.serversErr != nil {
			err = e.serversErr
		} else {
			live, err = e.session(ctx, e.servers[e.cur])
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e.update(func(p *Progress, ds func(string) *DatasetProgress) {
			p.Online = false
			if err != nil {
				p.LastError, p.Err = err.Error(), err
			}
			for _, d := range e.dsProg {
				d.State = StateOffline
			}
		})
		if live {
			e.attempts = 0
			cycleStart = e.cur
		}
		if e.paused.Load() {
			continue
		}
		e.Stats.Reconnects.Add(1)
		if !live && len(e.servers) > 1 {
			e.cur = (e.cur + 1) % len(e.servers)
			e.Stats.Failovers.Add(1)
			next := e.servers[e.cur]
			e.update(func(p *Progress, _ func(string) *DatasetProgress) { p.Server = next })
			if e.cur != cycleStart {
				e.log.Info("sync server unavailable; trying the next", "server", next, "err", err)
				continue
			}
		}
		delay := e.backoff()
		e.log.Info("sync offline; reconnecting", "in", delay.Round(time.Millisecond), "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		case <-e.resumeCh:
		}
	}
}
