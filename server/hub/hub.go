// Package hub fans snapshots and deltas out to companions over websockets.
//
// Each connection has one writer goroutine fed by two queues: control
// messages and live deltas (bounded; a consumer that lets it fill up is
// disconnected with a reason rather than buffered forever) and bulk
// snapshot chunks (small and blocking, so a transfer is paced by the
// socket). The server frames the messages itself
// (wsconn.Options.ServerFrames): Publish encodes and frames a live delta
// once and writes the same bytes to each subscriber that has nothing
// queued in one non-blocking write from the publishing goroutine
// (wsconn.Conn.SendFramed, under the connection's write lock; a few
// goroutines share a large fan-out and yield now and then), so a sparse
// row wakes no writer goroutine; what a socket does not take at once is
// queued, rows in a burst are queued, and what queued up goes out in one
// write (still one websocket message each: the protocol does not
// change). Subscribing takes the
// dataset's head atomically with registering for live deltas (kdb+'s
// .u.sub): the catch-up covers (client seq, head] and live delivery starts
// after head, so there is no gap and no duplicate.
//
// A subscription that carries a history chain (protocol.Chain) is checked
// against the server's own records when its history reaches back far
// enough; a client holding other records under the same seqs (the server
// was restored from a backup) is told to reset. One log line per
// hello/subscribe message, whatever its number of entries.
//
// Version 3 adds as-of reads: a client asks which vintage a WHEN names
// (vintage) or every value one period had across vintages (revisions),
// and fetches a vintage's files like a snapshot's. The hub answers them
// through the Source's optional Vintages interface, off the read loop, a
// few at a time per connection.
//
// The hub knows nothing of HTTP routing, tokens or the store: it reads
// through the Source interface it declares.
package hub

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/energyscope/energyscope/internal/wsconn"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/sync/protocol"
)

// Source is what the hub needs from the server.
type Source interface {
	// Heads lists every dataset's head.
	Heads() []protocol.Head
	// Head returns one dataset's head and the manifest of its snapshot.
	Head(dataset string) (protocol.Head, *format.Manifest, bool)
	// Since returns the records with seq > after (up to the head), or
	// false when the retained history does not reach back that far.
	Since(dataset string, after uint64) ([]format.Record, bool)
	// DamageOf reports why a dataset the server has, but does not serve
	// (Head is false), is damaged; false if it is not (unknown).
	DamageOf(dataset string) (reason string, damaged bool)
	// OpenFile opens the file of a dataset's retained snapshots whose
	// SHA-256 is sha256 (a file, or a region of the lake's Puffin file
	// mapped in place).
	OpenFile(dataset, sha256 string) (ReadAtCloser, error)
}

// Vintages is the optional part of a Source that serves version 3's
// as-of reads. A Source without it (a server without a lake) answers
// vintage and revisions requests with error{code: no_lake}.
type Vintages interface {
	// Vintage resolves asof (an RFC 3339 time, a date, an es snapshot id
	// or a tag) to a vintage of dataset and its manifest.
	Vintage(ctx context.Context, dataset, asof string) (protocol.VintageInfo, *format.Manifest, error)
	// Revisions lists every value period of series had across the
	// dataset's retained vintages, oldest first.
	Revisions(ctx context.Context, dataset, series, period string) ([]protocol.Revision, error)
	// OpenVintageFile opens the file whose SHA-256 is sha256 of the
	// vintage whose es snapshot id is snapshot (a fetch of a file that is
	// not in the dataset's retained snapshots).
	OpenVintageFile(ctx context.Context, dataset, snapshot, sha256 string) (ReadAtCloser, error)
}

// ReadAtCloser is a file the hub streams.
type ReadAtCloser interface {
	io.ReaderAt
	io.Closer
}

// RequestError types the failure of a vintage or revisions request: Code
// goes to the client as error.code, the error's text as error.reason.
// Any other error is answered without a code.
type RequestError struct {
	Code protocol.Code
	Err  error
}

func (e *RequestError) Error() string { return e.Err.Error() }
func (e *RequestError) Unwrap() error { return e.Err }

