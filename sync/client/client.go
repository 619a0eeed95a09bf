// Package client is the companion's background sync engine: it keeps a
// local copy of each subscribed dataset in step with the central server
// over one websocket.
//
// A session says hello with what it holds; the server answers per dataset
// with a catch-up (deltas after the client's seq, applied as one batch at
// catchup_end so readers never see half of it) or a snapshot to rebase on.
// Rebasing compacts locally when the client already holds every delta the
// snapshot covers and compares SHA-256s with the server's manifest; it
// downloads only on a mismatch or when it lacks deltas. Downloads go to
// .partial files, are verified per 4 MiB chunk and per file by SHA-256 and
// resume from the last verified chunk after a kill or a network cut.
// Deltas are acknowledged only after the sink made them durable.
//
// Trust (protocol version 2): a frame whose checksum fails is never
// applied; the connection drops (protocol.ErrChecksum) and the next one
// resumes. Each subscription carries the chain of the records held above
// the snapshot, so a server that gave those seqs to other records answers
// reset and the client takes the server's. A local apply failure (a full
// or read-only disk) is not a connection failure: only that dataset is
// marked (ApplyError) and retried with backoff. A dataset the sink
// reports damaged is downloaded again and installed over the damage.
//
// The engine writes through the Sink interface it declares; the store
// satisfies it through internal/wiring. Progress for a UI comes from
// protocol markers (file bytes, seq lag), never from guesses.
package client

import (
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/energyscope/energyscope/internal/fileutil"
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
	Apply(dataset string, recs []protocol.Record) error
	// CompactThrough folds pending records up to seq into a new snapshot,
	// installs it and returns its manifest.
	CompactThrough(dataset string, seq uint64) (*format.Manifest, error)
	// StagingDir is where a download of a snapshot is assembled.
	StagingDir(dataset, snapshotID string) string
	// Install verifies and swaps in a downloaded snapshot directory.
	Install(dataset, dir string) error
	// Truncate durably drops the records above seq through (the server
	// lost them) and returns how many it dropped; nothing above it is a
	// no-op. It fails, changing nothing, when through is below what the
	// local snapshot covers.
	Truncate(dataset string, through uint64) (int, error)
	// Pending returns the snapshot in service, the seq it covers through
	// and the records applied on top of it, in seq order, all of one
	// state: the client's history chain (protocol.Chain) is computed
	// over them.
	Pending(dataset string) (snapshot string, covers uint64, recs []protocol.Record, err error)
	// Damaged returns non-nil when the sink holds the dataset but it is
	// damaged (its files failed a check or a read): the engine then
	// downloads the server's snapshot again and Installs it over it.
	Damaged(dataset string) error
}

// Options for New.
type Options struct {
	// Server is the server's base URL (http://host:port or https://...).
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

	mu       sync.Mutex // guards prog, listeners, conn, stats
	prog     Progress
	dsProg   map[string]*DatasetProgress
	listen   []func(Progress)
	conn     *websocket.Conn
	attempts int

	paused   atomic.Bool
	resumeCh chan struct{}

	// acct accounts snapshot downloads across the sessions of this
	// process, by snapshot id; only the session goroutine touches it.
	acct map[string]*dlAcct
	// failing holds the datasets whose last local apply failed, across
	// sessions; only the session goroutine touches it.
	failing map[string]*ApplyError

	// Counters (tests, metrics).
	Stats struct {
		ChunksRefetched     atomic.Int64 // chunks whose hash did not match
		BytesDownloaded     atomic.Int64
		LocalRebases        atomic.Int64 // snapshots matched by local compaction
		DownloadRebases     atomic.Int64
		DeltasApplied       atomic.Int64
		ResumedBytesSkipped atomic.Int64 // bytes kept from .partial files at resume
		Sessions            atomic.Int64 // connections made (a reconnect is one more)
		ApplyFailures       atomic.Int64 // local applies that failed (each retried later)
		ChecksumErrors      atomic.Int64 // frames refused for a bad or missing checksum (each ends its connection)
		Heals               atomic.Int64 // damaged local datasets downloaded again
		Diverged            atomic.Int64 // resets for records that differ from the server's (protocol.ResetDiverged)
	}
}

// ErrProtocolVersion: the server does not speak a protocol version this
// client speaks (a version 1 server, say); the error names both.
var ErrProtocolVersion = errors.New("no common protocol version with the server")

// Dataset states (DatasetProgress.State).
const (
	StateConnecting   = "connecting"
	StateDownloading  = "downloading"
	StateCatchingUp   = "catching up"
	StateLive         = "live"
	StateRebasing     = "rebasing"
	StateOffline      = "offline"
	StateApplyFailing = "apply failing" // DatasetProgress.Failure says why and when it retries
)

// ApplyError is a dataset whose records could not be made durable
// locally (a full or read-only disk, a failed fsync). It is not a
// connection failure: the session stays up and the other datasets stay
// live, while this one retries by itself, with exponential backoff and
// jitter, by subscribing again from what it holds.
type ApplyError struct {
	Dataset  string
	Attempts int       // consecutive failures
	RetryAt  time.Time // when the engine subscribes the dataset again
	Err      error     // the sink's error
}

func (e *ApplyError) Error() string {
	return fmt.Sprintf("apply %s (attempt %d, retry at %s): %v", e.Dataset, e.Attempts, e.RetryAt.Format(time.RFC3339), e.Err)
}

func (e *ApplyError) Unwrap() error { return e.Err }

