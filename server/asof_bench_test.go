package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/server/cook"
	"github.com/energyscope/energyscope/server/lake"
)

// asofBench is a lake-backed server with ES_ASOF_BENCH_VINTAGES (30)
// vintages of one dataset: ES_ASOF_BENCH_SERIES (200) daily series over
// two years, every value revised by each vintage (a PUT each).
type asofBench struct {
	srv  *Server
	lk   *lake.Lake
	vs   []lake.Vintage
	ref  string
	from int64
	to   int64
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func newAsOfBench(b *testing.B) *asofBench {
	b.Helper()
	nv, ns := envInt("ES_ASOF_BENCH_VINTAGES", 30), envInt("ES_ASOF_BENCH_SERIES", 200)
	home := b.TempDir()
	lk, err := lake.Open(context.Background(), lake.Options{Home: home})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lk.Close() })
	srv, err := New(Options{Home: home, Lake: lk, CompactRows: -1, CompactBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	day0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	csv := filepath.Join(b.TempDir(), "v.csv")
	for v := range nv {
		var sb strings.Builder
		sb.WriteString("series,date,value\n")
		for s := range ns {
			for d := range 730 {
				fmt.Fprintf(&sb, "S%04d,%s,%d\n", s, day0.AddDate(0, 0, d).Format(time.DateOnly), v*1000+s+d)
			}
		}
		if err := os.WriteFile(csv, []byte(sb.String()), 0o644); err != nil {
			b.Fatal(err)
		}
		if _, err := srv.Replace("bench", []string{csv}, cook.InputOptions{SeriesCol: "series", PeriodCol: "date", ValueCol: "value", Frequency: "D"}); err != nil {
			b.Fatal(err)
		}
	}
	vs, err := lk.Vintages(context.Background(), "bench")
	if err != nil || len(vs) != nv {
		b.Fatalf("%d vintages, %v", len(vs), err)
	}
	return &asofBench{srv: srv, lk: lk, vs: vs, ref: "S0042",
		from: day0.AddDate(1, 0, 0).Unix(), to: day0.AddDate(1, 1, 0).Unix()}
}

// p50 runs op b.N times (after setup, untimed, if set), timing each,
// and reports the median beside the mean.
func p50(b *testing.B, setup, op func()) {
	b.Helper()
	ds := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range b.N {
		if setup != nil {
			b.StopTimer()
			setup()
			b.StartTimer()
		}
		t0 := time.Now()
		op()
		ds[i] = time.Since(t0)
	}
	b.StopTimer()
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds()), "p50-ns")
}

// BenchmarkAsOf: a one-month read of one series from the current
// snapshot (the store, as GET /v1/series/{id} reads it), the same read as
// of a non-current vintage through the server's vintage cache (resolve,
// cache hit, lookup) and on first touch (a fresh cache: the catalog is
// read and the vintage mapped in place out of its Puffin file), and the
// revisions of one period over every vintage, cached. Run together:
//
//	go test ./server -run '^$' -bench 'AsOf' -benchtime 2000x
func BenchmarkAsOf(b *testing.B) {
	ab := newAsOfBench(b)
	ctx := context.Background()
	old := ab.vs[len(ab.vs)/3].Snapshot
	sink := 0.0
	read := func(r localcache.Result) error {
		for _, v := range r.Points.Values {
			sink += v
		}
		return nil
	}
	b.Run("current", func(b *testing.B) {
		p50(b, nil, func() {
			if err := ab.srv.store.View(ab.ref, ab.from, ab.to, read); err != nil {
				b.Fatal(err)
			}
		})
	})
	asof := func(b *testing.B) {
		if err := ab.srv.ViewAsOf(ctx, ab.ref, old, ab.from, ab.to, func(_ lake.Vintage, r localcache.Result) error { return read(r) }); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("asof-cached", func(b *testing.B) {
		asof(b)
		p50(b, nil, func() { asof(b) })
	})
	// fresh empties the server's vintage cache and its list of vintages.
	fresh := func() {
		a, err := ab.srv.asOf()
		if err != nil {
			b.Fatal(err)
		}
		a.Close()
		a.Invalidate("bench")
	}
	b.Run("asof-first-touch", func(b *testing.B) {
		p50(b, fresh, func() { asof(b) })
	})
	b.Run(fmt.Sprintf("revisions-%d-vintages-cached", len(ab.vs)), func(b *testing.B) {
		if _, err := ab.srv.SeriesRevisions(ctx, ab.ref, "2025-01-15"); err != nil {
			b.Fatal(err)
		}
		p50(b, nil, func() {
			revs, err := ab.srv.SeriesRevisions(ctx, ab.ref, "2025-01-15")
			if err != nil || len(revs.Revisions) != len(ab.vs) {
				b.Fatal(err)
			}
		})
	})
	b.Run(fmt.Sprintf("revisions-%d-vintages-first-touch", len(ab.vs)), func(b *testing.B) {
		p50(b, fresh, func() {
			if _, err := ab.srv.SeriesRevisions(ctx, ab.ref, "2025-01-15"); err != nil {
				b.Fatal(err)
			}
		})
	})
	_ = sink
}