// maxRequests bounds the vintage and revisions requests of one connection
// in progress at once; the read loop waits for a slot.
const maxRequests = 4

// requestTimeout bounds one vintage or revisions request.
const requestTimeout = 30 * time.Second

// Options for New.
type Options struct {
	Logger *slog.Logger
	// SendQueue bounds the control/delta queue of a connection; a
	// subscriber that falls this far behind is disconnected. Default 256.
	SendQueue int
	// PingInterval between pings; default 25 s. The read deadline is
	// three intervals.
	PingInterval time.Duration
	// WriteTimeout for one frame; default 15 s.
	WriteTimeout time.Duration
	// OnAck, if set, is called for each client ack (metrics).
	OnAck func(client, dataset string, seq uint64)
}

// Hub is the set of connections.
type Hub struct {
	src  Source
	opts Options
	up   websocket.Upgrader

	mu    sync.Mutex // guards conns and dsLocks
	conns map[*conn]struct{}
	// dsLocks serialize, per dataset, publishing with subscribing.
	dsLocks map[string]*dsState

	cmu    sync.Mutex          // guards chains
	chains map[chainKey]string // the server's history chains, see chain

	connsN    atomic.Int64
	slowCuts  atomic.Int64
	rebases   atomic.Int64 // snapshot answers to a subscribe
	resets    atomic.Int64
	deltasOut atomic.Int64
	bytesOut  atomic.Int64
}

// New returns a hub over src.
func New(src Source, o Options) *Hub {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.SendQueue <= 0 {
		o.SendQueue = 256
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 25 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 15 * time.Second
	}
	return &Hub{
		src:     src,
		opts:    o,
		conns:   map[*conn]struct{}{},
		dsLocks: map[string]*dsState{},
		chains:  map[chainKey]string{},
		up: websocket.Upgrader{
			ReadBufferSize:  1024,
			WriteBufferSize: 4096,
			WriteBufferPool: &sync.Pool{},
			// Companions are not browsers; the server's HTTP layer has
			// already authenticated the request.
			CheckOrigin: func(*http.Request) bool { return true },
		},
	}
}

// Stats are the hub's counters.
type Stats struct {
	Connections, SlowConsumerCuts, DeltaFrames, BytesOut int64
	// Rebases counts subscriptions answered with a snapshot to rebase on
	// (no local snapshot, another epoch, history too short, a reset);
	// Resets those told to drop records the server does not have.
	Rebases, Resets int64
}

// Stats returns the counters.
func (h *Hub) Stats() Stats {
	return Stats{Connections: h.connsN.Load(), SlowConsumerCuts: h.slowCuts.Load(), DeltaFrames: h.deltasOut.Load(), BytesOut: h.bytesOut.Load(),
		Rebases: h.rebases.Load(), Resets: h.resets.Load()}
}

// dsState is a dataset's lock and what it guards.
type dsState struct {
	sync.Mutex
	// published is when the last Publish of the dataset ended.
	published time.Time
}

func (h *Hub) dsLock(ds string) *dsState {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.dsLocks[ds]
	if l == nil {
		l = &dsState{}
		h.dsLocks[ds] = l
	}
	return l
}

// chunkBufs recycles the buffers of chunk frames (1 MiB each): a file is
// read straight into the frame, and the frame's memory is reused.
var chunkBufs = sync.Pool{New: func() any {
	b := make([]byte, protocol.ChunkHeader+protocol.MaxChunk)
	return &b
}}

type conn struct {
	h      *Hub
	ws     *websocket.Conn
	remote string
	client string
	// w is the one writer: control and deltas go on its Send lane (never
	// blocks the publisher; a full queue cuts the consumer), snapshot
	// chunks on its SendWait lane (blocks the fetcher), written after
	// the former. Its Reason is why the connection ended.
	w *wsconn.Conn

	mu   sync.Mutex        // guards subs
	subs map[string]uint64 // dataset -> highest seq queued to this client

	fmu     sync.Mutex               // guards fetches
	fetches map[string]chan struct{} // dataset/sha256 -> stop of the stream in progress

	// version is the protocol version chosen at welcome (read loop only).
	version int
	// ctx ends with the connection; reqs bounds the requests in progress.
	ctx  context.Context
	reqs chan struct{}
}

