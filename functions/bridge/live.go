package bridge

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/energyscope/energyscope/functions"
	"github.com/energyscope/energyscope/internal/wsconn"
)

// ChangeFeed tells the bridge which series changed, so that ES.Live cells
// update without polling. fn may be called from any goroutine and must
// not block; dataset is the dataset the ids belong to (the bridge matches
// both "id" and "dataset:id" subscriptions). Calling fn with a nil ids
// slice means "anything in dataset may have changed" (a snapshot swap).
type ChangeFeed interface {
	Subscribe(fn func(dataset string, seriesIDs []string)) (cancel func())
}

// Websocket limits.
const (
	liveReadLimit   = 256 << 10 // one client message
	liveMaxSubs     = 10_000    // series per connection
	liveSendQueue   = 1024      // messages queued per connection before it is cut off as too slow
	livePingEvery   = 25 * time.Second
	liveWriteWait   = 10 * time.Second
	liveIdleTimeout = 2 * livePingEvery // no pong for this long: the client is gone
)

// liveStats are shown on /v1/status.
type liveStats struct {
	Clients int `json:"clients"`
	Series  int `json:"series"`
}

// hub fans series updates out to websocket clients. Each subscribed
// series keeps the last message sent for it, so a change notification
// that does not change the latest point sends nothing.
type hub struct {
	eng  *functions.Engine
	opts Options
	stop <-chan struct{}
	up   websocket.Upgrader

	wake    chan struct{}       // one slot: notify woke the loop
	pmu     sync.Mutex          // guards pending, pendAll
	pending map[string]struct{} // refs notified and not yet rechecked
	pendAll bool                // recheck every subscribed ref

	mu    sync.Mutex // guards subs, conns, fingerprint
	subs  map[string]*liveSeries
	conns map[*liveConn]struct{}
}

type liveSeries struct {
	conns map[*liveConn]struct{}
	last  []byte // the last message sent for this series
}

type liveConn struct {
	ws   *websocket.Conn
	w    *wsconn.Conn        // the connection's one writer
	refs map[string]struct{} // guarded by hub.mu
}

func newHub(eng *functions.Engine, o Options, stop <-chan struct{}) *hub {
	return &hub{
		eng:     eng,
		opts:    o,
		stop:    stop,
		wake:    make(chan struct{}, 1),
		pending: map[string]struct{}{},
		subs:    map[string]*liveSeries{},
		conns:   map[*liveConn]struct{}{},
		up: websocket.Upgrader{
			HandshakeTimeout: 10 * time.Second,
			Subprotocols:     []string{"es-live"},
			// Origin was checked by Server.authorize before the upgrade.
			CheckOrigin: func(*http.Request) bool { return true },
		},
	}
}

// start runs the loop that turns change notifications (or polls) into
// messages.
func (h *hub) start(wg *sync.WaitGroup) {
	var cancel func()
	if h.opts.Changes != nil {
		cancel = h.opts.Changes.Subscribe(h.notify)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if cancel != nil {
			defer cancel()
		}
		var tick <-chan time.Time
		if h.opts.Changes == nil {
			t := time.NewTicker(h.opts.PollInterval)
			defer t.Stop()
			tick = t.C
		}
		var fp string
		for {
			select {
			case <-h.stop:
				return
			case <-h.wake:
				if refs, ok := h.takePending(); ok {
					h.refresh(refs)
				}
			case <-tick:
				// Polling: recheck every subscribed series, but only when the
				// datasets' seqs or snapshots moved (if Status can tell).
				if h.opts.Status != nil {
					f, ok := fingerprint(h.opts.Status)
					if ok && f == fp {
						continue
					}
					fp = f
				}
				h.refresh(nil)
			}
		}
	}()
}

// fingerprint summarizes what the datasets serve: it changes with every
// applied update and every snapshot swap.
func fingerprint(st StatusSource) (string, bool) {
	ds, err := st.Datasets()
	if err != nil {
		return "", false
	}
	var b []byte
	for _, d := range ds {
		b = append(b, d.Name...)
		b = append(b, 0)
		b = append(b, d.SnapshotID...)
		b = append(b, 0)
		b = appendUint(b, d.Seq)
		b = append(b, 0)
	}
	return string(b), true
}