// Progress is what a UI shows.
type Progress struct {
	Server    string
	Online    bool
	Paused    bool
	LastError string
	// Err is the error LastError shows (nil when online), for
	// errors.Is: ErrProtocolVersion, protocol.ErrChecksum, ...
	Err      error
	LastSync time.Time // last time a delta or snapshot was applied, or the client was confirmed current
	Datasets []DatasetProgress
}

// DatasetProgress is one dataset's sync state.
type DatasetProgress struct {
	Dataset  string
	State    string // "connecting", "downloading", "catching up", "live", "rebasing", "offline"
	Epoch    uint64
	Snapshot string
	Seq      uint64
	HeadSeq  uint64
	Lag      uint64 // HeadSeq - Seq
	// Download progress (State == "downloading").
	File          string
	FileDone      int64
	FileTotal     int64
	BytesDone     int64 // all files of the snapshot
	BytesTotal    int64
	RateBytesPerS float64
	ETA           time.Duration
	LastSync      time.Time
	// Failure is set while the dataset's local apply fails
	// (State == StateApplyFailing).
	Failure        *ApplyError
	downloadStart  time.Time
	downloadOffset int64
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
	e.prog.Server = o.Server
	return e
}

// OnProgress registers fn to be called (from the engine's goroutine) on
// every progress change. fn must not block.
func (e *Engine) OnProgress(fn func(Progress)) {
	e.mu.Lock()
	e.listen = append(e.listen, fn)
	e.mu.Unlock()
}

// Progress returns the current state.
func (e *Engine) Progress() Progress {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.progressLocked()
}

func (e *Engine) progressLocked() Progress {
	p := e.prog
	p.Paused = e.paused.Load()
	p.Datasets = nil
	for _, d := range e.dsProg {
		p.Datasets = append(p.Datasets, *d)
	}
	slices.SortFunc(p.Datasets, func(a, b DatasetProgress) int { return strings.Compare(a.Dataset, b.Dataset) })
	return p
}