// ServeHTTP upgrades an authenticated request and runs the connection
// until it ends.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ws, err := h.up.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade wrote the HTTP error
	}
	c := &conn{
		h:      h,
		ws:     ws,
		remote: r.RemoteAddr,
		subs:   map[string]uint64{},

		fetches: map[string]chan struct{}{},
		reqs:    make(chan struct{}, maxRequests),
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	c.ctx = ctx
	ws.SetReadLimit(protocol.MaxControl)
	c.w = wsconn.New(ws, wsconn.Options{
		ServerFrames: true,
		Queue:        h.opts.SendQueue,
		BulkQueue:    2,
		WriteTimeout: h.opts.WriteTimeout,
		PingInterval: h.opts.PingInterval,
		ReadTimeout:  3 * h.opts.PingInterval,
		CloseTimeout: time.Second,
		Written: func(n int, err error) {
			if err == nil {
				h.bytesOut.Add(int64(n))
			}
		},
	})
	h.mu.Lock()
	h.conns[c] = struct{}{}
	h.mu.Unlock()
	h.connsN.Add(1)
	c.readLoop()
	c.close("client went away")
	why, _ := c.w.Reason()
	reason := why.Text
	h.opts.Logger.Info("connection closed", "client", c.client, "remote", c.remote, "reason", reason)
	h.mu.Lock()
	delete(h.conns, c)
	h.mu.Unlock()
	h.connsN.Add(-1)
}

// refuse ends a connection that broke the protocol, logging why (the
// close frame carries the reason too).
func (c *conn) refuse(reason string) {
	c.h.opts.Logger.Warn("refusing connection", "client", c.client, "remote", c.remote, "reason", reason)
	c.close(reason)
}

// close ends the connection once, recording why; the reason goes into
// the close frame, after what is queued on the control lane.
func (c *conn) close(reason string) {
	c.w.Close(wsconn.Reason{Code: websocket.CloseNormalClosure, Text: reason})
}

// enqueue queues a control or delta frame without blocking; a full queue
// cuts the consumer off.
func (c *conn) enqueue(kind int, data []byte) bool {
	return c.sent(c.w.Send(kind, data))
}

// sent is whether a send succeeded; a full queue (SlowConsumerError)
// cuts the consumer off.
func (c *conn) sent(err error) bool {
	var slow *wsconn.SlowConsumerError
	if errors.As(err, &slow) {
		c.h.slowCuts.Add(1)
		c.h.opts.Logger.Warn("disconnecting slow consumer", "client", c.client, "queued", slow.Queued)
		c.w.Close(wsconn.Reason{Code: websocket.CloseNormalClosure, Text: slow.Error(), Err: err})
	}
	return err == nil
}

// enqueueFramed sends a frame made by wsconn.Frame: if direct, written at
// once when nothing is queued before it, else queued (a full queue cuts
// the consumer off).
func (c *conn) enqueueFramed(b []byte, direct bool) bool {
	if direct {
		return c.sent(c.w.SendFramed(b))
	}
	return c.sent(c.w.QueueFramed(b))
}

func (c *conn) sendMsg(m *protocol.Message) bool {
	return c.enqueue(websocket.TextMessage, m.Encode())
}

