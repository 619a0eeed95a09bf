package lake

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// benchRows is the size of the benchmark table: ES_LAKE_BENCH_ROWS, default
// 1 Mi rows (~ 80 daily points a series, like the PET set; 13,800,000 is
// the pet scale).
func benchRows(b *testing.B) int {
	if s := os.Getenv("ES_LAKE_BENCH_ROWS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 80 {
			b.Fatalf("ES_LAKE_BENCH_ROWS=%q: want a number >= 80", s)
		}
		return n
	}
	return 1 << 20
}

// benchTable is a PET-shaped table: rows/80 monthly-ish daily series of
// 80 points with metadata.
func benchTable(rows int) *format.Table {
	t := &format.Table{}
	r := rand.New(rand.NewPCG(1, 2))
	series := rows / 80
	day := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	for s := range series {
		t.Series = append(t.Series, format.SeriesMeta{ID: fmt.Sprintf("PET.S%07d.W", s), Name: fmt.Sprintf("Series %d", s), Unit: "Thousand Barrels", Source: "EIA", Frequency: format.Daily})
		for i := range 80 {
			t.Append(uint32(s), day+int64(i)*86400, r.Float64()*1000)
		}
	}
	return t
}

// BenchmarkPublish measures, side by side in each iteration, the plain
// publish (format.Write of the table into a snapshot directory) and the
// publish through the lake (the same Write, then Lake.Publish: Parquet
// data files, Puffin file, one catalog commit), and reports both and
// their ratio.
//
//	go test ./server/lake -run '^$' -bench Publish -benchtime 3x
//	ES_LAKE_BENCH_ROWS=13800000 go test ./server/lake -run '^$' -bench Publish -benchtime 1x -timeout 30m
func BenchmarkPublish(b *testing.B) {
	tab := benchTable(benchRows(b))
	ctx := context.Background()
	l, err := Open(ctx, Options{Home: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	var plain, viaLake time.Duration
	for i := 0; b.Loop(); i++ {
		o := format.WriteOptions{Dataset: "bench", Epoch: 1, CoversThroughSeq: uint64(i)}
		t0 := time.Now()
		if _, _, err := format.Write(filepath.Join(b.TempDir(), "plain"), tab, o); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		dir := filepath.Join(b.TempDir(), "lake")
		if _, _, err := format.Write(dir, tab, o); err != nil {
			b.Fatal(err)
		}
		if _, err := l.Publish(ctx, "bench", dir); err != nil {
			b.Fatal(err)
		}
		plain += t1.Sub(t0)
		viaLake += time.Since(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tab.Len()), "rows")
	b.ReportMetric(plain.Seconds()*1000/n, "plain_ms")
	b.ReportMetric(viaLake.Seconds()*1000/n, "lake_ms")
	b.ReportMetric(viaLake.Seconds()/plain.Seconds(), "lake/plain")
}

// BenchmarkOpenCurrent measures, side by side, a plain open of a snapshot
// directory (snapshot.Open + first lookup) and a fresh start from the
// lake: Open the catalog, resolve Current, Extract its artifacts into a
// new directory (SHA-256 verified) and open that. locate_ms is the part a
// server that maps the blobs in place would pay before its mapping: Open,
// Current and Artifacts (the Puffin footer).
//
//	go test ./server/lake -run '^$' -bench OpenCurrent -benchtime 5x
func BenchmarkOpenCurrent(b *testing.B) {
	tab := benchTable(benchRows(b))
	ctx := context.Background()
	home := b.TempDir()
	dir := filepath.Join(b.TempDir(), "snap")
	if _, _, err := format.Write(dir, tab, format.WriteOptions{Dataset: "bench", Epoch: 1}); err != nil {
		b.Fatal(err)
	}
	{
		l, err := Open(ctx, Options{Home: home})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Publish(ctx, "bench", dir); err != nil {
			b.Fatal(err)
		}
		l.Close()
	}
	probe := tab.Series[len(tab.Series)/2].ID
	openAndProbe := func(d string) {
		s, err := snapshot.Open(d)
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := s.Lookup(probe); !ok {
			b.Fatal("probe series missing")
		}
		s.Close()
	}
	var plain, viaLake, locate time.Duration
	for i := 0; b.Loop(); i++ {
		tl := time.Now()
		{
			l, err := Open(ctx, Options{Home: home})
			if err != nil {
				b.Fatal(err)
			}
			v, err := l.Current(ctx, "bench")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := l.Artifacts(ctx, "bench", v); err != nil {
				b.Fatal(err)
			}
			l.Close()
		}
		locate += time.Since(tl)
		t0 := time.Now()
		openAndProbe(dir)
		t1 := time.Now()
		l, err := Open(ctx, Options{Home: home})
		if err != nil {
			b.Fatal(err)
		}
		v, err := l.Current(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		out := filepath.Join(b.TempDir(), "x")
		if _, err := l.Extract(ctx, "bench", v, out); err != nil {
			b.Fatal(err)
		}
		openAndProbe(out)
		l.Close()
		plain += t1.Sub(t0)
		viaLake += time.Since(t1)
	}
	n := float64(b.N)
	b.ReportMetric(plain.Seconds()*1000/n, "plain_ms")
	b.ReportMetric(viaLake.Seconds()*1000/n, "lake_ms")
	b.ReportMetric(viaLake.Seconds()/plain.Seconds(), "lake/plain")
	b.ReportMetric(locate.Seconds()*1000/n, "locate_ms")
}
