package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/energyscope/energyscope/internal/wsconn"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/sync/protocol"
)

// session runs one connection. live reports whether it got as far as
// being current, or verified a chunk of a download (to reset the backoff:
// a download over a link that keeps dropping makes progress with every
// connection and must not wait longer and longer between them).
func (e *Engine) session(ctx context.Context, server string) (live bool, err error) {
	u, err := url.Parse(server)
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
			e.Stats.Unauthorized.Add(1)
			return false, ErrUnauthorized
		}
		return false, err
	}
	ws.SetReadLimit(protocol.MaxFrame)
	e.Stats.Sessions.Add(1)
	e.mu.Lock()
	e.conn = ws
	e.mu.Unlock()
	// The server's pings (its ping handler, in run) and messages push the
	// read deadline; the writer only writes and pings.
	w := wsconn.New(ws, wsconn.Options{BulkQueue: 64, WriteTimeout: 15 * time.Second, PingInterval: 25 * time.Second})
	s := &session{e: e, ws: ws, w: w, done: make(chan struct{}), dl: map[string]*download{}, catchup: map[string][]format.Record{}, caughtUp: map[string]bool{}, snapAnswer: map[string]string{}, healing: map[string]bool{}}
	defer func() {
		s.closeDownloads()
		ws.Close() // no close frame: the writer's ends at once on the closed socket
		close(s.done)
		w.Shutdown(wsconn.Reason{})
		e.mu.Lock()
		e.conn = nil
		e.mu.Unlock()
	}()
	defer e.vint.ended(s)
	go s.watchdog()
	stop := context.AfterFunc(ctx, func() { ws.Close() })
	defer stop()
	live, err = s.run()
	return live || s.verified, err
}

// session is one connection's state; only its reader goroutine touches it
// (writes go through w, the connection's one writer).
type session struct {
	e    *Engine
	ws   *websocket.Conn
	w    *wsconn.Conn
	done chan struct{}
	live bool

	dl      map[string]*download       // dataset -> download in progress
	catchup map[string][]format.Record // dataset -> records buffered until catchup_end
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
				s.e.Stats.WelcomeTimeouts.Add(1)
				s.e.log.Warn("no welcome from the server; reconnecting", "after", welcome)
				s.ws.Close()
				return
			}
			if s.downloading.Load() > 0 && time.Since(time.Unix(0, s.progressAt.Load())) > stall {
				s.e.Stats.Stalls.Add(1)
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
	s.w.SendWait(websocket.TextMessage, m.Encode(), nil, s.done)
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
			e.Stats.Malformed.Add(1)
			e.log.Warn("refusing malformed message from server", "err", err)
			return s.live, &MalformedError{Err: err}
		}
		switch m.Type {
		case protocol.TWelcome:
			s.welcomed.Store(true)
			if m.Version < protocol.VersionMin || m.Version > protocol.VersionMax {
				e.log.Warn("refusing welcome: protocol version not spoken here", "version", m.Version, "min", protocol.VersionMin, "max", protocol.VersionMax)
				return s.live, fmt.Errorf("%w: server chose protocol version %d; this client speaks %d..%d", ErrProtocolVersion, m.Version, protocol.VersionMin, protocol.VersionMax)
			}
			s.onHeads(m.Heads)
			e.vint.welcomed(s, m.Version, m.Heads)
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
			s.catchup[m.Dataset] = []format.Record{}
			e.update(func(_ *Progress, ds func(string) *DatasetProgress) { ds(m.Dataset).State = StateCatchingUp })
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
			// The store's seq, not only what this session applied: an
			// empty catch-up (the store already had everything) applies
			// nothing, and the progress would keep the seq it started with.
			_, _, held, ok := e.sink.State(m.Dataset)
			e.update(func(p *Progress, ds func(string) *DatasetProgress) {
				d := ds(m.Dataset)
				d.State = StateLive
				if ok && held > d.Seq {
					d.Seq = held
				}
				d.setLag()
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
		case protocol.TVintage, protocol.TRevisions:
			s.onRequestAnswer(m)
		case protocol.TError:
			if m.Req != 0 {
				s.onRequestAnswer(m) // a vintage or revisions request failed
				break
			}
			e.log.Warn("server error", "dataset", m.Dataset, "reason", m.Reason)
			if m.File != "" && s.vintageFetchFailed(m) {
				break
			}
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
	s.e.vint.setHeads(heads)
	s.e.update(func(_ *Progress, ds func(string) *DatasetProgress) {
		for _, h := range heads {
			if !s.want(h.Dataset) {
				continue
			}
			d := ds(h.Dataset)
			d.HeadSeq = h.Seq
			d.setLag()
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
		s.e.Stats.Malformed.Add(1)
		s.e.log.Warn("refusing malformed frame from server", "err", err)
		return &MalformedError{Frame: true, Err: err}
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