// update mutates progress under the lock and notifies listeners.
func (e *Engine) update(f func(p *Progress, ds func(string) *DatasetProgress)) {
	e.mu.Lock()
	f(&e.prog, func(name string) *DatasetProgress {
		d := e.dsProg[name]
		if d == nil {
			d = &DatasetProgress{Dataset: name}
			e.dsProg[name] = d
		}
		return d
	})
	p := e.progressLocked()
	ls := slices.Clone(e.listen)
	e.mu.Unlock()
	for _, fn := range ls {
		fn(p)
	}
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
func (e *Engine) Run(ctx context.Context) error {
	for {
		if e.paused.Load() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-e.resumeCh:
				continue
			}
		}
		live, err := e.session(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e.update(func(p *Progress, ds func(string) *DatasetProgress) {
			p.Online = false
			if err != nil {
				p.LastError, p.Err = err.Error(), err
			}
			for _, d := range e.dsProg {
				d.State = "offline"
			}
		})
		if live {
			e.attempts = 0
		}
		if e.paused.Load() {
			continue
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

// backoff is full jitter: uniform in [0, min(max, min*2^attempts)].
func (e *Engine) backoff() time.Duration {
	ceil := e.opts.MinBackoff << min(e.attempts, 20)
	if ceil > e.opts.MaxBackoff || ceil <= 0 {
		ceil = e.opts.MaxBackoff
	}
	e.attempts++
	return time.Duration(rand.Int64N(int64(ceil) + 1))
}

// session runs one connection. live reports whether it got as far as
// being current, or verified a chunk of a download (to reset the backoff:
// a download over a link that keeps dropping makes progress with every
// connection and must not wait longer and longer between them).
func (e *Engine) session(ctx context.Context) (live bool, err error) {
	u, err := url.Parse(e.opts.Server)
	if err != nil {
		return false, fmt.Errorf("server url: %w", err)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/sync"
	h := http.Header{}
	if e.opts.Token != "" {
		h.Set("Authorization", "Bearer "+e.opts.Token)
	}
	ws, resp, err := e.opts.Dialer.DialContext(ctx, u.String(), h)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return false, fmt.Errorf("server refused the token (401)")
		}
		return false, err
	}
	ws.SetReadLimit(protocol.MaxFrame)
	e.Stats.Sessions.Add(1)
	e.mu.Lock()
	e.conn = ws
	e.mu.Unlock()
	s := &session{e: e, ws: ws, out: make(chan []byte, 64), done: make(chan struct{}), dl: map[string]*download{}, catchup: map[string][]protocol.Record{}, caughtUp: map[string]bool{}, snapAnswer: map[string]string{}, healing: map[string]bool{}}
	defer func() {
		ws.Close()
		close(s.done)
		e.mu.Lock()
		e.conn = nil
		e.mu.Unlock()
	}()
	go s.writeLoop()
	go s.watchdog()
	stop := context.AfterFunc(ctx, func() { ws.Close() })
	defer stop()
	live, err = s.run()
	return live || s.verified, err
}

// session is one connection's state; only its reader goroutine touches it
// (writes go through out to the single writer goroutine).
type session struct {
	e    *Engine
	ws   *websocket.Conn
	out  chan []byte
	done chan struct{}
	live bool

	dl      map[string]*download         // dataset -> download in progress
	catchup map[string][]protocol.Record // dataset -> records buffered until catchup_end
	// caughtUp: a catchup_end arrived since the last subscribe (the server
	// has registered this client for live deltas of the dataset).
	caughtUp map[string]bool
	// snapAnswer: the state (snapshot@seq) in which the client last
	// resubscribed after a snapshot it did not need to download.
	snapAnswer map[string]string
	// healing: datasets the sink reported damaged, whose snapshot this
	// session asked for again.
	healing  map[string]bool
	heads    map[string]protocol.Head
	want     func(string) bool
	buf      []byte // readMessage's
	verified bool   // a chunk of a download verified on this connection

	// For the watchdog: downloads in progress, when one last got a byte
	// it asked for (or asked), and whether it gave up on this connection.
	downloading atomic.Int32
	progressAt  atomic.Int64 // unix ns
	stalled     atomic.Bool
	welcomed    atomic.Bool // the server's welcome arrived
}

// progressed notes that a download asked for or got bytes.
func (s *session) progressed() {
	s.progressAt.Store(time.Now().UnixNano())
	s.downloading.Store(int32(len(s.dl)))
}

// watchdog drops the connection when the server's welcome does not come,
// or when a download stalls: a chunk or a
// file_end lost or damaged in transit (a corrupt offset looks like a
// stale frame and is ignored) would otherwise leave the client waiting
// for bytes the server believes it sent. The next session resumes from
// the verified chunks.
func (s *session) watchdog() {
	stall, welcome := s.e.opts.StallTimeout, s.e.opts.WelcomeTimeout
	start := time.Now()
	t := time.NewTicker(max(min(stall, welcome)/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			if !s.welcomed.Load() && time.Since(start) > welcome {
				s.e.log.Warn("no welcome from the server; reconnecting", "after", welcome)
				s.ws.Close()
				return
			}
			if s.downloading.Load() > 0 && time.Since(time.Unix(0, s.progressAt.Load())) > stall {
				s.e.log.Warn("download stalled: nothing of what was asked for arrived; reconnecting", "for", stall)
				s.stalled.Store(true)
				s.ws.Close()
				return
			}
		}
	}
}

// readMessage reads the next message into the session's buffer, which
// the next call reuses: a chunk's data must be consumed before then (it
// is: written and hashed at once). ReadMessage would allocate and grow a
// buffer for every 1 MiB chunk frame.
func (s *session) readMessage() (int, []byte, error) {
	kind, r, err := s.ws.NextReader()
	if err != nil {
		return 0, nil, err
	}
	if s.buf == nil {
		s.buf = make([]byte, 0, protocol.MaxFrame)
	}
	b := s.buf[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // cannot happen below the read limit
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, nil, err
		}
	}
	s.buf = b
	return kind, b, nil
}

func (s *session) send(m *protocol.Message) {
	select {
	case s.out <- m.Encode():
	case <-s.done:
	}
}

func (s *session) writeLoop() {
	ping := time.NewTicker(25 * time.Second)
	defer ping.Stop()
	for {
		select {
		case b := <-s.out:
			s.ws.SetWriteDeadline(time.Now().Add(15 * time.Second))
			if err := s.ws.WriteMessage(websocket.TextMessage, b); err != nil {
				s.ws.Close()
				return
			}
		case <-ping.C:
			s.ws.SetWriteDeadline(time.Now().Add(15 * time.Second))
			if err := s.ws.WriteMessage(websocket.PingMessage, nil); err != nil {
				s.ws.Close()
				return
			}
		case <-s.done:
			return
		}
	}
}

// sub is what the client holds of ds, with the chain of its records
// since its snapshot (so that the server can tell whether it still has
// the same records under those seqs).
func (s *session) sub(ds string) protocol.Sub {
	ep, snap, seq, ok := s.e.sink.State(ds)
	if !ok {
		return protocol.Sub{Dataset: ds}
	}
	sub := protocol.Sub{Dataset: ds, Epoch: ep, Snapshot: snap, Seq: seq}
	psnap, base, recs, err := s.e.sink.Pending(ds)
	if err == nil && psnap == snap && len(recs) > 0 && recs[len(recs)-1].Seq == seq {
		sub.Base, sub.Chain = base, protocol.Chain(snap, recs)
	}
	return sub
}

func (s *session) run() (bool, error) {
	e := s.e
	wanted := map[string]bool{}
	for _, d := range e.opts.Datasets {
		wanted[d] = true
	}
	s.want = func(d string) bool { return len(wanted) == 0 || wanted[d] }
	hello := &protocol.Message{Type: protocol.THello, Proto: []int{protocol.VersionMin, protocol.VersionMax}, Client: e.opts.Name}
	var subs []protocol.Sub
	for _, d := range e.opts.Datasets {
		subs = append(subs, s.sub(d))
	}
	subscribed := map[string]bool{}
	for _, sb := range subs {
		subscribed[sb.Dataset] = true
	}
	// A message holds at most protocol.MaxSubs entries: the rest follow
	// in subscribes.
	n := min(len(subs), protocol.MaxSubs)
	hello.Subs = subs[:n]
	s.send(hello)
	s.subscribe(subs[n:])
	readDeadline := func() { s.ws.SetReadDeadline(time.Now().Add(90 * time.Second)) }
	readDeadline()
	s.ws.SetPingHandler(func(data string) error {
		readDeadline()
		s.ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(5*time.Second))
		return nil
	})
	for {
		kind, b, err := s.readMessage()
		if err != nil && s.stalled.Load() {
			return s.live, fmt.Errorf("download stalled for %v", e.opts.StallTimeout)
		}
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) && ce.Text != "" {
				return s.live, fmt.Errorf("server closed the connection: %s", ce.Text)
			}
			return s.live, err
		}
		readDeadline()
		if kind == websocket.BinaryMessage {
			if err := s.onBinary(b); err != nil {
				return s.live, err
			}
			continue
		}
		m, err := protocol.DecodeMessage(b)
		if errors.Is(err, protocol.ErrNoChecksum) && !s.welcomed.Load() {
			// A version 1 server refusing this client's version: its
			// error has no checksum. Report it as what it is.
			if old, err2 := protocol.DecodeUnverified(b); err2 == nil && old.Type == protocol.TError {
				e.log.Error("the server speaks an older sync protocol; upgrade the server", "reason", old.Reason, "client_versions", fmt.Sprintf("%d..%d", protocol.VersionMin, protocol.VersionMax))
				return s.live, fmt.Errorf("%w: this client speaks %d..%d; the server says: %s", ErrProtocolVersion, protocol.VersionMin, protocol.VersionMax, old.Reason)
			}
		}
		if errors.Is(err, protocol.ErrChecksum) {
			e.Stats.ChecksumErrors.Add(1)
			e.log.Warn("control message damaged in transit (checksum); reconnecting", "err", err)
			return s.live, err
		}
		if err != nil {
			e.log.Warn("refusing malformed message from server", "err", err)
			return s.live, err
		}
		switch m.Type {
		case protocol.TWelcome:
			s.welcomed.Store(true)
			if m.Version < protocol.VersionMin || m.Version > protocol.VersionMax {
				e.log.Warn("refusing welcome: protocol version not spoken here", "version", m.Version, "min", protocol.VersionMin, "max", protocol.VersionMax)
				return s.live, fmt.Errorf("%w: server chose protocol version %d; this client speaks %d..%d", ErrProtocolVersion, m.Version, protocol.VersionMin, protocol.VersionMax)
			}
			s.onHeads(m.Heads)
			e.update(func(p *Progress, _ func(string) *DatasetProgress) { p.Online = true; p.LastError, p.Err = "", nil })
			s.healDamaged(m.Heads)
			// Datasets the server has that we want but did not hold.
			var more []protocol.Sub
			for _, h := range m.Heads {
				if s.want(h.Dataset) && !subscribed[h.Dataset] {
					subscribed[h.Dataset] = true
					more = append(more, s.sub(h.Dataset))
				}
			}
			s.subscribe(more)
		case protocol.THeartbeat:
			s.onHeads(m.Heads)
			s.healDamaged(m.Heads)
		case protocol.TSnapshot:
			if err := s.onSnapshot(m); err != nil {
				return s.live, err
			}
		case protocol.TCatchupBegin:
			s.catchup[m.Dataset] = []protocol.Record{}
			e.update(func(_ *Progress, ds func(string) *DatasetProgress) { ds(m.Dataset).State = "catching up" })
		case protocol.TCatchupEnd:
			recs := s.catchup[m.Dataset]
			delete(s.catchup, m.Dataset)
			if err := s.apply(m.Dataset, recs, true); err != nil {
				return s.live, err
			}
			s.live = true
			if e.failing[m.Dataset] != nil {
				break // applyFailed set the state and the retry
			}
			s.caughtUp[m.Dataset] = true
			e.update(func(p *Progress, ds func(string) *DatasetProgress) {
				d := ds(m.Dataset)
				d.State = StateLive
				p.LastSync, d.LastSync = time.Now(), time.Now()
			})
		case protocol.TFileEnd:
			if err := s.onFileEnd(m); err != nil {
				return s.live, err
			}
		case protocol.TReset:
			if err := s.onReset(m); err != nil {
				return s.live, err
			}
		case protocol.TError:
			e.log.Warn("server error", "dataset", m.Dataset, "reason", m.Reason)
			if m.File != "" {
				return s.live, fmt.Errorf("server: %s", m.Reason)
			}
			if m.RetryAfterMs > 0 {
				return s.live, fmt.Errorf("server busy: %s", m.Reason)
			}
		}
	}
}

