//go:build !windows

package hub_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/hub"
	"github.com/energyscope/energyscope/sync/protocol"
)

// countingHandler counts log records (of every level); tests compare
// counts, never the words.
type countingHandler struct{ n atomic.Int64 }

func (h *countingHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (h *countingHandler) Handle(context.Context, slog.Record) error { h.n.Add(1); return nil }
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h *countingHandler) WithGroup(string) slog.Handler             { return h }

// settle waits (at most 10 s) for a record after the count from, then
// 200 ms more for any that follow, and returns the count.
func (h *countingHandler) settle(from int64) int64 {
	for deadline := time.Now().Add(10 * time.Second); h.n.Load() == from && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	return h.n.Load()
}

// TestSubscribeLogsOneLinePerMessage: a subscribe with many entries is
// answered entry by entry but logged once; one beyond protocol.MaxSubs
// entries is refused with a clear error and a single log line (20,000
// entries used to write 20,001 lines).
func TestSubscribeLogsOneLinePerMessage(t *testing.T) {
	logs := &countingHandler{}
	srv, err := server.New(server.Options{Home: t.TempDir(), Logger: slog.New(logs), CompactRows: -1, CompactBytes: -1,
		Hub: hub.Options{SendQueue: 4 * protocol.MaxSubs}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Replace("stocks", []string{stocksCSV}, stocksOpts); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close(); srv.Close() })
	url := "ws" + strings.TrimPrefix(hs.URL, "http") + "/v1/sync"
	dial := func() *websocket.Conn {
		ws, _, err := websocket.DefaultDialer.Dial(url, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.Close() })
		return ws
	}

	// At the limit: every entry is answered (no local snapshot: rebase).
	ws := dial()
	before := logs.n.Load()
	send(t, ws, hello())
	if err := readUntil(ws, 30*time.Second, func(kind int, b []byte) bool {
		m, err := protocol.DecodeMessage(b)
		return err == nil && m.Type == protocol.TWelcome
	}); err != nil {
		t.Fatal(err)
	}
	// The hello's own line may follow its welcome: let it land first.
	before = logs.settle(before)
	subs := make([]protocol.Sub, protocol.MaxSubs)
	for i := range subs {
		subs[i] = protocol.Sub{Dataset: "stocks"}
	}
	send(t, ws, &protocol.Message{Type: protocol.TSubscribe, Subs: subs})
	answers := 0
	if err := readUntil(ws, 30*time.Second, func(kind int, b []byte) bool {
		if m, err := protocol.DecodeMessage(b); err == nil && m.Type == protocol.TSnapshot {
			answers++
		}
		return answers == len(subs)
	}); err != nil {
		t.Fatalf("%d of %d answers: %v", answers, len(subs), err)
	}
	// The hub logs the message's one line after it queued the last answer,
	// so the client can read every answer before the line is written.
	if n := logs.settle(before) - before; n != 1 {
		t.Errorf("a subscribe of %d entries wrote %d log records, want 1", len(subs), n)
	}

	// Beyond it: refused, with the reason, in one line.
	ws = dial()
	send(t, ws, hello())
	before = logs.n.Load()
	subs = make([]protocol.Sub, 20000)
	for i := range subs {
		subs[i] = protocol.Sub{Dataset: "stocks"}
	}
	send(t, ws, &protocol.Message{Type: protocol.TSubscribe, Subs: subs})
	var refusal string
	err = readUntil(ws, 30*time.Second, func(kind int, b []byte) bool {
		if m, err := protocol.DecodeMessage(b); err == nil && m.Type == protocol.TError {
			refusal = m.Reason
		}
		return false
	})
	var ce *websocket.CloseError
	if !errors.As(err, &ce) {
		t.Fatalf("connection ended with %v, want a close frame", err)
	}
	if !strings.Contains(refusal, protocol.ErrTooManySubs.Error()) {
		t.Errorf("error message %q does not say %q", refusal, protocol.ErrTooManySubs)
	}
	// The refusal and the close are logged once each, not per entry.
	time.Sleep(200 * time.Millisecond)
	if n := logs.n.Load() - before; n > 3 {
		t.Errorf("a refused subscribe of %d entries wrote %d log records, want at most 3", len(subs), n)
	}
	if _, err := protocol.DecodeMessage((&protocol.Message{Type: protocol.TSubscribe, Subs: subs}).Encode()); !errors.Is(err, protocol.ErrTooManySubs) || !errors.Is(err, protocol.ErrMalformed) {
		t.Errorf("DecodeMessage of %d entries: %v, want ErrTooManySubs and ErrMalformed", len(subs), err)
	}
}