// notify is the ChangeFeed callback. It never blocks: changed refs
// accumulate in a set (past maxPending, a full recheck is asked instead)
// and the loop is woken through a one-slot channel.
func (h *hub) notify(dataset string, ids []string) {
	h.pmu.Lock()
	if ids == nil || len(h.pending)+2*len(ids) > maxPending {
		h.pendAll = true
		clear(h.pending)
	} else if !h.pendAll {
		for _, id := range ids {
			h.pending[id] = struct{}{}
			h.pending[dataset+":"+id] = struct{}{}
		}
	}
	h.pmu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

const maxPending = 100_000

// takePending returns the refs notified since the last call (nil: all).
func (h *hub) takePending() ([]string, bool) {
	h.pmu.Lock()
	defer h.pmu.Unlock()
	if h.pendAll {
		h.pendAll = false
		return nil, true
	}
	if len(h.pending) == 0 {
		return nil, false
	}
	refs := make([]string, 0, len(h.pending))
	for r := range h.pending {
		refs = append(refs, r)
	}
	clear(h.pending)
	return refs, true
}

// refresh recomputes the given subscribed refs (nil: all) and sends the
// ones whose message changed.
func (h *hub) refresh(refs []string) {
	h.mu.Lock()
	if refs == nil {
		refs = make([]string, 0, len(h.subs))
		for r := range h.subs {
			refs = append(refs, r)
		}
	} else {
		kept := refs[:0]
		for _, r := range refs {
			if h.subs[r] != nil {
				kept = append(kept, r)
			}
		}
		refs = kept
	}
	h.mu.Unlock()
	for _, ref := range refs {
		msg := h.message(ref)
		h.mu.Lock()
		ls := h.subs[ref]
		if ls != nil && !slices.Equal(ls.last, msg) {
			ls.last = msg
			for c := range ls.conns {
				h.sendLocked(c, msg)
			}
		}
		h.mu.Unlock()
	}
}

// message is the update for one series: {"series","value","date"} or
// {"series","error":{...}}, from ES.Latest(ref, "both").
func (h *hub) message(ref string) []byte {
	r := h.eng.Eval("ES.Latest", []any{ref, "both"})
	b := append([]byte(`{"series":`), appendString(nil, ref)...)
	var e encoder
	switch {
	case r.Err != nil:
		b = append(b, `,"error":`...)
		b = appendCellError(b, r.Err)
	case r.Grid.Rows == 1 && r.Grid.Cols == 2:
		b = append(b, `,"value":`...)
		b = e.cell(b, r.Grid.At(0, 1))
		b = append(b, `,"date":`...)
		b = e.cell(b, r.Grid.At(0, 0))
	default: // a ref holding several ids: the row of values
		b = append(b, `,"error":`...)
		b = appendCellError(b, &functions.CellError{Code: functions.CodeValue, Message: "ES.Live takes one series per subscription"})
	}
	return append(b, '}')
}

// sendLocked queues msg for c; a client that does not keep up is cut off
// (with a reason) rather than buffered without bound. h.mu is held.
func (h *hub) sendLocked(c *liveConn, msg []byte) {
	var slow *wsconn.SlowConsumerError
	if err := c.w.Send(websocket.TextMessage, msg); errors.As(err, &slow) {
		h.dropLocked(c)
		c.w.Close(wsconn.Reason{Code: websocket.CloseTryAgainLater, Text: "too slow: more than 1024 updates queued", Err: err})
	}
}

func (h *hub) dropLocked(c *liveConn) {
	delete(h.conns, c)
	for ref := range c.refs {
		if ls := h.subs[ref]; ls != nil {
			delete(ls.conns, c)
			if len(ls.conns) == 0 {
				delete(h.subs, ref)
			}
		}
	}
	c.refs = nil
}

// close sends the close frame (after what is queued, within a second)
// and closes the socket; the first reason wins.
func (c *liveConn) close(code int, reason string) {
	c.w.Close(wsconn.Reason{Code: code, Text: reason})
}

func (h *hub) stats() liveStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return liveStats{Clients: len(h.conns), Series: len(h.subs)}
}