// healDamaged asks the server again for the snapshot of every dataset
// the sink reports damaged (checked at welcome and at each heartbeat): a
// subscribe that holds nothing gets a snapshot, which is downloaded and
// installed over the damaged one. The other datasets carry on.
func (s *session) healDamaged(heads []protocol.Head) {
	for _, h := range heads {
		ds := h.Dataset
		if !s.want(ds) || s.healing[ds] || s.dl[ds] != nil {
			continue
		}
		err := s.e.sink.Damaged(ds)
		if err == nil {
			continue
		}
		s.healing[ds] = true
		s.caughtUp[ds] = false
		s.e.Stats.Heals.Add(1)
		s.e.log.Warn("local dataset damaged; downloading it again from the server", "dataset", ds, "err", err)
		s.send(&protocol.Message{Type: protocol.TSubscribe, Subs: []protocol.Sub{{Dataset: ds}}})
	}
}

// subscribe sends subs in messages of at most protocol.MaxSubs entries.
func (s *session) subscribe(subs []protocol.Sub) {
	for len(subs) > 0 {
		n := min(len(subs), protocol.MaxSubs)
		s.send(&protocol.Message{Type: protocol.TSubscribe, Subs: subs[:n]})
		subs = subs[n:]
	}
}

func (s *session) onHeads(heads []protocol.Head) {
	s.e.update(func(_ *Progress, ds func(string) *DatasetProgress) {
		for _, h := range heads {
			if !s.want(h.Dataset) {
				continue
			}
			d := ds(h.Dataset)
			d.HeadSeq = h.Seq
			if d.HeadSeq > d.Seq {
				d.Lag = d.HeadSeq - d.Seq
			} else {
				d.Lag = 0
			}
		}
	})
}

