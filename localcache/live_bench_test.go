package localcache

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/format"
)

// Benchmarks of the live path (issue "Liveness"), side by side in one run:
//
//	go test ./localcache -run '^$' -bench 'Live' -benchtime 2s
//
// The dataset: 20,000 daily series x 75 points (1.5M rows).
const (
	liveBenchSeries = 20_000
	liveBenchPoints = 75
)

var liveBenchDay0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix()

func liveBenchTable() *format.Table {
	t := &format.Table{}
	for s := 0; s < liveBenchSeries; s++ {
		t.Series = append(t.Series, format.SeriesMeta{ID: fmt.Sprintf("BENCH.S%05d.D", s), Frequency: format.Daily})
		for p := 0; p < liveBenchPoints; p++ {
			t.Append(uint32(s), liveBenchDay0+int64(p)*86400, float64(s+p))
		}
	}
	return t
}

func liveBenchStore(b *testing.B) *Store {
	b.Helper()
	home := b.TempDir()
	dsDir := filepath.Join(home, DatasetsDir, "bench")
	tmp, err := format.TempSnapshotDir(dsDir)
	if err != nil {
		b.Fatal(err)
	}
	m, _, err := format.Write(tmp, liveBenchTable(), format.WriteOptions{Dataset: "bench", Epoch: 1})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := format.Publish(dsDir, tmp, m); err != nil {
		b.Fatal(err)
	}
	s, err := Open(home, &Options{CompactRows: -1, CompactBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// applyRows applies n upserts to the given series (spread over their
// range), in batches of 1,000.
func applyRows(b *testing.B, s *Store, ids []string, n int) {
	b.Helper()
	seq, _ := s.LastSeq("bench")
	batch := make([]delta.Record, 0, 1000)
	for i := 0; i < n; i++ {
		seq++
		batch = append(batch, delta.Record{Seq: seq, Op: delta.Upsert, SeriesID: ids[i%len(ids)], Period: liveBenchDay0 + int64(i%(liveBenchPoints+30))*86400, Value: float64(i)})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := s.Apply("bench", batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

func liveBenchGet(b *testing.B, s *Store, ids []string) {
	rng := rand.New(rand.NewPCG(1, 2))
	from, to := liveBenchDay0+10*86400, liveBenchDay0+60*86400
	b.ResetTimer()
	var pts int
	for i := 0; i < b.N; i++ {
		r, err := s.Get(ids[rng.IntN(len(ids))], from, to)
		if err != nil {
			b.Fatal(err)
		}
		pts += r.Points.Len()
		r.Release()
	}
	b.ReportMetric(float64(pts)/float64(b.N), "points/op")
}

func seriesIDs(from, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("BENCH.S%05d.D", from+i)
	}
	return ids
}

// BenchmarkLiveGet compares Get on series without pending rows (the
// plain slice path), on series with a few pending rows (merge), and on
// untouched series while the delta holds 1M rows elsewhere.
func BenchmarkLiveGet(b *testing.B) {
	s := liveBenchStore(b)
	pending := seriesIDs(0, 1000)
	applyRows(b, s, pending, 5000) // 5 pending rows per series
	plain := seriesIDs(10_000, 10_000)
	b.Run("plain", func(b *testing.B) { liveBenchGet(b, s, plain) })
	b.Run("pending", func(b *testing.B) { liveBenchGet(b, s, pending) })
	applyRows(b, s, seriesIDs(1000, 9000), 1_000_000)
	b.Run("plain-with-1M-delta", func(b *testing.B) { liveBenchGet(b, s, plain) })
}

// BenchmarkLiveApply measures durable Apply throughput: batches of 1,000
// rows, one fsync per batch.
func BenchmarkLiveApply(b *testing.B) {
	s := liveBenchStore(b)
	ids := seriesIDs(0, liveBenchSeries)
	runtime.GC() // the garbage of building the store is not Apply's
	b.ResetTimer()
	applyRows(b, s, ids, b.N*1000)
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkLiveCompact compares a compaction with 1% of the series
// updated against a fresh format.Write of the same rows.
func BenchmarkLiveCompact(b *testing.B) {
	b.Run("compact-1pct", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			s := liveBenchStore(b)
			applyRows(b, s, seriesIDs(0, liveBenchSeries/100), 20_000)
			b.StartTimer()
			if _, err := s.Compact("bench"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fresh-write", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			t := liveBenchTable()
			dir := filepath.Join(b.TempDir(), "s")
			b.StartTimer()
			if _, _, err := format.Write(dir, t, format.WriteOptions{Dataset: "bench"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