// readLoop reads until the connection ends; the read deadline (three
// ping intervals) is pushed by each message and, through the writer, by
// each pong.
func (c *conn) readLoop() {
	helloSeen := false
	for {
		kind, b, err := c.ws.ReadMessage()
		if errors.Is(err, websocket.ErrReadLimit) {
			c.refuse(fmt.Sprintf("frame exceeds the read limit of %d bytes", protocol.MaxControl))
			return
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			c.close(fmt.Sprintf("client closed the connection: %d %s", ce.Code, ce.Text))
			return
		}
		if err != nil {
			c.close("read: " + err.Error())
			return
		}
		c.w.Touch()
		if kind != websocket.TextMessage {
			c.refuse("unexpected binary frame from client")
			return
		}
		m, err := protocol.DecodeMessage(b)
		if errors.Is(err, protocol.ErrNoChecksum) && !helloSeen {
			// A version 1 client: say so in terms it reads (it ignores
			// the checksum field).
			if old, err2 := protocol.DecodeUnverified(b); err2 == nil && old.Type == protocol.THello {
				reason := fmt.Sprintf("no common protocol version: client speaks %d..%d, server %d..%d (version 1 has no checksums and is no longer served; upgrade the companion)", old.Proto[0], old.Proto[1], protocol.VersionMin, protocol.VersionMax)
				c.sendMsg(&protocol.Message{Type: protocol.TError, Reason: reason})
				c.refuse(reason)
				return
			}
		}
		if err != nil {
			c.sendMsg(&protocol.Message{Type: protocol.TError, Reason: err.Error()})
			c.refuse(err.Error())
			return
		}
		if !helloSeen && m.Type != protocol.THello {
			c.refuse("first message must be hello")
			return
		}
		switch m.Type {
		case protocol.THello:
			if helloSeen {
				c.refuse("second hello")
				return
			}
			helloSeen = true
			if m.Proto[1] < protocol.VersionMin || m.Proto[0] > protocol.VersionMax {
				reason := fmt.Sprintf("no common protocol version: client speaks %d..%d, server %d..%d", m.Proto[0], m.Proto[1], protocol.VersionMin, protocol.VersionMax)
				c.sendMsg(&protocol.Message{Type: protocol.TError, Reason: reason})
				c.refuse(reason)
				return
			}
			c.client = m.Client
			c.version = min(m.Proto[1], protocol.VersionMax)
			c.sendMsg(&protocol.Message{Type: protocol.TWelcome, Version: c.version, Heads: c.h.src.Heads()})
			c.h.subscribeAll(c, m.Type, m.Subs)
		case protocol.TSubscribe:
			c.h.subscribeAll(c, m.Type, m.Subs)
		case protocol.TFetch:
			c.startFetch(m)
		case protocol.TAck:
			if c.h.opts.OnAck != nil {
				c.h.opts.OnAck(c.client, m.Dataset, m.Seq)
			}
		case protocol.TPing:
			c.sendMsg(&protocol.Message{Type: protocol.THeartbeat, Heads: c.h.src.Heads()})
		case protocol.TVintage, protocol.TRevisions:
			if c.version < protocol.VersionVintages {
				c.refuse(fmt.Sprintf("unexpected message %s (protocol version %d; it needs %d)", m.Type, c.version, protocol.VersionVintages))
				return
			}
			if m.Vintage != nil || len(m.Revisions) > 0 {
				c.refuse("unexpected message " + m.Type + " answer from a client")
				return
			}
			c.startRequest(m)
		default:
			c.refuse("unexpected message " + m.Type)
			return
		}
	}
}

// subOutcome is what a subscribe did for one dataset.
type subOutcome int

const (
	subCaughtUp subOutcome = iota // catch-up queued, registered for live deltas
	subRebase                     // told to rebase on a snapshot
	subReset                      // told to drop records the server does not have, then rebase
	subUnknown                    // no such dataset
	subDamaged                    // the server's copy is damaged
	subCut                        // the connection closed meanwhile
	nSubOutcomes
)

// subscribeAll subscribes each entry of one hello or subscribe message
// and logs one line for the message, however many entries it has
// (protocol.MaxSubs bounds them): a line per entry let one message write
// thousands.
func (h *Hub) subscribeAll(c *conn, typ string, subs []protocol.Sub) {
	var n [nSubOutcomes]int
	var rebased []string
	for _, s := range subs {
		o := h.subscribe(c, s)
		n[o]++
		if (o == subRebase || o == subReset) && len(rebased) < 5 {
			rebased = append(rebased, s.Dataset)
		}
	}
	lvl := slog.LevelDebug
	if n[subRebase]+n[subReset]+n[subUnknown]+n[subDamaged] > 0 {
		lvl = slog.LevelInfo
	}
	h.opts.Logger.Log(context.Background(), lvl, "subscribe", "client", c.client, "message", typ, "datasets", len(subs),
		"caught_up", n[subCaughtUp], "rebase", n[subRebase], "reset", n[subReset], "unknown", n[subUnknown], "damaged", n[subDamaged], "rebase_first", rebased)
}