func (s *session) onBinary(b []byte) error {
	v, err := protocol.DecodeBinary(b)
	if errors.Is(err, protocol.ErrChecksum) {
		// Damaged in transit: nothing of it is applied; the next
		// connection resumes from what the client holds.
		s.e.Stats.ChecksumErrors.Add(1)
		s.e.log.Warn("frame damaged in transit (checksum); reconnecting", "err", err)
		return err
	}
	if err != nil {
		s.e.log.Warn("refusing malformed frame from server", "err", err)
		return err
	}
	switch f := v.(type) {
	case *protocol.DeltaFrame:
		if buf, ok := s.catchup[f.Dataset]; ok {
			s.catchup[f.Dataset] = append(buf, f.Records...)
			return nil
		}
		return s.apply(f.Dataset, f.Records, false)
	case *protocol.Chunk:
		return s.onChunk(f)
	}
	return nil
}

// apply writes records through the sink and acknowledges them. A gap
// (records that do not follow the local seq) forces a resubscribe. live
// deltas of a dataset whose apply is failing are dropped (not
// acknowledged) until its retry, which subscribes again and applies the
// catch-up (catchup true).
func (s *session) apply(ds string, recs []protocol.Record, catchup bool) error {
	if len(recs) == 0 {
		return nil
	}
	if s.e.failing[ds] != nil && !catchup {
		return nil
	}
	_, _, seq, ok := s.e.sink.State(ds)
	if !ok {
		return nil // not installed yet; the subscribe after install catches up
	}
	i := 0
	for i < len(recs) && recs[i].Seq <= seq {
		i++
	}
	recs = recs[i:]
	if len(recs) == 0 {
		return nil
	}
	if recs[0].Seq != seq+1 {
		s.e.log.Warn("gap in deltas; resubscribing", "dataset", ds, "have", seq, "got", recs[0].Seq)
		s.caughtUp[ds] = false
		s.send(&protocol.Message{Type: protocol.TSubscribe, Subs: []protocol.Sub{s.sub(ds)}})
		return nil
	}
	if err := s.e.sink.Apply(ds, recs); err != nil {
		s.applyFailed(ds, err)
		return nil
	}
	if f := s.e.failing[ds]; f != nil {
		delete(s.e.failing, ds)
		s.e.log.Info("local apply works again", "dataset", ds, "after_attempts", f.Attempts)
	}
	last := recs[len(recs)-1].Seq
	s.e.Stats.DeltasApplied.Add(int64(len(recs)))
	s.send(&protocol.Message{Type: protocol.TAck, Dataset: ds, Seq: last})
	s.e.update(func(p *Progress, dsf func(string) *DatasetProgress) {
		d := dsf(ds)
		d.Seq = last
		if d.Failure != nil {
			d.Failure, d.State = nil, StateLive
		}
		if d.HeadSeq < last {
			d.HeadSeq = last
		}
		d.Lag = d.HeadSeq - last
		p.LastSync, d.LastSync = time.Now(), time.Now()
	})
	return nil
}

// applyFailed marks a dataset whose local apply failed and schedules its
// retry: after the backoff the engine subscribes it again from what it
// holds, and the catch-up is applied. Until then its live deltas are
// dropped; the connection and the other datasets carry on.
func (s *session) applyFailed(ds string, err error) {
	e := s.e
	e.Stats.ApplyFailures.Add(1)
	f := e.failing[ds]
	if f == nil {
		f = &ApplyError{Dataset: ds}
		e.failing[ds] = f
	}
	f.Attempts++
	f.Err = err
	delay := e.retryDelay(f.Attempts)
	f.RetryAt = time.Now().Add(delay)
	fe := *f
	s.caughtUp[ds] = false
	e.log.Warn("local apply failed; the dataset retries by itself, the others carry on", "dataset", ds, "attempt", f.Attempts, "retry_in", delay.Round(time.Millisecond), "err", err)
	e.update(func(p *Progress, dsf func(string) *DatasetProgress) {
		d := dsf(ds)
		d.State, d.Failure = StateApplyFailing, &fe
	})
	time.AfterFunc(delay, func() {
		s.send(&protocol.Message{Type: protocol.TSubscribe, Subs: []protocol.Sub{s.sub(ds)}})
	})
}

// retryDelay is the wait before the n-th retry of a failing apply:
// exponential between MinBackoff and MaxBackoff with equal jitter (at
// least half the step, so a failing disk is never retried in a loop).
func (e *Engine) retryDelay(n int) time.Duration {
	ceil := e.opts.MinBackoff << min(n-1, 20)
	if ceil > e.opts.MaxBackoff || ceil <= 0 {
		ceil = e.opts.MaxBackoff
	}
	return ceil/2 + time.Duration(rand.Int64N(int64(ceil/2)+1))
}

