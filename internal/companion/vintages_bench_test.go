//go:build unix

package companion_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/energyscope/energyscope/functions"
	"github.com/energyscope/energyscope/internal/companion"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/cook"
	"github.com/energyscope/energyscope/server/cook/samples"
	"github.com/energyscope/energyscope/server/lake"
)

// processCPU is the CPU time (user + system) of the test process: the
// benchmarks report it per op beside wall time, which on a shared machine
// is mostly other processes' noise.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loop runs f b.N times and reports the process CPU time per op.
func loop(b *testing.B, f func()) {
	cpu := processCPU()
	for b.Loop() {
		f()
	}
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

// lakeCompanion is a companion synced from a real lake-backed server whose
// stocks dataset has n vintages (MSFT's January 2000 is 1000+i in vintage
// i > 0).
func lakeCompanion(b *testing.B, n int) (*companion.Companion, []lake.Vintage) {
	b.Helper()
	ctx := context.Background()
	home := b.TempDir()
	lk, err := lake.Open(ctx, lake.DefaultOptions(home))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lk.Close() })
	srv, err := server.New(server.Options{Home: home, Lake: lk, CompactRows: -1, CompactBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	var opts cook.InputOptions
	for _, s := range samples.Sets {
		if s.Dataset == "stocks" {
			opts = s.Opts
		}
	}
	if _, err := srv.Replace("stocks", []string{"../../server/cook/samples/stocks.csv"}, opts); err != nil {
		b.Fatal(err)
	}
	for i := 1; i < n; i++ {
		if _, _, err := srv.Ingest("stocks", []format.Record{{Op: format.Upsert, SeriesID: "MSFT", Period: jan2000, Value: 1000 + float64(i)}}); err != nil {
			b.Fatal(err)
		}
		if _, err := srv.Compact("stocks"); err != nil {
			b.Fatal(err)
		}
	}
	all, err := lk.Vintages(ctx, "stocks")
	if err != nil {
		b.Fatal(err)
	}
	vs := slices.DeleteFunc(all, func(v lake.Vintage) bool { return !v.Serving })
	hs := httptest.NewServer(srv.Handler())
	b.Cleanup(hs.Close)
	c, err := companion.Start(companion.Config{Home: b.TempDir(), Port: 0, Server: hs.URL, Datasets: []string{"stocks"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, id, _, err := c.Store().State("stocks"); err == nil && id == vs[len(vs)-1].Snapshot {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the companion did not sync")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return c, vs
}

// BenchmarkCompanionAsOf: ES.Get of one series through the companion's
// source, today's data beside a vintage the companion holds in its cache
// (after the first read fetched it), in the same run.
//
//	go test ./internal/companion -run '^$' -bench CompanionAsOf -benchtime 20000x
func BenchmarkCompanionAsOf(b *testing.B) {
	c, vs := lakeCompanion(b, 3)
	eng := &functions.Engine{Src: c.Source()}
	asof := "asof=" + vs[0].Snapshot
	if r := eng.Eval("ES.Get", []any{"MSFT", "2000-01", "2000-01", asof}); r.Err != nil || r.Grid.Num[1] != 39.81 {
		b.Fatalf("first as-of read: %+v", r.Err)
	}
	for _, bc := range []struct {
		name string
		args []any
	}{
		{"current", []any{"MSFT", "2000-01", "2000-12"}},
		{"asof-cached", []any{"MSFT", "2000-01", "2000-12", asof}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			loop(b, func() {
				if r := eng.Eval("ES.Get", bc.args); r.Err != nil {
					b.Fatal(r.Err)
				}
			})
		})
	}
}

// BenchmarkCompanionRevisions30: the revisions of one period over 30
// vintages asked of a real lake-backed server over the sync connection
// (client.Engine.Revisions, each a round trip), and ES.Revisions answered
// from the companion's minute cache.
//
//	go test ./internal/companion -run '^$' -bench CompanionRevisions30 -benchtime 200x
func BenchmarkCompanionRevisions30(b *testing.B) {
	c, vs := lakeCompanion(b, 30)
	if len(vs) != 30 {
		b.Fatalf("%d vintages", len(vs))
	}
	ctx := context.Background()
	b.Run("server-round-trip", func(b *testing.B) {
		loop(b, func() {
			revs, err := c.Engine().Revisions(ctx, "stocks", "MSFT", "2000-01-01")
			if err != nil || len(revs) != 30 {
				b.Fatalf("%d revisions: %v", len(revs), err)
			}
		})
	})
	eng := &functions.Engine{Src: c.Source()}
	b.Run("es-revisions-cached", func(b *testing.B) {
		loop(b, func() {
			if r := eng.Eval("ES.Revisions", []any{"MSFT", "2000-01"}); r.Err != nil || r.Grid.Rows != 31 {
				b.Fatalf("%+v", r.Err)
			}
		})
	})
}
