//go:build unix

package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
	"github.com/energyscope/energyscope/server/lake"
)

// BenchmarkServerOpenFromLake: a fresh server (server.New, one lookup,
// Close) over the same snapshot, side by side in each iteration: from a
// plain home (the snapshot directory mapped) and from a home whose
// snapshot lives in its embedded file:// lake (lake.Open, the catalog's
// head, the Puffin blobs mapped in place; no directory in the home), and
// the lake again with the catalog already open (warm); wall and process
// CPU time. Rows:
// ES_LAKE_BENCH_ROWS (default 1 Mi, ~80 daily points a series).
//
//	go test ./server -run '^$' -bench ServerOpenFromLake -benchtime 20x
func BenchmarkServerOpenFromLake(b *testing.B) {
	rows := 1 << 20
	if s := os.Getenv("ES_LAKE_BENCH_ROWS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 80 {
			b.Fatalf("ES_LAKE_BENCH_ROWS=%q: want a number >= 80", s)
		}
		rows = n
	}
	tab := &format.Table{}
	r := rand.New(rand.NewPCG(1, 2))
	day := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	for s := range rows / 80 {
		tab.Series = append(tab.Series, format.SeriesMeta{ID: fmt.Sprintf("PET.S%07d.W", s), Name: fmt.Sprintf("Series %d", s), Unit: "Thousand Barrels", Source: "EIA", Frequency: format.Daily})
		for i := range 80 {
			tab.Append(uint32(s), day+int64(i)*86400, r.Float64()*1000)
		}
	}
	probe := tab.Series[len(tab.Series)/2].ID
	cook := func(home string) {
		dsDir := filepath.Join(home, localcache.DatasetsDir, "bench")
		tmp, err := format.TempSnapshotDir(dsDir)
		if err != nil {
			b.Fatal(err)
		}
		m, _, err := format.Write(tmp, tab, format.WriteOptions{Dataset: "bench", Epoch: 1})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := format.Publish(dsDir, tmp, m); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	plainHome, lakeHome := b.TempDir(), b.TempDir()
	cook(plainHome)
	cook(lakeHome)
	// serve starts a server on home, answers one lookup and closes it; it
	// returns the wall and process CPU time at the answer (the start is
	// what is compared: the closes are not timed).
	serve := func(home string, l *lake.Lake) (time.Time, time.Duration) {
		srv, err := New(Options{Home: home, Lake: l, CompactRows: -1, CompactBytes: -1})
		if err != nil {
			b.Fatal(err)
		}
		if _, v, err := srv.Store().Copy(probe, snapshot.MinTime, snapshot.MaxTime); err != nil || len(v) != 80 {
			b.Fatalf("probe: %d points, %v", len(v), err)
		}
		t, c := time.Now(), cpuTime()
		srv.Close()
		return t, c
	}
	openLake := func() *lake.Lake {
		// As es serve opens it: the catalog connects in the background
		// while the store maps the recorded vintage.
		o := lake.DefaultOptions(lakeHome)
		o.ConnectLater = true
		l, err := lake.Open(ctx, o)
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	{
		// The first start migrates the home's snapshot into the lake and
		// serves it from there: the home keeps no directory of it.
		l := openLake()
		serve(lakeHome, l)
		l.Close()
		ents, _ := os.ReadDir(filepath.Join(lakeHome, localcache.DatasetsDir, "bench", format.SnapshotsDir))
		if len(ents) != 0 {
			b.Fatalf("the lake home keeps %d snapshot directories", len(ents))
		}
	}
	warm := openLake()
	defer warm.Close()
	var plain, viaLake, warmLake, plainCPU, lakeCPU time.Duration
	for b.Loop() {
		t0, c0 := time.Now(), cpuTime()
		t1, c1 := serve(plainHome, nil)
		t2, c2 := time.Now(), cpuTime()
		l := openLake()
		t3, c3 := serve(lakeHome, l)
		l.Close()
		t4 := time.Now()
		t5, _ := serve(lakeHome, warm)
		warmLake += t5.Sub(t4)
		plain += t1.Sub(t0)
		viaLake += t3.Sub(t2)
		plainCPU += c1 - c0
		lakeCPU += c3 - c2
	}
	n := float64(b.N)
	// CPU time of the process over each part (the steadier figure on a
	// shared machine; it includes the background work each start sets off).
	b.ReportMetric(plainCPU.Seconds()*1000/n, "plain_cpu_ms")
	b.ReportMetric(lakeCPU.Seconds()*1000/n, "lake_cpu_ms")
	b.ReportMetric(lakeCPU.Seconds()/plainCPU.Seconds(), "lake/plain_cpu")
	b.ReportMetric(plain.Seconds()*1000/n, "plain_ms")
	b.ReportMetric(viaLake.Seconds()*1000/n, "lake_ms")
	b.ReportMetric(viaLake.Seconds()/plain.Seconds(), "lake/plain")
	b.ReportMetric(warmLake.Seconds()*1000/n, "warm_ms")
	b.ReportMetric(warmLake.Seconds()/plain.Seconds(), "warm/plain")
}