// onReset follows a server whose head is below the local seq (it lost
// records it had acknowledged, e.g. restored from a backup): the records
// above its head exist only here, so they are dropped. The rebase snapshot
// the server sends next then subscribes from its head, and the catch-up
// brings exactly the server's records. A server older than the reset's
// seq field sends 0: dropping every pending record is still safe (the
// catch-up sends them again), and a snapshot that covers more is refused
// below.
func (s *session) onReset(m *protocol.Message) error {
	e, ds := s.e, m.Dataset
	if !s.want(ds) {
		return nil
	}
	_, _, seq, ok := e.sink.State(ds)
	if !ok || seq <= m.Seq {
		e.log.Warn("server reset", "dataset", ds, "reason", m.Reason, "server_seq", m.Seq)
		return nil
	}
	if m.Code == protocol.ResetDiverged {
		e.Stats.Diverged.Add(1)
	}
	n, err := e.sink.Truncate(ds, m.Seq)
	if err != nil {
		// The local snapshot already holds records the server does not
		// have: only a fresh download could undo them, and Install keeps
		// a snapshot that looks newer. Keep retrying; the operator sees why.
		e.log.Error("server reset: cannot drop the local records the server no longer has; delete the dataset's local directory to download it again", "dataset", ds, "reason", m.Reason, "local_seq", seq, "server_seq", m.Seq, "err", err)
		return fmt.Errorf("reset %s to the server's seq %d: %w", ds, m.Seq, err)
	}
	ep, snap, now, _ := e.sink.State(ds)
	e.log.Warn("server reset: discarded local records the server no longer has", "dataset", ds, "code", m.Code, "reason", m.Reason, "discarded", n, "local_seq", seq, "server_seq", m.Seq, "seq_now", now)
	s.caughtUp[ds] = false
	delete(s.snapAnswer, ds)
	e.update(func(_ *Progress, dsf func(string) *DatasetProgress) {
		d := dsf(ds)
		d.Epoch, d.Snapshot, d.Seq = ep, snap, now
		d.State = "catching up"
		d.HeadSeq, d.Lag = m.Seq, m.Seq-now
	})
	return nil
}

// onSnapshot rebases onto the server's snapshot: by local compaction when
// the client holds every delta it covers, else by download.
func (s *session) onSnapshot(m *protocol.Message) error {
	e, man := s.e, m.Manifest
	ds := man.Dataset
	if !s.want(ds) {
		return nil
	}
	if s.healing[ds] {
		return s.startDownload(man) // nothing local is trusted
	}
	ep, snapID, seq, ok := e.sink.State(ds)
	if ok && snapID == man.SnapshotID {
		s.markCurrent(ds)
		return s.resubscribe(ds)
	}
	if ok && ep == man.Epoch && seq >= man.CoversThroughSeq {
		e.update(func(_ *Progress, dsf func(string) *DatasetProgress) { dsf(ds).State = "rebasing" })
		local, err := e.sink.CompactThrough(ds, man.CoversThroughSeq)
		if err == nil && sameFiles(local, man) {
			e.Stats.LocalRebases.Add(1)
			e.log.Info("rebased by local compaction: SHA-256 of every file equals the server's", "dataset", ds, "snapshot", man.SnapshotID)
			s.markCurrent(ds)
			return s.resubscribe(ds)
		}
		if err != nil {
			e.log.Warn("local compaction failed; downloading the server's snapshot", "dataset", ds, "err", err)
		} else {
			e.log.Warn("local compaction differs from the server's snapshot; downloading it", "dataset", ds, "local", local.SnapshotID, "server", man.SnapshotID)
		}
	}
	return s.startDownload(man)
}

// resubscribe follows a snapshot the client did not need to download.
// When it came as the answer to a subscribe (the server could not catch
// the client up by deltas), the server has not registered the client for
// live deltas: subscribe again from the new state. If the server answers
// the same state with a snapshot again, it cannot catch this client up
// (its history was lost): end the session and retry later, rather than
// sit there unsubscribed.
func (s *session) resubscribe(ds string) error {
	if s.caughtUp[ds] {
		return nil // live: the snapshot was an announcement
	}
	_, snap, seq, _ := s.e.sink.State(ds)
	state := fmt.Sprintf("%s@%d", snap, seq)
	if s.snapAnswer[ds] == state {
		s.e.log.Warn("the server cannot catch this dataset up by deltas (its history does not reach back); retrying later", "dataset", ds, "snapshot", snap, "seq", seq)
		return fmt.Errorf("server cannot catch %s up from seq %d", ds, seq)
	}
	s.snapAnswer[ds] = state
	s.send(&protocol.Message{Type: protocol.TSubscribe, Subs: []protocol.Sub{s.sub(ds)}})
	return nil
}

func (s *session) markCurrent(ds string) {
	ep, snap, seq, _ := s.e.sink.State(ds)
	s.e.update(func(p *Progress, dsf func(string) *DatasetProgress) {
		d := dsf(ds)
		d.Epoch, d.Snapshot, d.Seq = ep, snap, seq
		if d.State != "catching up" {
			d.State = "live"
		}
		p.LastSync, d.LastSync = time.Now(), time.Now()
	})
}

func sameFiles(a, b *format.Manifest) bool {
	for _, name := range []string{format.DataFile, format.IndexFile, format.HashFile, format.TailFile} {
		fa, fb := a.File(name), b.File(name)
		if (fa == nil) != (fb == nil) || (fa != nil && fa.SHA256 != fb.SHA256) {
			return false
		}
	}
	return true
}

// dlAcct is what this process did for one snapshot download, over all
// its sessions: logged as "download complete".
type dlAcct struct {
	start     time.Time
	sessions  int
	fetched   int64 // chunk bytes received and written (refetches included)
	resumed   int64 // verified bytes found on disk when this process started the download
	refetched int64 // chunks discarded for a hash mismatch
}

