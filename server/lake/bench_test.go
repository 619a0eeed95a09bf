package lake

import (
	"context"
	"fmt"
	"io"
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
// publish (format.Write of the table into a snapshot directory: what a
// server without a lake does) and the publish through the lake as the
// server's compaction does it end to end (Lake.PublishCooked: the same
// cook written straight into the Puffin container in the warehouse,
// Parquet data files, one catalog commit), and reports both and
// their ratio, in wall time and in process CPU time (user+system; the
// steadier figure on a shared machine).
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
	var plain, viaLake, plainCPU, lakeCPU time.Duration
	for i := 0; b.Loop(); i++ {
		o := format.WriteOptions{Dataset: "bench", Epoch: 1, CoversThroughSeq: uint64(i)}
		t0, c0 := time.Now(), cpuTime()
		if _, _, err := format.Write(filepath.Join(b.TempDir(), "plain"), tab, o); err != nil {
			b.Fatal(err)
		}
		t1, c1 := time.Now(), cpuTime()
		cook := func(c *format.Container) (*format.Manifest, error) {
			m, _, err := format.WriteInto(c, tab, o)
			return m, err
		}
		if _, _, err := l.PublishCooked(ctx, "bench", cook, nil); err != nil {
			b.Fatal(err)
		}
		plain += t1.Sub(t0)
		viaLake += time.Since(t1)
		plainCPU += c1 - c0
		lakeCPU += cpuTime() - c1
	}
	n := float64(b.N)
	b.ReportMetric(float64(tab.Len()), "rows")
	b.ReportMetric(plain.Seconds()*1000/n, "plain_ms")
	b.ReportMetric(viaLake.Seconds()*1000/n, "lake_ms")
	b.ReportMetric(viaLake.Seconds()/plain.Seconds(), "lake/plain")
	if plainCPU > 0 {
		b.ReportMetric(plainCPU.Seconds()*1000/n, "plain_cpu_ms")
		b.ReportMetric(lakeCPU.Seconds()*1000/n, "lake_cpu_ms")
		b.ReportMetric(lakeCPU.Seconds()/plainCPU.Seconds(), "lake/plain_cpu")
	}
}

// BenchmarkOpenCurrent measures, side by side, a plain open of a snapshot
// directory (snapshot.Open + first lookup) and a fresh start from the
// lake mapping the current vintage in place: Open the catalog, resolve
// Current, OpenSnapshot (blobs located from the table metadata, mapped out
// of the Puffin file) + the same lookup (lake_ms). warm_ms is the same on
// a Lake already open (what a server pays per dataset after its catalog
// is open: Current + OpenSnapshot + lookup).
//
//	go test ./server/lake -run '^$' -bench OpenCurrent -benchtime 20x
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
	check := func(s *snapshot.Snapshot) {
		if _, ok := s.Lookup(probe); !ok {
			b.Fatal("probe series missing")
		}
		s.Close()
	}
	fromLake := func(l *Lake) {
		v, err := l.Current(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		s, err := l.OpenSnapshot(ctx, "bench", v, snapshot.Options{})
		if err != nil {
			b.Fatal(err)
		}
		check(s)
	}
	warmLake, err := Open(ctx, Options{Home: home})
	if err != nil {
		b.Fatal(err)
	}
	defer warmLake.Close()
	var plain, viaLake, warm time.Duration
	for b.Loop() {
		t0 := time.Now()
		s, err := snapshot.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		check(s)
		t1 := time.Now()
		l, err := Open(ctx, Options{Home: home})
		if err != nil {
			b.Fatal(err)
		}
		fromLake(l)
		l.Close()
		t2 := time.Now()
		fromLake(warmLake)
		warm += time.Since(t2)
		plain += t1.Sub(t0)
		viaLake += t2.Sub(t1)
	}
	n := float64(b.N)
	b.ReportMetric(plain.Seconds()*1000/n, "plain_ms")
	b.ReportMetric(viaLake.Seconds()*1000/n, "lake_ms")
	b.ReportMetric(viaLake.Seconds()/plain.Seconds(), "lake/plain")
	b.ReportMetric(warm.Seconds()*1000/n, "warm_ms")
	b.ReportMetric(warm.Seconds()/plain.Seconds(), "warm/plain")
}

// BenchmarkDataFiles is the Parquet part of a publish alone: the
// snapshot's rows encoded as a data file into io.Discard, in CPU
// nanoseconds per row.
//
//	go test ./server/lake -run '^$' -bench DataFiles -benchtime 10x
func BenchmarkDataFiles(b *testing.B) {
	tab := benchTable(benchRows(b))
	dir := filepath.Join(b.TempDir(), "snap")
	if _, _, err := format.Write(dir, tab, format.WriteOptions{Dataset: "bench", Epoch: 1}); err != nil {
		b.Fatal(err)
	}
	src, err := readSnapshot(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer src.close()
	var cpu time.Duration
	for b.Loop() {
		c0 := cpuTime()
		if err := writeParquet(io.Discard, src); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - c0
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(tab.Len()), "cpu_ns/row")
}