// subscribe brings a client from its state to the head and registers it
// for live deltas, atomically with respect to Publish.
func (h *Hub) subscribe(c *conn, s protocol.Sub) subOutcome {
	l := h.dsLock(s.Dataset)
	l.Lock()
	defer l.Unlock()
	head, m, ok := h.src.Head(s.Dataset)
	if !ok {
		if why, damaged := h.src.DamageOf(s.Dataset); damaged {
			c.sendMsg(&protocol.Message{Type: protocol.TError, Code: protocol.ErrorDamaged, Dataset: s.Dataset,
				Reason: "dataset " + s.Dataset + " is damaged on the server (" + why + "); keep serving your copy until it is replaced"})
			return subDamaged
		}
		c.sendMsg(&protocol.Message{Type: protocol.TError, Code: protocol.ErrorUnknownDataset, Dataset: s.Dataset, Reason: "unknown dataset " + s.Dataset})
		return subUnknown
	}
	c.mu.Lock()
	delete(c.subs, s.Dataset)
	c.mu.Unlock()
	rebase := func(why string) subOutcome {
		h.rebases.Add(1)
		c.sendMsg(&protocol.Message{Type: protocol.TSnapshot, Dataset: s.Dataset, Manifest: m, Reason: why})
		return subRebase
	}
	switch {
	case s.Snapshot == "":
		return rebase("no local snapshot")
	case s.Epoch != head.Epoch:
		return rebase(fmt.Sprintf("epoch %d replaced by %d", s.Epoch, head.Epoch))
	case s.Seq > head.Seq:
		// Seq tells the client the head: it drops its records above it
		// and then follows this server again.
		c.sendMsg(&protocol.Message{Type: protocol.TReset, Code: protocol.ResetAhead, Dataset: s.Dataset, Seq: head.Seq, Reason: fmt.Sprintf("client seq %d is ahead of the server's %d", s.Seq, head.Seq)})
		h.resets.Add(1)
		rebase("client ahead of server")
		return subReset
	}
	if s.Chain != "" && s.Base < s.Seq {
		// The client's records (Base, Seq] must be the server's: a server
		// restored from a backup may have given those seqs to other
		// records. Verifiable while the history reaches back to Base;
		// otherwise the rebase's SHA-256 comparison is what catches it.
		if mine, ok := h.chain(s, head.Epoch); ok && mine != s.Chain {
			h.resets.Add(1)
			c.sendMsg(&protocol.Message{Type: protocol.TReset, Code: protocol.ResetDiverged, Dataset: s.Dataset, Seq: s.Base,
				Reason: fmt.Sprintf("the client's records %d..%d differ from the server's (chain %s, server %s)", s.Base+1, s.Seq, s.Chain, mine)})
			rebase("client diverged from the server's history")
			return subReset
		}
	}
	recs, ok := h.src.Since(s.Dataset, s.Seq)
	if !ok {
		return rebase(fmt.Sprintf("history does not reach back to seq %d", s.Seq))
	}
	if !c.sendMsg(&protocol.Message{Type: protocol.TCatchupBegin, Dataset: s.Dataset, From: s.Seq, To: head.Seq}) {
		return subCut
	}
	sent := s.Seq
	for _, group := range protocol.SplitRecords(recs) {
		if !c.enqueue(websocket.BinaryMessage, protocol.AppendDelta(nil, &protocol.DeltaFrame{Dataset: s.Dataset, Records: group})) {
			return subCut
		}
		sent = group[len(group)-1].Seq
	}
	c.sendMsg(&protocol.Message{Type: protocol.TCatchupEnd, Dataset: s.Dataset, Seq: sent})
	c.mu.Lock()
	c.subs[s.Dataset] = sent
	c.mu.Unlock()
	if s.Snapshot != head.Snapshot {
		// The client now holds every delta the server's snapshot covers:
		// it can rebase by compacting locally.
		c.sendMsg(&protocol.Message{Type: protocol.TSnapshot, Dataset: s.Dataset, Manifest: m, Reason: "newer snapshot"})
	}
	return subCaughtUp
}

