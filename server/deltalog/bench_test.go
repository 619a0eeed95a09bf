package deltalog

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/format"
)

// BenchmarkAppend is an acknowledged append of one batch, side by side
// in one run: today's write-ahead log (localcache/delta: one frame, one
// fsync), the embedded JetStream node (one message, fsynced before the
// ack, in-process connection), and a 3-node loopback cluster (R=3, ack
// after a quorum; nodes in this process, the client over TCP). rows/s is
// the figure BENCHMARKS.md "Cluster (foundation)" records, cpu-ns/row
// the cost (the cluster's three nodes all count).
//
//	go test ./server/deltalog -run '^$' -bench Append -benchtime 3s
func BenchmarkAppend(b *testing.B) {
	for _, rows := range []int{1000, 10} {
		b.Run(fmt.Sprintf("wal/rows=%d", rows), func(b *testing.B) {
			w, _, err := delta.OpenWAL(b.TempDir(), false, 0, slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			batch := batchOf(1, rows)
			seq := uint64(0)
			b.ResetTimer()
			cpu0 := processCPU()
			for b.Loop() {
				for k := range batch {
					seq++
					batch[k].Seq = seq
				}
				// What the server does per ingest before the WAL: validate.
				if err := format.ValidateRecords(batch); err != nil {
					b.Fatal(err)
				}
				if err := w.Append(batch); err != nil {
					b.Fatal(err)
				}
			}
			reportRows(b, rows, cpu0)
		})
		b.Run(fmt.Sprintf("embedded/rows=%d", rows), func(b *testing.B) {
			n := startEmbedded(b, NodeOptions{})
			benchLog(b, connectNode(b, n, Options{}), rows)
		})
		b.Run(fmt.Sprintf("cluster3/rows=%d", rows), func(b *testing.B) {
			urls := startInProcessCluster(b)
			l, err := Connect(urls, Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			benchLog(b, l, rows)
		})
	}
}

func benchLog(b *testing.B, l *Log, rows int) {
	ctx := testCtx(b, 10*time.Minute)
	if err := l.Create(ctx, "bench", CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	batch := batchOf(1, rows)
	i := 0
	b.ResetTimer()
	cpu0 := processCPU()
	for b.Loop() {
		i++
		if _, _, err := l.Append(ctx, "bench", batch, keyOf(i)); err != nil {
			b.Fatal(err)
		}
	}
	reportRows(b, rows, cpu0)
	if m := l.Metrics(); m.Retries+m.Conflicts > 0 {
		b.Logf("metrics: %+v", m)
	}
}

// reportRows reports acknowledged rows per second of wall time and the
// process's CPU time per row (the nodes of the embedded and cluster
// cases run in this process, so theirs counts too): on a shared machine
// the wall figure is mostly fsync latency and other processes' noise.
func reportRows(b *testing.B, rows int, cpu0 time.Duration) {
	b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(rows*b.N), "cpu-ns/row")
}

// startInProcessCluster starts three cluster nodes in this process and
// returns their client URLs.
func startInProcessCluster(b *testing.B) string {
	var routes []string
	var ports [3]int
	for i := range ports {
		p, err := FreePort()
		if err != nil {
			b.Fatal(err)
		}
		ports[i] = p
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	urls := ""
	for i := range 3 {
		n := startEmbedded(b, NodeOptions{Name: nodeName(i), Cluster: &ClusterOptions{Port: ports[i], Routes: routes}})
		if i > 0 {
			urls += ","
		}
		urls += n.ClientURL()
	}
	return urls
}

// BenchmarkAppendContended: three writers (three connections, as three
// replicas would be; on the cluster each to its own node) append
// 1,000-row batches to ONE dataset at once. Seqs stay contiguous through
// the expected-last-sequence check, so a writer that lost the race
// re-reads the tail and renumbers: conflicts/append is how often. The
// stream's leader orders every append of a dataset: replicas add
// throughput across datasets, not within one.
//
//	go test ./server/deltalog -run '^$' -bench AppendContended -benchtime 2s
func BenchmarkAppendContended(b *testing.B) {
	for _, where := range []string{"embedded", "cluster3"} {
		b.Run(where, func(b *testing.B) {
			var logs []*Log
			if where == "embedded" {
				n := startEmbedded(b, NodeOptions{})
				for range 3 {
					logs = append(logs, connectNode(b, n, Options{}))
				}
			} else {
				for _, u := range strings.Split(startInProcessCluster(b), ",") {
					l, err := Connect(u, Options{})
					if err != nil {
						b.Fatal(err)
					}
					defer l.Close()
					logs = append(logs, l)
				}
			}
			ctx := testCtx(b, 10*time.Minute)
			if err := logs[0].Create(ctx, "bench", CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			const rows = 1000
			batch := batchOf(1, rows)
			var next atomic.Int64
			b.ResetTimer()
			cpu0 := processCPU()
			var wg sync.WaitGroup
			for _, l := range logs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := int(next.Add(1))
						if i > b.N {
							return
						}
						if _, _, err := l.Append(ctx, "bench", batch, keyOf(i)); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			reportRows(b, rows, cpu0)
			var conflicts int64
			for _, l := range logs {
				conflicts += l.Metrics().Conflicts
			}
			b.ReportMetric(float64(conflicts)/float64(b.N), "conflicts/append")
		})
	}
}
