package server

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/sync/protocol"
)

// TestSyncSubscribeDamagedDataset: a companion subscribed to a dataset
// that is damaged on the server (here its CURRENT is lost) got the same
// untyped "unknown dataset" error as for a name the server never had.
// Now the error carries a typed code (protocol.ErrorDamaged, with the
// reason; ErrorUnknownDataset for an unknown name), and the connection
// carries on (the companion keeps serving its copy).
func TestSyncSubscribeDamagedDataset(t *testing.T) {
	home := t.TempDir()
	ls := startLive(t, home, Options{})
	if code, body := ls.do("PUT", "/v1/datasets/stocks"+stocksQuery, ls.write, "text/csv", bytes.NewReader(stocksBody(t))); code != 200 {
		t.Fatalf("upload: %d %s", code, body)
	}
	if code, body := ls.do("PUT", "/v1/datasets/other"+stocksQuery, ls.write, "text/csv", bytes.NewReader(stocksBody(t))); code != 200 {
		t.Fatalf("upload: %d %s", code, body)
	}
	read, write := ls.read, ls.write
	ls.close()
	if err := os.Remove(filepath.Join(home, localcache.DatasetsDir, "stocks", format.CurrentFile)); err != nil {
		t.Fatal(err)
	}
	ls = startLive(t, home, Options{})
	ls.read, ls.write = read, write

	ws, _, err := (&websocket.Dialer{HandshakeTimeout: 10 * time.Second}).Dial("ws://"+ls.addr+"/v1/sync", http.Header{"Authorization": {"Bearer " + ls.read}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	send := func(m *protocol.Message) {
		t.Helper()
		if err := ws.WriteMessage(websocket.TextMessage, m.Encode()); err != nil {
			t.Fatal(err)
		}
	}
	send(&protocol.Message{Type: protocol.THello, Proto: []int{protocol.VersionMin, protocol.VersionMax}, Client: "damaged-test",
		Subs: []protocol.Sub{{Dataset: "stocks", Epoch: 1, Snapshot: "s1", Seq: 0}, {Dataset: "nosuch"}, {Dataset: "other"}}})
	errs := map[string]*protocol.Message{}
	var welcome, snapshot, heartbeat bool
	ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	for !(welcome && snapshot && len(errs) == 2 && heartbeat) {
		typ, b, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("read (welcome %v, snapshot %v, errors %v, heartbeat %v): %v", welcome, snapshot, errs, heartbeat, err)
		}
		if typ != websocket.TextMessage {
			continue
		}
		m, err := protocol.DecodeMessage(b)
		if err != nil {
			t.Fatal(err)
		}
		switch m.Type {
		case protocol.TWelcome:
			welcome = true
		case protocol.TSnapshot:
			if m.Dataset != "other" {
				t.Fatalf("snapshot for %q", m.Dataset)
			}
			snapshot = true
			send(&protocol.Message{Type: protocol.TPing}) // the connection still answers
		case protocol.TError:
			errs[m.Dataset] = m
		case protocol.THeartbeat:
			heartbeat = snapshot
		}
	}
	if m := errs["stocks"]; m.Code != protocol.ErrorDamaged || m.Reason == "" {
		t.Errorf("damaged dataset: error %+v, want code %q with a reason", m, protocol.ErrorDamaged)
	}
	if m := errs["nosuch"]; m.Code != protocol.ErrorUnknownDataset {
		t.Errorf("unknown dataset: error %+v, want code %q", m, protocol.ErrorUnknownDataset)
	}
}
