package client_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/sync/client"
	"github.com/energyscope/energyscope/sync/protocol"
)

// syncedStore returns a companion store that holds the stocks sample,
// synced from a server that requires tokens, and the server.
func syncedStore(t *testing.T) (*localcache.Store, *rig, string) {
	t.Helper()
	tokens, err := server.LoadTokens(filepath.Join(t.TempDir(), server.TokensFile))
	if err != nil {
		t.Fatal(err)
	}
	read, err := tokens.Add("r", server.ScopeRead)
	if err != nil {
		t.Fatal(err)
	}
	r := newStocksRig(t, tokens)
	st := openCompStore(t, t.TempDir())
	c := startComp(t, st, nil, client.Options{Server: r.hs.URL, Token: read})
	head, _, _ := r.srv.Head("stocks")
	c.waitState(head.Snapshot, 0, 20*time.Second)
	c.stop()
	return st, r, read
}

func stillServing(t *testing.T, st *localcache.Store) {
	t.Helper()
	jan2000 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	if v, ok := value(st, "MSFT", jan2000); !ok || v != 39.81 {
		t.Fatalf("local data no longer serving: MSFT Jan 2000 = %v %v", v, ok)
	}
}

// TestWrongTokenKeepsServing: a wrong or missing token is refused with 401
// at the upgrade; the engine reports it, keeps retrying, and the local
// data keeps serving.
func TestWrongTokenKeepsServing(t *testing.T) {
	st, r, _ := syncedStore(t)
	for _, tok := range []string{"", "es_wrong"} {
		c := startComp(t, st, nil, client.Options{Server: r.hs.URL, Token: tok, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
		waitFor(t, 20*time.Second, "two refused attempts", func() bool {
			return c.eng.Metrics().Unauthorized >= 2
		})
		p := c.eng.Progress()
		if p.Online || !errors.Is(p.Err, client.ErrUnauthorized) || p.LastError != client.ErrUnauthorized.Error() {
			t.Fatalf("token %q: progress %+v", tok, p)
		}
		stillServing(t, st)
		c.stop()
	}
}

// fakeServer is a websocket endpoint that misbehaves in a chosen way after
// the client's hello.
type fakeServer struct {
	hs    *httptest.Server
	conns atomic.Int32
}

func newFakeServer(t *testing.T, misbehave func(ws *websocket.Conn, hello *protocol.Message)) *fakeServer {
	f := &fakeServer{}
	up := websocket.Upgrader{}
	f.hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		f.conns.Add(1)
		_, b, err := ws.ReadMessage()
		if err != nil {
			return
		}
		m, err := protocol.DecodeMessage(b)
		if err != nil {
			return
		}
		misbehave(ws, m)
		// Hold the connection until the client drops it.
		ws.SetReadDeadline(time.Now().Add(30 * time.Second))
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	}))
	t.Cleanup(func() { f.hs.CloseClientConnections(); f.hs.Close() })
	return f
}

// TestMalformedFromServerKeepsServing: a server that sends malformed
// control messages, unknown frame kinds, invalid deltas, oversize frames
// or a protocol version the client does not speak is refused (the
// engine's error says which, as a type), the client reconnects later, and
// the local data keeps serving all along.
func TestMalformedFromServerKeepsServing(t *testing.T) {
	// message and frame: a control message or a binary frame refused as
	// malformed.
	message := func(err error) bool {
		var me *client.MalformedError
		return errors.As(err, &me) && !me.Frame && errors.Is(err, protocol.ErrMalformed)
	}
	frame := func(err error) bool {
		var me *client.MalformedError
		return errors.As(err, &me) && me.Frame && errors.Is(err, protocol.ErrMalformed)
	}
	st, _, _ := syncedStore(t)
	_, snap, seq, err := st.State("stocks")
	if err != nil {
		t.Fatal(err)
	}
	welcome := func(version int) []byte {
		return (&protocol.Message{Type: protocol.TWelcome, Version: version, Heads: []protocol.Head{{Dataset: "stocks", Epoch: 1, Snapshot: snap, Seq: seq}}}).Encode()
	}
	for _, tc := range []struct {
		name    string
		send    func(ws *websocket.Conn)
		refused func(err error) bool // the session's error (Progress.Err)
	}{
		{"not json", func(ws *websocket.Conn) {
			ws.WriteMessage(websocket.TextMessage, protocol.SealControl([]byte(`{"type":"welcome","heads":[{"dataset":"st}`)))
		}, func(err error) bool {
			var syn *json.SyntaxError
			return message(err) && errors.As(err, &syn)
		}},
		{"unknown type", func(ws *websocket.Conn) {
			ws.WriteMessage(websocket.TextMessage, protocol.SealControl([]byte(`{"type":"surprise"}`)))
		}, func(err error) bool { return message(err) && errors.Is(err, protocol.ErrUnknownType) }},
		{"unknown frame kind", func(ws *websocket.Conn) {
			ws.WriteMessage(websocket.TextMessage, welcome(protocol.VersionMax))
			ws.WriteMessage(websocket.BinaryMessage, []byte{9, 1, 2, 3})
		}, func(err error) bool { return frame(err) && errors.Is(err, protocol.ErrUnknownFrame) }},
		{"deltas out of order", func(ws *websocket.Conn) {
			ws.WriteMessage(websocket.TextMessage, welcome(protocol.VersionMax))
			recs := []format.Record{row("T", 1, 1), row("T", 2, 2)}
			recs[0].Seq, recs[1].Seq = seq+2, seq+1
			ws.WriteMessage(websocket.BinaryMessage, protocol.AppendDelta(nil, &protocol.DeltaFrame{Dataset: "stocks", Records: recs}))
		}, func(err error) bool { return frame(err) && errors.Is(err, format.ErrBadRecord) }},
		{"oversize frame", func(ws *websocket.Conn) {
			ws.WriteMessage(websocket.TextMessage, welcome(protocol.VersionMax))
			ws.WriteMessage(websocket.BinaryMessage, append([]byte{protocol.KindChunk}, bytes.Repeat([]byte{0}, protocol.MaxFrame)...))
		}, func(err error) bool { return errors.Is(err, websocket.ErrReadLimit) }},
		{"unknown protocol version", func(ws *websocket.Conn) {
			ws.WriteMessage(websocket.TextMessage, welcome(protocol.VersionMax+1))
		}, func(err error) bool { return errors.Is(err, client.ErrProtocolVersion) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t, func(ws *websocket.Conn, _ *protocol.Message) { tc.send(ws) })
			c := startComp(t, st, nil, client.Options{Server: f.hs.URL, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
			var mu sync.Mutex
			var errs []error // each session's error, as the engine reports it
			c.eng.OnProgress(func(p client.Progress) {
				mu.Lock()
				defer mu.Unlock()
				if p.Err != nil && (len(errs) == 0 || errs[len(errs)-1] != p.Err) {
					errs = append(errs, p.Err)
				}
			})
			waitFor(t, 20*time.Second, "the client to refuse and reconnect", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return f.conns.Load() >= 2 && slices.ContainsFunc(errs, tc.refused)
			})
			stillServing(t, st)
			if _, s2, q2, _ := st.State("stocks"); s2 != snap || q2 != seq {
				t.Fatalf("state changed to %s seq %d", s2, q2)
			}
			if c.eng.Metrics().Reconnects == 0 {
				t.Fatal("no reconnect logged")
			}
			c.stop()
		})
	}
}
