package client_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/energyscope/energyscope/internal/wiring"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/cook"
	"github.com/energyscope/energyscope/sync/client"
)

const stocks = "../../server/cook/samples/stocks.csv"

var stocksOpts = cook.InputOptions{SeriesCol: "symbol", PeriodCol: "date", ValueCol: "price", Frequency: "M"}

func newServer(t *testing.T) (*server.Server, *httptest.Server) {
	t.Helper()
	srv, err := server.New(server.Options{Home: t.TempDir(), CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Replace("stocks", []string{stocks}, stocksOpts); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return srv, hs
}

func newCompanion(t *testing.T, url string) (*localcache.Store, *client.Engine) {
	t.Helper()
	st, err := localcache.Open(t.TempDir(), &localcache.Options{CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	eng := client.New(wiring.Sink{Store: st}, client.Options{Server: url, Name: t.Name(), Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { eng.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; st.Close() })
	return st, eng
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func value(st *localcache.Store, id string, period int64) (float64, bool) {
	p, v, err := st.Copy(id, period, period)
	if err != nil || len(p) != 1 {
		return 0, false
	}
	return v[0], true
}

func TestSyncInitialLiveCompactReplace(t *testing.T) {
	srv, hs := newServer(t)
	st, eng := newCompanion(t, hs.URL)
	head, _, _ := srv.Head("stocks")
	eventually(t, "initial sync", func() bool {
		_, id, _, err := st.State("stocks")
		return err == nil && id == head.Snapshot
	})
	jan2000 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	if v, ok := value(st, "MSFT", jan2000); !ok || v != 39.81 {
		t.Fatalf("MSFT Jan 2000 = %v %v", v, ok)
	}

	// Live rows.
	nov := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Unix()
	if _, _, err := srv.Ingest("stocks", []format.Record{{Op: format.Upsert, SeriesID: "MSFT", Period: nov, Value: 512.5}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "live row", func() bool { v, ok := value(st, "MSFT", nov); return ok && v == 512.5 })

	// Server compaction: the client rebases by compacting locally.
	m, err := srv.Compact("stocks")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "local rebase", func() bool {
		_, id, _, _ := st.State("stocks")
		return id == m.SnapshotID
	})
	eventually(t, "rebase counted", func() bool { return eng.Stats.LocalRebases.Load() == 1 })
	if eng.Stats.DownloadRebases.Load() != 1 {
		t.Fatalf("local rebases = %d, downloads = %d", eng.Stats.LocalRebases.Load(), eng.Stats.DownloadRebases.Load())
	}

	// A replacement (new epoch) is downloaded.
	if _, err := srv.Replace("stocks", []string{stocks}, stocksOpts); err != nil {
		t.Fatal(err)
	}
	head, _, _ = srv.Head("stocks")
	eventually(t, "replacement", func() bool {
		ep, id, _, _ := st.State("stocks")
		return ep == 2 && id == head.Snapshot
	})
	if _, ok := value(st, "MSFT", nov); ok {
		t.Fatal("the replacement should not have the November row")
	}
	// Live again after the replacement.
	if _, _, err := srv.Ingest("stocks", []format.Record{{Op: format.Upsert, SeriesID: "AAPL", Period: nov, Value: 1}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "live after replacement", func() bool { v, ok := value(st, "AAPL", nov); return ok && v == 1 })
	eventually(t, "progress live at seq 2", func() bool {
		p := eng.Progress()
		return p.Online && len(p.Datasets) == 1 && p.Datasets[0].State == client.StateLive && p.Datasets[0].Seq == 2 && p.Datasets[0].Lag == 0
	})
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// A companion that restarts on a store that already holds everything the
// server has gets an empty catch-up: its progress must still say seq =
// the server's head and lag 0 (it used to keep seq 0 and a lag of the
// head until the next record arrived).
func TestProgressAfterEmptyCatchup(t *testing.T) {
	srv, hs := newServer(t)
	nov := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Unix()
	for i := range 5 {
		if _, _, err := srv.Ingest("stocks", []format.Record{{Op: format.Upsert, SeriesID: "MSFT", Period: nov, Value: float64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	home := t.TempDir()
	run := func(check func(*localcache.Store, *client.Engine)) {
		st, err := localcache.Open(home, &localcache.Options{CompactRows: -1, CompactBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		eng := client.New(wiring.Sink{Store: st}, client.Options{Server: hs.URL, Name: t.Name(), Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { eng.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		check(st, eng)
	}
	run(func(st *localcache.Store, _ *client.Engine) {
		eventually(t, "first sync to seq 5", func() bool { seq, err := st.LastSeq("stocks"); return err == nil && seq == 5 })
	})
	run(func(st *localcache.Store, eng *client.Engine) {
		eventually(t, "live again", func() bool {
			p := eng.Progress()
			return p.Online && len(p.Datasets) == 1 && p.Datasets[0].State == client.StateLive
		})
		d := eng.Progress().Datasets[0]
		if d.Seq != 5 || d.HeadSeq != 5 || d.Lag != 0 {
			t.Fatalf("after an empty catch-up: seq %d, head %d, lag %d; want 5, 5, 0", d.Seq, d.HeadSeq, d.Lag)
		}
	})
}