// chainKey names the records a history chain covers.
type chainKey struct {
	dataset, snapshot string
	epoch, base, seq  uint64
}

// maxChains bounds the chain cache; it is emptied when full.
const maxChains = 1024

// chain returns the server's protocol.Chain over the records (s.Base,
// s.Seq] on s.Snapshot, or false when its history does not reach back to
// s.Base. Records at or below the head never change within an epoch, so
// the result is cached: a reconnecting crowd of companions at the same
// state costs one pass over the history, not one each. The caller holds
// the dataset's lock.
func (h *Hub) chain(s protocol.Sub, epoch uint64) (string, bool) {
	k := chainKey{s.Dataset, s.Snapshot, epoch, s.Base, s.Seq}
	h.cmu.Lock()
	v, ok := h.chains[k]
	h.cmu.Unlock()
	if ok {
		return v, true
	}
	hist, ok := h.src.Since(s.Dataset, s.Base)
	if !ok {
		return "", false
	}
	n := 0
	for n < len(hist) && hist[n].Seq <= s.Seq {
		n++
	}
	v = protocol.Chain(s.Snapshot, hist[:n])
	h.cmu.Lock()
	if len(h.chains) >= maxChains {
		clear(h.chains)
	}
	h.chains[k] = v
	h.cmu.Unlock()
	return v, true
}

// Publish sends records (already durable and applied on the server) to
// every subscriber of dataset. Records a subscriber already got through
// its catch-up are skipped. Each frame is encoded once for all; a
// subscriber that keeps up gets it in a direct write from here, not
// through its writer goroutine (wsconn.Conn.SendFramed), so a row wakes
// no writer; beyond fanChunk subscribers the writes are shared by a few
// goroutines, fanChunk subscribers each. In a burst (the dataset's last
// Publish ended less than burstWindow ago) the frames are queued
// instead, and each writer writes what queued up in one write: a burst
// of rows costs a subscriber a wakeup and a write per batch, not a
// write per row.
func (h *Hub) Publish(dataset string, recs []format.Record) {
	if len(recs) == 0 {
		return
	}
	l := h.dsLock(dataset)
	l.Lock()
	defer l.Unlock()
	p := publication{dataset: dataset, recs: recs, direct: time.Since(l.published) >= burstWindow}
	defer func() { l.published = time.Now() }()
	for _, group := range protocol.SplitRecords(recs) {
		p.frames = append(p.frames, wsconn.Frame(websocket.BinaryMessage, protocol.AppendDelta(nil, &protocol.DeltaFrame{Dataset: dataset, Records: group})))
		p.lasts = append(p.lasts, group[len(group)-1].Seq)
	}
	conns := h.snapshotConns()
	var wg sync.WaitGroup
	for len(conns) > fanChunk {
		part := conns[:fanChunk]
		conns = conns[fanChunk:]
		wg.Go(func() { h.publishAll(part, &p) })
	}
	h.publishAll(conns, &p)
	wg.Wait()
}

// publishAll sends p to conns, yielding the processor every fanYield
// subscribers: a fan-out's writes are a long run of syscalls, and the
// goroutines of other requests (an ingest's answer) should not wait for
// the scheduler's 10 ms preemption to get a turn.
func (h *Hub) publishAll(conns []*conn, p *publication) {
	for i, c := range conns {
		if i > 0 && i%fanYield == 0 {
			runtime.Gosched()
		}
		h.publishTo(c, p)
	}
}

// fanYield is how many subscribers publishAll writes to between yields.
const fanYield = 32

// fanChunk is how many subscribers one goroutine of a Publish writes to.
const fanChunk = 512

// burstWindow: a Publish that starts less than this long after the
// dataset's previous one ended is part of a burst.
const burstWindow = 2 * time.Millisecond

// publication is one Publish: its records and their frames (made by
// wsconn.Frame), with each frame's last seq.
type publication struct {
	dataset string
	recs    []format.Record
	frames  [][]byte
	lasts   []uint64
	direct  bool // not in a burst: write directly (SendFramed)
}

