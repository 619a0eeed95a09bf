//go:build !windows

package hub_test

import (
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server/hub"
	"github.com/energyscope/energyscope/sync/protocol"
)

// fanSource is a Source of one dataset, "fan", at head seq (no history:
// subscribers say hello at the head).
type fanSource struct{ seq atomic.Uint64 }

func (s *fanSource) head() protocol.Head {
	return protocol.Head{Dataset: "fan", Epoch: 1, Snapshot: "s1", Seq: s.seq.Load()}
}
func (s *fanSource) Heads() []protocol.Head { return []protocol.Head{s.head()} }
func (s *fanSource) Head(ds string) (protocol.Head, *format.Manifest, bool) {
	return s.head(), &format.Manifest{}, ds == "fan"
}
func (s *fanSource) Since(string, uint64) ([]format.Record, bool) { return nil, true }
func (s *fanSource) DamageOf(string) (string, bool)               { return "", false }
func (s *fanSource) OpenFile(string, string) (hub.ReadAtCloser, error) {
	return nil, os.ErrNotExist
}

// fanSubscriber reads like a companion's session (sync/client): each
// message through NextReader into a reused buffer, each binary frame
// decoded and checked (CRC-32C, records); it counts the records it got
// in seq order and reports each in got.
func fanSubscriber(ws *websocket.Conn, from uint64, got func(seq uint64), fail func(error)) {
	buf := make([]byte, 0, protocol.MaxFrame)
	next := from + 1
	for {
		kind, r, err := ws.NextReader()
		if err != nil {
			return
		}
		b := buf[:0]
		for {
			n, err := r.Read(b[len(b):cap(b)])
			b = b[:len(b)+n]
			if err == io.EOF {
				break
			}
			if err != nil {
				return
			}
		}
		if kind != websocket.BinaryMessage {
			continue
		}
		v, err := protocol.DecodeBinary(b)
		if err != nil {
			fail(err)
			return
		}
		d, ok := v.(*protocol.DeltaFrame)
		if !ok {
			fail(fmt.Errorf("unexpected frame %T", v))
			return
		}
		for _, rec := range d.Records {
			if rec.Seq != next {
				fail(fmt.Errorf("record seq %d, want %d", rec.Seq, next))
				return
			}
			next++
			got(rec.Seq)
		}
	}
}

// fanDial opens a subscriber of src's dataset at its head and waits for
// its catch-up to end.
func fanDial(t testing.TB, url string, src *fanSource, name string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{ReadBufferSize: 4096, WriteBufferSize: 1024}
	ws, _, err := d.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(protocol.MaxFrame)
	hello := &protocol.Message{Type: protocol.THello, Proto: []int{protocol.VersionMin, protocol.VersionMax}, Client: name,
		Subs: []protocol.Sub{{Dataset: "fan", Epoch: 1, Snapshot: "s1", Seq: src.seq.Load()}}}
	if err := ws.WriteMessage(websocket.TextMessage, hello.Encode()); err != nil {
		t.Fatal(err)
	}
	for {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if m, err := protocol.DecodeMessage(msg); err == nil && m.Type == protocol.TCatchupEnd {
			return ws
		}
	}
}

// TestPausedSubscriberGetsEveryRecordOnce: a subscriber that stops
// reading while records are published (its socket fills, the hub's
// writer blocks and what follows queues up and goes out batched) gets,
// once it reads again, every record in seq order, none missing and none
// twice, as does a subscriber that read all along; neither is cut while
// its queue has room.
func TestPausedSubscriberGetsEveryRecordOnce(t *testing.T) {
	src := &fanSource{}
	h := hub.New(src, hub.Options{SendQueue: 4096})
	hs := httptest.NewServer(h)
	defer hs.Close()
	defer h.Close()
	u := "ws" + strings.TrimPrefix(hs.URL, "http")
	live := fanDial(t, u, src, "live")
	paused := fanDial(t, u, src, "paused")
	defer live.Close()
	defer paused.Close()
	var got [2]atomic.Uint64
	failed := make(chan error, 2)
	fail := func(err error) { failed <- err }
	go fanSubscriber(live, 0, func(seq uint64) { got[0].Store(seq) }, fail)

	publish := func(n int) {
		recs := make([]format.Record, n)
		for i := range recs {
			seq := src.seq.Add(1)
			recs[i] = format.Record{Seq: seq, Op: format.Upsert, SeriesID: fmt.Sprintf("S%d", seq%1000), Period: int64(seq) * 86400, Value: float64(seq)}
		}
		h.Publish("fan", recs)
	}
	// ~16 MiB of big frames fill the paused subscriber's socket (its
	// kernel buffers included), then single records queue behind them.
	for range 30 {
		publish(20000)
	}
	for range 1000 {
		publish(1)
	}
	last := src.seq.Load()
	go fanSubscriber(paused, 0, func(seq uint64) { got[1].Store(seq) }, fail)
	deadline := time.Now().Add(60 * time.Second)
	for got[0].Load() < last || got[1].Load() < last {
		select {
		case err := <-failed:
			t.Fatal(err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s: live at %d, paused at %d, want %d (%+v)", got[0].Load(), got[1].Load(), last, h.Stats())
		}
	}
	if s := h.Stats(); s.SlowConsumerCuts != 0 || s.Connections != 2 {
		t.Fatalf("stats %+v: want 2 connections, no cut", s)
	}
	// Nothing more arrives: a duplicate would fail fanSubscriber's seq check.
	publish(1)
	deadline = time.Now().Add(30 * time.Second)
	for got[0].Load() <= last || got[1].Load() <= last {
		select {
		case err := <-failed:
			t.Fatal(err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the last record did not arrive")
		}
	}
}
