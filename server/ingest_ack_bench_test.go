//go:build unix

package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server/cook"
)

// BenchmarkIngestAck: acknowledged ingest, Server.Ingest of one batch
// after another on one dataset, rows/s and CPU-ns/row. It uses only what
// the server had before the delta log (issue 13), so the same file run in
// a worktree at the commit before it measures the write-ahead log server
// as the peer (BENCHMARKS.md "Cluster"):
//
//	go test ./server -run '^$' -bench IngestAck -benchtime 2s -count 3
func BenchmarkIngestAck(b *testing.B) {
	for _, rows := range []int{10, 1000} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			home := b.TempDir()
			srv, err := New(Options{Home: home, CompactRows: -1, CompactBytes: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			if _, err := srv.Replace("stocks", []string{stocksCSV}, cook.InputOptions{SeriesCol: "symbol", PeriodCol: "date", ValueCol: "price", Frequency: "M"}); err != nil {
				b.Fatal(err)
			}
			base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
			batch := make([]format.Record, rows)
			b.ResetTimer()
			c0, t0 := cpuTime(), time.Now()
			for i := 0; i < b.N; i++ {
				for k := range batch {
					batch[k] = format.Record{Op: format.Upsert, SeriesID: "MSFT", Period: base + int64(k)*86400, Value: float64(i)}
				}
				if _, _, err := srv.Ingest("stocks", batch); err != nil {
					b.Fatal(err)
				}
			}
			cpu, wall := cpuTime()-c0, time.Since(t0)
			n := float64(b.N * rows)
			b.ReportMetric(n/wall.Seconds(), "rows/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/row")
		})
	}
}