// download is a snapshot being fetched, one file at a time.
type download struct {
	acct    *dlAcct
	man     *format.Manifest
	dir     string
	files   []format.FileInfo
	i       int // file being fetched
	f       *os.File
	off     int64     // next expected byte of the current file
	whole   hash.Hash // SHA-256 of bytes [0, off)
	mark    []byte    // whole's state at the start of the current chunk
	chunk   hash.Hash // SHA-256 of the current 4 MiB chunk
	base    int64     // bytes of earlier files, for progress
	retries int
}

func (s *session) startDownload(man *format.Manifest) error {
	ds := man.Dataset
	if old := s.dl[ds]; old != nil {
		if old.man.SnapshotID == man.SnapshotID {
			return nil
		}
		old.close()
	}
	dir := s.e.sink.StagingDir(ds, man.SnapshotID)
	// Other staging directories of this dataset are stale downloads.
	parent := filepath.Dir(dir)
	if ents, err := os.ReadDir(parent); err == nil {
		for _, en := range ents {
			if strings.HasPrefix(en.Name(), ".dl-") && filepath.Join(parent, en.Name()) != dir {
				os.RemoveAll(filepath.Join(parent, en.Name()))
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	acct := s.e.acct[man.SnapshotID]
	if acct == nil {
		acct = &dlAcct{start: time.Now()}
		s.e.acct[man.SnapshotID] = acct
	}
	acct.sessions++
	d := &download{man: man, dir: dir, files: man.Files, acct: acct}
	s.dl[ds] = d
	var total int64
	for _, f := range man.Files {
		total += f.Size
	}
	s.e.Stats.DownloadRebases.Add(1)
	s.e.log.Info("downloading snapshot", "dataset", ds, "snapshot", man.SnapshotID, "bytes", total)
	s.e.update(func(_ *Progress, dsf func(string) *DatasetProgress) {
		p := dsf(ds)
		p.State, p.BytesTotal, p.BytesDone, p.downloadStart = "downloading", total, 0, time.Now()
	})
	return s.nextFile(d)
}

// nextFile opens the next file that is not complete yet and asks for it
// from the last verified chunk.
func (s *session) nextFile(d *download) error {
	for ; d.i < len(d.files); d.i++ {
		fi := d.files[d.i]
		final := filepath.Join(d.dir, fi.Name)
		if st, err := os.Stat(final); err == nil && st.Size() == fi.Size {
			d.base += fi.Size
			if d.acct.sessions == 1 {
				d.acct.resumed += fi.Size
			}
			continue // verified and renamed in an earlier session
		}
		part := final + ".partial"
		f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		d.f, d.whole, d.chunk = f, sha256.New(), sha256.New()
		// Keep the prefix of whole chunks that verify.
		d.off = 0
		buf := make([]byte, format.ChunkSize)
		for ci := range fi.Chunks {
			n, err := io.ReadFull(f, buf)
			if int64(n) != min(format.ChunkSize, fi.Size-int64(ci)*format.ChunkSize) || (err != nil && !errors.Is(err, io.ErrUnexpectedEOF)) {
				break
			}
			sum := sha256.Sum256(buf[:n])
			if hex.EncodeToString(sum[:]) != fi.Chunks[ci] {
				break
			}
			d.whole.Write(buf[:n])
			d.off += int64(n)
		}
		if d.mark, err = d.whole.(encoding.BinaryMarshaler).MarshalBinary(); err != nil {
			return err
		}
		if err := f.Truncate(d.off); err != nil {
			return err
		}
		if _, err := f.Seek(d.off, io.SeekStart); err != nil {
			return err
		}
		s.e.Stats.ResumedBytesSkipped.Add(d.off)
		if d.acct.sessions == 1 {
			d.acct.resumed += d.off
		}
		if d.off == fi.Size {
			return s.finishFile(d)
		}
		s.e.update(func(_ *Progress, dsf func(string) *DatasetProgress) {
			p := dsf(d.man.Dataset)
			p.File, p.FileDone, p.FileTotal, p.downloadOffset = fi.Name, d.off, fi.Size, d.base+d.off
			p.BytesDone = d.base + d.off
		})
		s.e.log.Debug("fetch", "file", fi.Name, "offset", d.off)
		s.progressed()
		s.send(&protocol.Message{Type: protocol.TFetch, Dataset: d.man.Dataset, Snapshot: d.man.SnapshotID, File: fi.Name, SHA256: fi.SHA256, Offset: d.off})
		return nil
	}
	return s.finishDownload(d)
}

func (d *download) close() {
	if d.f != nil {
		d.f.Close()
		d.f = nil
	}
}

func (s *session) onChunk(c *protocol.Chunk) error {
	var d *download
	for _, x := range s.dl {
		if x.f != nil && x.i < len(x.files) && x.files[x.i].SHA256 == hex.EncodeToString(c.SHA256[:]) {
			d = x
		}
	}
	if d == nil || c.Offset != d.off {
		return nil // a stale stream (after a refetch); ignore
	}
	fi := d.files[d.i]
	if d.off+int64(len(c.Data)) > fi.Size {
		return fmt.Errorf("server sent more of %s than its size", fi.Name)
	}
	s.e.Stats.BytesDownloaded.Add(int64(len(c.Data)))
	d.acct.fetched += int64(len(c.Data))
	s.progressed()
	data := c.Data
	for len(data) > 0 {
		inChunk := d.off % format.ChunkSize
		take := min(int64(len(data)), format.ChunkSize-inChunk)
		if _, err := d.f.Write(data[:take]); err != nil {
			return err
		}
		d.chunk.Write(data[:take])
		d.whole.Write(data[:take])
		d.off += take
		data = data[take:]
		if d.off%format.ChunkSize == 0 || d.off == fi.Size {
			ci := (d.off - 1) / format.ChunkSize
			sum := hex.EncodeToString(d.chunk.Sum(nil))
			d.chunk.Reset()
			start := ci * format.ChunkSize
			if sum != fi.Chunks[ci] {
				// Corrupt in transit: drop the chunk and fetch it again.
				s.e.Stats.ChunksRefetched.Add(1)
				d.acct.refetched++
				s.e.log.Warn("chunk hash mismatch; refetching", "file", fi.Name, "chunk", ci)
				d.retries++
				if d.retries > 20 {
					return fmt.Errorf("%s: too many corrupt chunks", fi.Name)
				}
				if err := d.f.Truncate(start); err != nil {
					return err
				}
				if _, err := d.f.Seek(start, io.SeekStart); err != nil {
					return err
				}
				d.off = start
				if err := d.whole.(encoding.BinaryUnmarshaler).UnmarshalBinary(d.mark); err != nil {
					return err
				}
				s.send(&protocol.Message{Type: protocol.TFetch, Dataset: d.man.Dataset, Snapshot: d.man.SnapshotID, File: fi.Name, SHA256: fi.SHA256, Offset: start})
				return nil
			}
			// Verified: the whole-file hash keeps it.
			s.verified = true
			var err error
			if d.mark, err = d.whole.(encoding.BinaryMarshaler).MarshalBinary(); err != nil {
				return err
			}
		}
	}
	s.progressBytes(d)
	if s.e.opts.BandwidthLimit > 0 {
		time.Sleep(time.Duration(float64(len(c.Data)) / float64(s.e.opts.BandwidthLimit) * float64(time.Second)))
	}
	if d.off == fi.Size {
		// Every byte is here and every chunk verified: finish now rather
		// than at file_end. Chunk frames name the file by SHA-256 only, so
		// when two datasets download the same file (equal data.arrow) a
		// stream's chunks may land in the other download, whose file_end
		// then finds nothing to finish.
		return s.finishFile(d)
	}
	return nil
}

func (s *session) progressBytes(d *download) {
	s.e.update(func(_ *Progress, dsf func(string) *DatasetProgress) {
		p := dsf(d.man.Dataset)
		p.FileDone = d.off
		p.BytesDone = d.base + d.off
		if el := time.Since(p.downloadStart).Seconds(); el > 0 {
			p.RateBytesPerS = float64(p.BytesDone-p.downloadOffset) / el
			if p.RateBytesPerS > 0 {
				p.ETA = time.Duration(float64(p.BytesTotal-p.BytesDone) / p.RateBytesPerS * float64(time.Second))
			}
		}
	})
}

func (s *session) onFileEnd(m *protocol.Message) error {
	s.e.log.Debug("file_end", "file", m.File)
	d := s.dl[m.Dataset]
	if d == nil || d.i >= len(d.files) || d.files[d.i].SHA256 != m.SHA256 {
		return nil
	}
	if d.off != d.files[d.i].Size {
		return nil // a refetch is under way
	}
	return s.finishFile(d)
}

// finishFile checks the whole-file SHA-256 and renames .partial away.
func (s *session) finishFile(d *download) error {
	fi := d.files[d.i]
	if got := hex.EncodeToString(d.whole.Sum(nil)); got != fi.SHA256 {
		d.close()
		os.Remove(filepath.Join(d.dir, fi.Name+".partial"))
		return fmt.Errorf("%s: SHA-256 %s, manifest says %s; file discarded", fi.Name, got, fi.SHA256)
	}
	err := fileutil.SyncClose(d.f)
	d.f = nil
	if err != nil {
		return err
	}
	final := filepath.Join(d.dir, fi.Name)
	if err := os.Rename(final+".partial", final); err != nil {
		return err
	}
	d.base += fi.Size
	d.i++
	return s.nextFile(d)
}

// finishDownload writes the manifest and hands the directory to the sink,
// then subscribes for the deltas after it.
func (s *session) finishDownload(d *download) error {
	ds := d.man.Dataset
	delete(s.dl, ds)
	s.progressed()
	var total int64
	for _, f := range d.files {
		total += f.Size
	}
	a := d.acct
	delete(s.e.acct, d.man.SnapshotID)
	s.e.log.Info("download complete", "dataset", ds, "snapshot", d.man.SnapshotID, "bytes", total,
		"fetched", a.fetched, "resumed", a.resumed, "refetched_chunks", a.refetched, "sessions", a.sessions,
		"seconds", time.Since(a.start).Seconds())
	b, err := jsonManifest(d.man)
	if err != nil {
		return err
	}
	// Durable (file and directory, which also makes the renames of the
	// .partial files durable) before Install moves CURRENT to it.
	if err := fileutil.WriteFile(filepath.Join(d.dir, format.ManifestFile), b, 0o644); err != nil {
		return err
	}
	if err := s.e.sink.Install(ds, d.dir); err != nil {
		os.RemoveAll(d.dir)
		return fmt.Errorf("install %s: %w", ds, err)
	}
	s.e.log.Info("installed downloaded snapshot", "dataset", ds, "snapshot", d.man.SnapshotID)
	delete(s.healing, ds)
	s.markCurrent(ds)
	s.caughtUp[ds] = false
	s.send(&protocol.Message{Type: protocol.TSubscribe, Subs: []protocol.Sub{s.sub(ds)}})
	return nil
}
