//go:build !windows

package hub_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/energyscope/energyscope/sync/protocol"
)

// readMsg reads control messages until one of type typ (or the connection
// ends).
func readMsg(t *testing.T, ws *websocket.Conn, typ string) *protocol.Message {
	t.Helper()
	var got *protocol.Message
	if err := readUntil(ws, 30*time.Second, func(kind int, b []byte) bool {
		if kind != websocket.TextMessage {
			return false
		}
		m, err := protocol.DecodeMessage(b)
		if err != nil {
			t.Fatalf("undecodable message from the server: %v", err)
		}
		got = m
		return m.Type == typ
	}); err != nil {
		t.Fatalf("waiting for %s: %v", typ, err)
	}
	return got
}

// TestVersionNegotiation: a version 2 client gets version 2 (and keeps
// working: it subscribes and catches up); a client speaking 2..3 gets 3.
func TestVersionNegotiation(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	for _, tc := range []struct {
		proto []int
		want  int
	}{{[]int{2, 2}, 2}, {[]int{2, 3}, 3}, {[]int{3, 3}, 3}, {[]int{2, 9}, 3}} {
		ws := f.mustDial("")
		send(t, ws, &protocol.Message{Type: protocol.THello, Proto: tc.proto, Client: "v", Subs: []protocol.Sub{f.headSub("stocks")}})
		if w := readMsg(t, ws, protocol.TWelcome); w.Version != tc.want {
			t.Errorf("proto %v: welcome version %d, want %d", tc.proto, w.Version, tc.want)
		}
		if e := readMsg(t, ws, protocol.TCatchupEnd); e.Dataset != "stocks" {
			t.Errorf("proto %v: catch-up of %q", tc.proto, e.Dataset)
		}
		seq := f.ingest(1)
		if err := waitDelta(ws, seq, 10*time.Second); err != nil {
			t.Errorf("proto %v: no live delta: %v", tc.proto, err)
		}
		ws.Close()
	}
}

// TestVintageRequestsWithoutLake: on a server without a lake, version 3's
// requests are answered error{code: no_lake} carrying the request id, and
// the connection goes on (live deltas still arrive).
func TestVintageRequestsWithoutLake(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	ws := f.subscribed("")
	send(t, ws, &protocol.Message{Type: protocol.TVintage, Req: 41, Dataset: "stocks", AsOf: "2026-10-01"})
	send(t, ws, &protocol.Message{Type: protocol.TRevisions, Req: 42, Dataset: "stocks", Series: "AAPL", Period: "2026-10-01"})
	got := map[uint64]protocol.Code{}
	for len(got) < 2 {
		m := readMsg(t, ws, protocol.TError)
		if m.Code != protocol.ErrorNoLake || !strings.Contains(m.Reason, "no vintages") {
			t.Errorf("error %+v, want code no_lake", m)
		}
		got[m.Req] = m.Code
	}
	if _, ok := got[41]; !ok {
		t.Errorf("no answer to req 41: %v", got)
	}
	seq := f.ingest(1)
	if err := waitDelta(ws, seq, 10*time.Second); err != nil {
		t.Fatalf("no live delta after the requests: %v", err)
	}
}

// TestVintageRequestRefusedOnVersion2: a client that negotiated version 2
// and sends a version 3 request broke the protocol: the connection is
// closed naming the versions.
func TestVintageRequestRefusedOnVersion2(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	ws := f.mustDial("")
	send(t, ws, &protocol.Message{Type: protocol.THello, Proto: []int{2, 2}, Client: "old"})
	readMsg(t, ws, protocol.TWelcome)
	send(t, ws, &protocol.Message{Type: protocol.TVintage, Req: 1, Dataset: "stocks", AsOf: "2026-10-01"})
	_, text, msgs, err := closeReason(ws)
	if err != nil {
		t.Fatalf("no close frame: %v (%q)", err, msgs)
	}
	if !strings.Contains(text, "protocol version 2; it needs 3") {
		t.Errorf("closed with %q", text)
	}
}