func (h *hub) closeAll() {
	h.mu.Lock()
	conns := make([]*liveConn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
		h.dropLocked(c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		c.close(websocket.CloseGoingAway, "bridge shutting down")
	}
	for _, c := range conns {
		c.w.Wait() // bounded by the close deadline
	}
}

// liveRequest is what a client sends.
type liveRequest struct {
	Subscribe   []string `json:"subscribe"`
	Unsubscribe []string `json:"unsubscribe"`
}

// handle is GET /v1/live: the websocket.
func (h *hub) handle(w http.ResponseWriter, r *http.Request) {
	ws, err := h.up.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered
	}
	select {
	case <-h.stop:
		ws.Close()
		return
	default:
	}
	c := &liveConn{ws: ws, refs: map[string]struct{}{}}
	c.ws.SetReadLimit(liveReadLimit)
	// The writer pings; each pong and each message read pushes the read
	// deadline by liveIdleTimeout.
	c.w = wsconn.New(ws, wsconn.Options{Queue: liveSendQueue, WriteTimeout: liveWriteWait, PingInterval: livePingEvery, ReadTimeout: liveIdleTimeout, CloseTimeout: time.Second})
	h.mu.Lock()
	h.conns[c] = struct{}{}
	h.mu.Unlock()
	h.reader(c)
}

func (h *hub) disconnect(c *liveConn) {
	h.mu.Lock()
	h.dropLocked(c)
	h.mu.Unlock()
	c.close(websocket.CloseNormalClosure, "")
}

func (h *hub) reader(c *liveConn) {
	defer h.disconnect(c)
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		c.w.Touch()
		var req liveRequest
		if err := json.Unmarshal(data, &req); err != nil {
			h.reply(c, `{"error":{"code":"#VALUE!","message":"want {\"subscribe\":[ids]} or {\"unsubscribe\":[ids]}"}}`)
			continue
		}
		h.unsubscribe(c, req.Unsubscribe)
		if !h.subscribe(c, req.Subscribe) {
			return
		}
	}
}

func (h *hub) reply(c *liveConn, msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.conns[c]; ok {
		h.sendLocked(c, []byte(msg))
	}
}

func (h *hub) unsubscribe(c *liveConn, refs []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ref := range refs {
		ref = strings.TrimSpace(ref)
		if _, ok := c.refs[ref]; !ok {
			continue
		}
		delete(c.refs, ref)
		if ls := h.subs[ref]; ls != nil {
			delete(ls.conns, c)
			if len(ls.conns) == 0 {
				delete(h.subs, ref)
			}
		}
	}
}

// subscribe adds refs and sends each one's current value at once. It
// reports false when the connection is gone or over its limit.
func (h *hub) subscribe(c *liveConn, refs []string) bool {
	for _, ref := range refs {
		ref = strings.TrimSpace(ref)
		if ref == "" {
			continue
		}
		msg := h.message(ref)
		h.mu.Lock()
		if _, ok := h.conns[c]; !ok {
			h.mu.Unlock()
			return false
		}
		if _, ok := c.refs[ref]; !ok && len(c.refs) >= liveMaxSubs {
			h.dropLocked(c)
			h.mu.Unlock()
			c.close(websocket.ClosePolicyViolation, "too many subscriptions on one connection")
			return false
		}
		c.refs[ref] = struct{}{}
		ls := h.subs[ref]
		if ls == nil {
			ls = &liveSeries{conns: map[*liveConn]struct{}{}}
			h.subs[ref] = ls
		}
		ls.conns[c] = struct{}{}
		if slices.Equal(ls.last, msg) {
			h.sendLocked(c, msg)
		} else {
			// New, or changed since the others got theirs: everyone gets it.
			ls.last = msg
			for o := range ls.conns {
				h.sendLocked(o, msg)
			}
		}
		h.mu.Unlock()
	}
	return true
}
