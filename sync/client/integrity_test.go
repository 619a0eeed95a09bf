package client_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/energyscope/energyscope/internal/wiring"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/sync/client"
	"github.com/energyscope/energyscope/sync/protocol"
)

// recordingSink remembers every value the engine applied.
type recordingSink struct {
	wiring.Sink
	mu      sync.Mutex
	applied []float64
}

func (s *recordingSink) Apply(ds string, recs []format.Record) error {
	s.mu.Lock()
	for _, r := range recs {
		s.applied = append(s.applied, r.Value)
	}
	s.mu.Unlock()
	return s.Sink.Apply(ds, recs)
}

// TestDamagedDeltaFrameIsNotApplied: a proxy flips one byte of a live
// delta frame's value in transit (plain ws://, so nothing below the
// protocol notices). The frame's checksum fails: nothing of it is
// applied, the connection drops with protocol.ErrChecksum, and the
// reconnect's catch-up brings the true value.
func TestDamagedDeltaFrameIsNotApplied(t *testing.T) {
	r := newStocksRig(t, nil)
	const sent = 1234.5
	var damaged atomic.Int64
	px := newMITM(t, r.hs.URL, func(kind int, b []byte) {
		if kind != websocket.BinaryMessage || len(b) == 0 || b[0] != protocol.KindDelta || damaged.Load() > 0 {
			return
		}
		v := binary.LittleEndian.AppendUint64(nil, math.Float64bits(sent))
		if i := bytes.Index(b, v); i >= 0 {
			b[i+7] ^= 0x01 // the sign/exponent byte: another number, still a valid record
			damaged.Add(1)
		}
	})
	st := openCompStore(t, t.TempDir())
	sink := &recordingSink{Sink: wiring.Sink{Store: st}}
	c := startComp(t, st, sink, client.Options{Server: px.hs.URL, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	head, _, _ := r.srv.Head("stocks")
	waitFor(t, 20*time.Second, "companion live", func() bool {
		d, ok := progressOf(c.eng, "stocks")
		return ok && d.State == client.StateLive
	})
	sessions := c.eng.Stats.Sessions.Load()
	last := r.ingest(row("T", 0, sent))
	c.waitState(head.Snapshot, last, 20*time.Second)
	if damaged.Load() != 1 {
		t.Fatalf("the proxy damaged %d frames, want 1", damaged.Load())
	}
	sameAsServer(t, r.srv, st, "T")
	if v, ok := value(st, "T", row("T", 0, 0).Period); !ok || v != sent {
		t.Fatalf("T = %v %v, want %v", v, ok, sent)
	}
	sink.mu.Lock()
	for _, v := range sink.applied {
		if v != sent {
			t.Errorf("the damaged value %v was applied", v)
		}
	}
	sink.mu.Unlock()
	if n := c.eng.Stats.ChecksumErrors.Load(); n != 1 {
		t.Errorf("%d checksum errors, want 1", n)
	}
	if n := c.eng.Stats.Sessions.Load() - sessions; n < 1 {
		t.Errorf("no reconnect after a damaged frame")
	}
}

// TestDivergedServerIsDetected: the server is restored from a backup
// taken at seq 3 and then accepts other records, so its head (7) passes
// the companion's seq (6): seq alone cannot tell, the history chain can.
// The companion drops its records 4..6, catches up on the server's, and
// ends with exactly the server's data. A reconnect after that finds no
// divergence.
func TestDivergedServerIsDetected(t *testing.T) {
	home := t.TempDir()
	r := startRig(t, home, nil)
	if _, err := r.srv.Replace("stocks", []string{stocks}, stocksOpts); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		r.ingest(row("T", i, float64(i)))
	}
	snap, _, _ := r.srv.Head("stocks")
	r.close()
	backup := t.TempDir()
	copyTree(t, home, backup)

	r = startRig(t, home, nil)
	r.ingest(row("T", 0, 100))
	r.ingest(row("T", 10, 110))
	r.ingest(row("U", 0, 120)) // a series only the lost records have
	st := openCompStore(t, t.TempDir())
	c := startComp(t, st, nil, client.Options{Server: r.hs.URL})
	c.waitState(snap.Snapshot, 6, 20*time.Second)
	c.stop()
	r.close()

	r = startRig(t, backup, nil)
	for i := range 4 {
		r.ingest(row("T", 20+i, float64(200+i)))
	}
	if h, _, _ := r.srv.Head("stocks"); h.Seq != 7 || h.Snapshot != snap.Snapshot {
		t.Fatalf("restored server at %s seq %d, want %s seq 7", h.Snapshot, h.Seq, snap.Snapshot)
	}
	c = startComp(t, st, nil, client.Options{Server: r.hs.URL})
	waitFor(t, 20*time.Second, "the companion at the server's seq 7, live", func() bool {
		q, err := st.LastSeq("stocks")
		d, _ := progressOf(c.eng, "stocks")
		return err == nil && q == 7 && d.State == client.StateLive
	})
	sameAsServer(t, r.srv, st, "T")
	if _, err := st.Info("U"); err == nil {
		t.Fatal("series U, which only the lost records had, is still served")
	}
	if v, ok := value(st, "T", row("T", 0, 0).Period); !ok || v != 0 {
		t.Fatalf("T at day 0 = %v %v, want the server's 0 (not the lost 100)", v, ok)
	}
	if n := c.eng.Stats.Diverged.Load(); n != 1 {
		t.Errorf("%d divergences detected, want 1", n)
	}
	c.stop()

	// Same history now: a reconnect is a plain catch-up.
	resets := r.srv.Hub().Stats().Resets
	last := r.ingest(row("T", 30, 300))
	c = startComp(t, st, nil, client.Options{Server: r.hs.URL})
	c.waitState(snap.Snapshot, last, 20*time.Second)
	sameAsServer(t, r.srv, st, "T")
	if n := r.srv.Hub().Stats().Resets - resets; n != 0 || c.eng.Stats.Diverged.Load() != 0 {
		t.Errorf("%d resets (%d divergences) for a companion that follows the server", n, c.eng.Stats.Diverged.Load())
	}
}

// TestVersion1ServerIsNamed: a version 1 server refuses this client's
// hello with an error that has no checksum; the client reports
// ErrProtocolVersion with the server's words instead of "malformed", and
// keeps serving its data.
func TestVersion1ServerIsNamed(t *testing.T) {
	st, _, _ := syncedStore(t)
	f := newFakeServer(t, func(ws *websocket.Conn, _ *protocol.Message) {
		ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"error","reason":"no common protocol version: client speaks 2..2, server 1..1"}`))
		ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "no common protocol version"))
	})
	c := startComp(t, st, nil, client.Options{Server: f.hs.URL, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	waitFor(t, 20*time.Second, "the client to name the version mismatch", func() bool {
		return errors.Is(c.eng.Progress().Err, client.ErrProtocolVersion)
	})
	stillServing(t, st)
}
