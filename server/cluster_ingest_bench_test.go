//go:build unix

package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/cook"
)

// This file uses only the server API of before the delta log (issue 13),
// so the same file compiled in a worktree at the commit before the log
// (5ad5096^) measures the write-ahead log server as the peer of the
// replicas (cluster_bench_test.go, BENCHMARKS.md "Cluster: the issue's
// benchmarks"):
//
//	go test ./server -run '^$' -bench 'ClusterIngest' -benchtime 3s

// Ingest load of the cluster benchmarks: cbWriters concurrent writers,
// writer w on dataset w%cbDatasets (several datasets, so that on a NATS
// cluster the streams' leaders spread over the nodes), 1,000-row batches.
const (
	cbWriters  = 6
	cbDatasets = 3
	cbRows     = 1000
)

// BenchmarkClusterIngest: acknowledged ingest on one server in its
// default setup (today: the embedded JetStream node; at 5ad5096^: the
// store's WAL plus the history log), cbWriters writers at once.
func BenchmarkClusterIngest(b *testing.B) {
	srv, err := server.New(server.Options{Home: b.TempDir(), CompactRows: -1, CompactBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	names := cbPutDatasets(b, srv, "single")
	b.Run("single", func(b *testing.B) { cbIngest(b, []*server.Server{srv}, names) })
}

// cbPutDatasets creates cbDatasets small datasets PREFIX0.. on srv (the
// same CSV each time, so every server of a run holds the same ones).
func cbPutDatasets(b *testing.B, srv *server.Server, prefix string) []string {
	b.Helper()
	csv := filepath.Join(b.TempDir(), "seed.csv")
	var sb strings.Builder
	sb.WriteString("symbol,date,price\n")
	for s := range 10 {
		for m := range 24 {
			fmt.Fprintf(&sb, "S%d,%s,%d\n", s, time.Date(2020, time.Month(1+m), 1, 0, 0, 0, 0, time.UTC).Format("2006-01-02"), s*100+m)
		}
	}
	if err := os.WriteFile(csv, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	var names []string
	for d := range cbDatasets {
		name := fmt.Sprintf("%s%d", prefix, d)
		if _, err := srv.Replace(name, []string{csv}, cook.InputOptions{SeriesCol: "symbol", PeriodCol: "date", ValueCol: "price", Frequency: "M"}); err != nil {
			b.Fatal(err)
		}
		names = append(names, name)
	}
	return names
}

// cbIngest runs b.N acknowledged ingests of cbRows rows, spread over
// cbWriters goroutines; writer w posts to srvs[w%len(srvs)], dataset
// names[w%len(names)]. The clock stops when every server has applied
// every acknowledged record (replicas apply each other's through the
// log after the ack). It reports rows/s (wall) and cpu-ns/row (the whole
// process: servers, NATS nodes and writers).
func cbIngest(b *testing.B, srvs []*server.Server, names []string) {
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	var mu sync.Mutex
	last := map[string]uint64{} // the highest acknowledged seq of each dataset
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, cbWriters)
	b.ResetTimer()
	c0, t0 := cbCPU(), time.Now()
	for w := range cbWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv, name := srvs[w%len(srvs)], names[w%len(names)]
			batch := make([]format.Record, cbRows)
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				for k := range batch {
					batch[k] = format.Record{Op: format.Upsert, SeriesID: fmt.Sprintf("S%d", w), Period: base + int64(k)*86400, Value: float64(i)}
				}
				_, l, err := srv.Ingest(name, batch)
				if err != nil {
					errs <- fmt.Errorf("writer %d, batch %d: %w", w, i, err)
					return
				}
				mu.Lock()
				last[name] = max(last[name], l)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, srv := range srvs {
		for name, l := range last {
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
				if seq, err := srv.Store().LastSeq(name); err == nil && seq >= l {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("a server has not applied %s up to %d after a minute", name, l)
				}
			}
		}
	}
	cpu, wall := cbCPU()-c0, time.Since(t0)
	b.StopTimer()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	n := float64(b.N * cbRows)
	b.ReportMetric(n/wall.Seconds(), "rows/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/row")
	b.ReportMetric(0, "ns/op")
}

// cbCPU is this process's user+system CPU time.
func cbCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
