package client_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/energyscope/energyscope/internal/wiring"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/sync/client"
)

var errDiskGone = errors.New("test: the write-ahead log's disk is unwritable")

// brokenDiskSink fails every Apply of one dataset while broken is set,
// as a store whose write-ahead log cannot be written does (the real
// store underneath does the rest).
type brokenDiskSink struct {
	wiring.Sink
	dataset string
	broken  atomic.Bool
	refused atomic.Int64
}

func (s *brokenDiskSink) Apply(ds string, recs []format.Record) error {
	if ds == s.dataset && s.broken.Load() {
		s.refused.Add(1)
		return errDiskGone
	}
	return s.Sink.Apply(ds, recs)
}

func progressOf(eng *client.Engine, ds string) (client.DatasetProgress, bool) {
	for _, d := range eng.Progress().Datasets {
		if d.Dataset == ds {
			return d, true
		}
	}
	return client.DatasetProgress{}, false
}

// TestApplyFailureIsNotAConnectionFailure: one dataset's disk is
// unwritable for a while. The connection stays up (no reconnects), the
// other dataset stays live and keeps receiving deltas, the failing one is
// marked with a typed ApplyError and retried with backoff (a bounded
// number of times), and once the disk works again it catches up by
// itself, without a restart, to exactly the server's data.
func TestApplyFailureIsNotAConnectionFailure(t *testing.T) {
	r := newStocksRig(t, nil)
	other := stocksOpts
	other.Prefix = "other." // files unlike stocks' (downloads are matched by SHA-256)
	if _, err := r.srv.Replace("other", []string{stocks}, other); err != nil {
		t.Fatal(err)
	}
	st := openCompStore(t, t.TempDir())
	sink := &brokenDiskSink{Sink: wiring.Sink{Store: st}, dataset: "stocks"}
	c := startComp(t, st, sink, client.Options{Server: r.hs.URL, MinBackoff: 100 * time.Millisecond, MaxBackoff: 800 * time.Millisecond})
	head, _, _ := r.srv.Head("stocks")
	c.waitState(head.Snapshot, 0, 20*time.Second)
	waitFor(t, 20*time.Second, "both datasets live", func() bool {
		a, ok1 := progressOf(c.eng, "stocks")
		b, ok2 := progressOf(c.eng, "other")
		return ok1 && ok2 && a.State == client.StateLive && b.State == client.StateLive
	})
	sessions := c.eng.Stats.Sessions.Load()

	sink.broken.Store(true)
	window := time.Now()
	r.ingest(row("T", 0, 1))
	waitFor(t, 10*time.Second, "the failing dataset marked", func() bool {
		d, _ := progressOf(c.eng, "stocks")
		return d.State == client.StateApplyFailing && d.Failure != nil
	})
	d, _ := progressOf(c.eng, "stocks")
	if !errors.Is(d.Failure, errDiskGone) || d.Failure.Dataset != "stocks" {
		t.Fatalf("failure %v, want an ApplyError of stocks wrapping the sink's error", d.Failure)
	}
	// The other dataset follows live while stocks fails.
	for i := range 5 {
		_, last, err := r.srv.Ingest("other", []format.Record{row("O", i, float64(i))})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the other dataset to apply a live delta", func() bool {
			_, _, seq, err := st.State("other")
			return err == nil && seq == last
		})
		r.ingest(row("T", i+1, float64(i+1)))
		time.Sleep(300 * time.Millisecond)
	}
	if b, _ := progressOf(c.eng, "other"); b.State != client.StateLive || b.Failure != nil {
		t.Fatalf("other dataset %q (%v) while stocks fails, want live", b.State, b.Failure)
	}
	if p := c.eng.Progress(); !p.Online {
		t.Fatalf("engine offline (%s) during a local apply failure", p.LastError)
	}
	time.Sleep(time.Until(window.Add(3 * time.Second)))
	sink.broken.Store(false)
	failed := time.Since(window)

	last := r.ingest(row("T", 9, 9))
	c.waitState(head.Snapshot, last, 20*time.Second)
	waitFor(t, 10*time.Second, "stocks live again", func() bool {
		d, _ := progressOf(c.eng, "stocks")
		return d.State == client.StateLive && d.Failure == nil
	})
	sameAsServer(t, r.srv, st, "T")
	if n := c.eng.Stats.Sessions.Load() - sessions; n != 0 {
		t.Errorf("%d reconnects during a %v local apply failure, want 0", n, failed.Round(time.Millisecond))
	}
	// Backoff from 100 ms doubling to 800 ms: about 8 tries in 3 s; a
	// loop would make hundreds.
	if n := sink.refused.Load(); n < 2 || n > 15 {
		t.Errorf("%d applies tried during %v of failure, want a few (backoff)", n, failed.Round(time.Millisecond))
	}
}