// publishTo sends c the frames of p it has not had yet. The caller holds
// the dataset's lock.
func (h *Hub) publishTo(c *conn, p *publication) {
	c.mu.Lock()
	sent, ok := c.subs[p.dataset]
	c.mu.Unlock()
	if !ok {
		return
	}
	first := p.recs[0].Seq
	for i, f := range p.frames {
		if p.lasts[i] <= sent {
			continue
		}
		if sent >= first {
			// Partly delivered by the catch-up: re-encode the tail.
			var tail []format.Record
			for _, r := range p.recs {
				if r.Seq > sent && r.Seq <= p.lasts[i] {
					tail = append(tail, r)
				}
			}
			f = wsconn.Frame(websocket.BinaryMessage, protocol.AppendDelta(nil, &protocol.DeltaFrame{Dataset: p.dataset, Records: tail}))
		}
		if !c.enqueueFramed(f, p.direct) {
			break
		}
		h.deltasOut.Add(1)
		sent = p.lasts[i]
	}
	c.mu.Lock()
	if _, still := c.subs[p.dataset]; still {
		c.subs[p.dataset] = sent
	}
	c.mu.Unlock()
}

// Change says what a snapshot newly in service means for its subscribers.
type Change int

const (
	// Compacted: the same epoch folded further; live deltas go on after
	// the snapshot's covers.
	Compacted Change = iota
	// Replaced: a new epoch (a PUT, a rollback, another vintage installed
	// from the lake); no deltas reach a subscriber until it subscribes
	// again on the new epoch.
	Replaced
)

// String is the snapshot message's reason on the wire.
func (c Change) String() string {
	if c == Replaced {
		return "replaced"
	}
	return "compacted"
}

// Announce tells every subscriber of dataset that a new snapshot is in
// service.
func (h *Hub) Announce(dataset string, m *format.Manifest, change Change) {
	l := h.dsLock(dataset)
	l.Lock()
	defer l.Unlock()
	msg := (&protocol.Message{Type: protocol.TSnapshot, Dataset: dataset, Manifest: m, Reason: change.String()}).Encode()
	for _, c := range h.snapshotConns() {
		c.mu.Lock()
		_, ok := c.subs[dataset]
		if ok && change == Replaced {
			delete(c.subs, dataset) // no deltas until it resubscribes on the new epoch
		}
		c.mu.Unlock()
		if ok {
			c.enqueue(websocket.TextMessage, msg)
		}
	}
}

// Heartbeat sends every connection the heads (clients use it for lag).
func (h *Hub) Heartbeat() {
	msg := (&protocol.Message{Type: protocol.THeartbeat, Heads: h.src.Heads()}).Encode()
	for _, c := range h.snapshotConns() {
		c.enqueue(websocket.TextMessage, msg)
	}
}

func (h *Hub) snapshotConns() []*conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*conn, 0, len(h.conns))
	for c := range h.conns {
		out = append(out, c)
	}
	return out
}

// Close disconnects everyone.
func (h *Hub) Close() {
	for _, c := range h.snapshotConns() {
		c.close("server shutting down")
	}
}

// startFetch streams a file in the background. A fetch of a file that is
// already streaming to this client (it re-asks from a chunk that failed
// its hash) stops the earlier stream, which would otherwise send the rest
// of the file a second time.
func (c *conn) startFetch(m *protocol.Message) {
	key := m.Dataset + "/" + m.SHA256
	stop := make(chan struct{})
	c.fmu.Lock()
	if old := c.fetches[key]; old != nil {
		close(old)
	}
	c.fetches[key] = stop
	c.fmu.Unlock()
	go func() {
		c.fetch(m, stop)
		c.fmu.Lock()
		if c.fetches[key] == stop {
			delete(c.fetches, key)
		}
		c.fmu.Unlock()
	}()
}

// openFetch opens the file a fetch names: one of the dataset's retained
// snapshots, or else (version 3) one of the vintage m.Snapshot.
func (c *conn) openFetch(m *protocol.Message) (ReadAtCloser, error) {
	f, err := c.h.src.OpenFile(m.Dataset, m.SHA256)
	if err == nil {
		return f, nil
	}
	v, ok := c.h.src.(Vintages)
	if !ok || m.Snapshot == "" {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
	defer cancel()
	return v.OpenVintageFile(ctx, m.Dataset, m.Snapshot, m.SHA256)
}

// fetch streams a snapshot file from an offset as chunk frames, then a
// file_end message, until stop closes.
func (c *conn) fetch(m *protocol.Message, stop <-chan struct{}) {
	f, err := c.openFetch(m)
	if err != nil {
		c.sendMsg(&protocol.Message{Type: protocol.TError, Dataset: m.Dataset, File: m.File, SHA256: m.SHA256, Reason: "fetch: " + err.Error()})
		return
	}
	defer f.Close()
	var sum [32]byte
	if _, err := hex.Decode(sum[:], []byte(m.SHA256)); err != nil {
		return
	}
	off := m.Offset
	for {
		// Read the file straight into the frame, after room for the
		// header (AppendChunk then leaves the data where it is).
		bp := chunkBufs.Get().(*[]byte)
		buf := *bp
		n, err := f.ReadAt(buf[protocol.ChunkHeader:], off)
		if n > 0 {
			frame := protocol.AppendChunk(buf[:0], &protocol.Chunk{SHA256: sum, Offset: off, Data: buf[protocol.ChunkHeader : protocol.ChunkHeader+n]})
			if c.w.SendWait(websocket.BinaryMessage, frame, func() { chunkBufs.Put(bp) }, stop) != nil {
				return // closing, or stopped
			}
			off += int64(n)
		} else {
			chunkBufs.Put(bp)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			c.sendMsg(&protocol.Message{Type: protocol.TError, Dataset: m.Dataset, File: m.File, Reason: "read: " + err.Error()})
			return
		}
	}
	// file_end goes through the bulk queue so it follows the last chunk.
	end := (&protocol.Message{Type: protocol.TFileEnd, Dataset: m.Dataset, File: m.File, SHA256: m.SHA256, Offset: off}).Encode()
	c.w.SendWait(websocket.TextMessage, end, nil, stop)
}

// startRequest answers a vintage or revisions request in the background
// (resolving a vintage may read the catalog and map its files), waiting
// while maxRequests of this connection are in progress.
func (c *conn) startRequest(m *protocol.Message) {
	select {
	case c.reqs <- struct{}{}:
	case <-c.ctx.Done():
		return
	}
	go func() {
		defer func() { <-c.reqs }()
		c.sendMsg(c.h.answer(c.ctx, m))
	}()
}

// answer is the reply to a vintage or revisions request.
func (h *Hub) answer(ctx context.Context, m *protocol.Message) *protocol.Message {
	v, ok := h.src.(Vintages)
	if !ok {
		return &protocol.Message{Type: protocol.TError, Req: m.Req, Dataset: m.Dataset, Code: protocol.ErrorNoLake,
			Reason: "this server keeps no vintages (it runs without a lake)"}
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var err error
	switch m.Type {
	case protocol.TVintage:
		var vi protocol.VintageInfo
		var man *format.Manifest
		if vi, man, err = v.Vintage(ctx, m.Dataset, m.AsOf); err == nil {
			return &protocol.Message{Type: protocol.TVintage, Req: m.Req, Dataset: m.Dataset, AsOf: m.AsOf, Vintage: &vi, Manifest: man}
		}
	case protocol.TRevisions:
		var revs []protocol.Revision
		if revs, err = v.Revisions(ctx, m.Dataset, m.Series, m.Period); err == nil {
			return &protocol.Message{Type: protocol.TRevisions, Req: m.Req, Dataset: m.Dataset, Series: m.Series, Period: m.Period, Revisions: revs}
		}
	}
	out := &protocol.Message{Type: protocol.TError, Req: m.Req, Dataset: m.Dataset, Reason: err.Error()}
	var re *RequestError
	if errors.As(err, &re) {
		out.Code = re.Code
	}
	h.opts.Logger.Debug("request failed", "type", m.Type, "dataset", m.Dataset, "code", out.Code, "reason", out.Reason)
	return out
}
