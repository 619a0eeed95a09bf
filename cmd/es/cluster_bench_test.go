//go:build !windows

package main

// Cluster benchmarks (BENCHMARKS.md "Cluster"): replicas in this process
// on loopback over a 3-node NATS JetStream cluster (in process) and one
// lake (an SQLite catalog file and a file:// warehouse), as es demo
// --cluster runs them.
//
//	go test ./cmd/es -run '^$' -bench 'Cluster' -benchtime 200x

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/cook/samples"
	"github.com/energyscope/energyscope/sync/client"
	"github.com/energyscope/energyscope/sync/protocol"
)

// benchCluster starts a NATS cluster of 3 nodes, n replicas and dataset
// stocks served by all of them.
func benchCluster(b *testing.B, n int) (reps []*demoReplica, write, read string) {
	b.Helper()
	dir := b.TempDir()
	nodes, err := startDemoNATS(filepath.Join(dir, "nats"), 3)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for _, nd := range nodes {
			nd.Shutdown()
		}
	})
	var urls []string
	for _, nd := range nodes {
		urls = append(urls, nd.ClientURL())
	}
	natsURLs := strings.Join(urls, ",")
	tokens, closeTokens, err := openTokens(natsURLs)
	if err != nil {
		b.Fatal(err)
	}
	write, _ = tokens.Add("w", "write")
	read, _ = tokens.Add("r", "read")
	closeTokens()
	cat, wh := "sqlite:"+filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse")
	for i := range n {
		r := &demoReplica{name: fmt.Sprintf("r%d", i+1), home: filepath.Join(dir, fmt.Sprintf("r%d", i+1)), addr: "127.0.0.1:0"}
		if err := r.start(cat, wh, natsURLs); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(r.stop)
		reps = append(reps, r)
	}
	set := samples.Sets[1]
	body, _ := fs.ReadFile(samples.FS, set.File)
	q := fmt.Sprintf("series_col=%s&period_col=%s&value_col=%s&frequency=%s", set.Opts.SeriesCol, set.Opts.PeriodCol, set.Opts.ValueCol, set.Opts.Frequency)
	if _, err := demoDo("PUT", "http://"+reps[0].addr+"/v1/datasets/stocks?"+q, write, "text/csv", body); err != nil {
		b.Fatal(err)
	}
	h, _, _ := reps[0].srv.Head("stocks")
	for _, r := range reps {
		if err := waitDemo(30*time.Second, func() bool {
			g, _, ok := r.srv.Head("stocks")
			return ok && g.Snapshot == h.Snapshot && followsLive(r, "stocks")
		}); err != nil {
			b.Fatal(err)
		}
	}
	return reps, write, read
}

// benchCompanion syncs a companion (the sync engine on a store) from
// servers (a list) until it serves stocks.
func benchCompanion(b *testing.B, servers, token string) (*localcache.Store, *client.Engine) {
	b.Helper()
	st, err := localcache.Open(b.TempDir(), &localcache.Options{CompactRows: -1, CompactBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	eng, done := startSync(ctx, st, syncConfig{server: servers, token: token, name: "bench-companion"})
	b.Cleanup(func() { cancel(); <-done; st.Close() })
	if err := waitDemo(60*time.Second, func() bool { _, _, _, err := st.State("stocks"); return err == nil }); err != nil {
		b.Fatal(err)
	}
	return st, eng
}

// idleSubscribers opens n websocket connections to base that say hello
// for stocks without a snapshot and then read and discard everything.
// The hub answers such a hello with a snapshot offer and keeps no
// subscription for it, so these are open sockets, not subscribed
// companions: no row is fanned out to them. The accept-to-visible
// figure with 3,000 live (subscribed, caught-up) companions is
// server/cluster_bench_test.go's BenchmarkClusterAcceptToVisible.
func idleSubscribers(b *testing.B, base, token string, n int) {
	b.Helper()
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil && rl.Cur < rl.Max {
		rl.Cur = rl.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
	u := "ws" + strings.TrimPrefix(base, "http") + "/v1/sync"
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			d := websocket.Dialer{HandshakeTimeout: time.Minute, ReadBufferSize: 1024, WriteBufferSize: 1024}
			ws, _, err := d.Dial(u, http.Header{"Authorization": {"Bearer " + token}})
			if err != nil {
				errs <- err
				return
			}
			b.Cleanup(func() { ws.Close() })
			hello := &protocol.Message{Type: protocol.THello, Proto: []int{protocol.VersionMin, protocol.VersionMax}, Client: fmt.Sprintf("idle%d", i), Subs: []protocol.Sub{{Dataset: "stocks"}}}
			if err := ws.WriteMessage(websocket.TextMessage, hello.Encode()); err != nil {
				errs <- err
				return
			}
			errs <- nil
			go func() {
				for {
					if _, _, err := ws.NextReader(); err != nil {
						return
					}
				}
			}()
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

func pct(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// BenchmarkClusterAcceptToVisible: a row posted to the first replica
// until a companion of the last one serves it, with 3,000 idle
// subscribers spread over the replicas; replicas=1 is the same on one
// server (the peer).
func BenchmarkClusterAcceptToVisible(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			reps, write, read := benchCluster(b, n)
			for i, r := range reps {
				idleSubscribers(b, "http://"+r.addr, read, 3000/n+min(1, 3000%n/(i+1)))
			}
			last := reps[len(reps)-1]
			st, _ := benchCompanion(b, "http://"+last.addr, read)
			seen := make(chan struct{}, 1)
			unwatch := st.Watch(func(ds string, ids []string) {
				if slices.Contains(ids, "LAT") {
					select {
					case seen <- struct{}{}:
					default:
					}
				}
			})
			defer unwatch()
			day := time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				p := day.AddDate(0, 0, i)
				body := fmt.Sprintf(`{"rows":[{"series_id":"LAT","period":%q,"value":%d,"frequency":"D"}]}`, p.Format("2006-01-02"), i)
				t0 := time.Now()
				if _, err := demoDo("POST", "http://"+reps[0].addr+"/v1/datasets/stocks/rows", write, "application/json", []byte(body)); err != nil {
					b.Fatal(err)
				}
				for {
					select {
					case <-seen:
					case <-time.After(30 * time.Second):
						b.Fatalf("row %d not visible after 30 s", i)
					}
					if _, v, err := st.Copy("LAT", p.Unix(), p.Unix()); err == nil && len(v) == 1 && v[0] == float64(i) {
						break
					}
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			b.ReportMetric(float64(pct(lat, 0.5).Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(pct(lat, 0.99).Microseconds())/1000, "p99-ms")
		})
	}
}

// BenchmarkClusterFailover: a companion given the three replicas; each
// iteration stops the replica it is on and times until it is live on
// another (a session there, caught up), then starts the stopped one again.
func BenchmarkClusterFailover(b *testing.B) {
	reps, _, read := benchCluster(b, 3)
	var list []string
	for _, r := range reps {
		list = append(list, "http://"+r.addr)
	}
	_, eng := benchCompanion(b, strings.Join(list, ","), read)
	live := func() bool {
		for _, d := range eng.Progress().Datasets {
			if d.Dataset == "stocks" {
				return d.State == client.StateLive
			}
		}
		return false
	}
	if err := waitDemo(30*time.Second, live); err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	b.ResetTimer()
	for range b.N {
		m := eng.Metrics()
		var on *demoReplica
		for _, r := range reps {
			if "http://"+r.addr == m.Server {
				on = r
			}
		}
		if on == nil {
			b.Fatalf("the companion is on %q, not a replica", m.Server)
		}
		t0 := time.Now()
		on.stop()
		if err := waitDemo(30*time.Second, func() bool {
			n := eng.Metrics()
			return n.Server != m.Server && n.Sessions > m.Sessions && live()
		}); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
		b.StopTimer()
		if err := on.restart(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(pct(took, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(pct(took, 0.99).Microseconds())/1000, "p99-ms")
}

// BenchmarkClusterIngest: acknowledged rows a second, 6 writers posting
// 1,000-row batches (each to the replicas in turn), with 1 and with 3
// replicas.
func BenchmarkClusterIngest(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			reps, write, _ := benchCluster(b, n)
			const writers, rows = 6, 1000
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			b.ResetTimer()
			start, cpu0 := time.Now(), processCPU()
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var sb strings.Builder
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						sb.Reset()
						sb.WriteString("series_id,period,value\n")
						day := time.Date(2050, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, int(i))
						for j := range rows {
							fmt.Fprintf(&sb, "ING.%d.%d,%s,%d\n", w, j, day.Format("2006-01-02"), j)
						}
						r := reps[int(i)%len(reps)]
						if _, err := demoDo("POST", "http://"+r.addr+"/v1/datasets/stocks/rows", write, "text/csv", []byte(sb.String())); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			el, cpu := time.Since(start), processCPU()-cpu0
			b.StopTimer()
			select {
			case err := <-errs:
				b.Fatal(err)
			default:
			}
			b.ReportMetric(float64(b.N*rows)/el.Seconds(), "rows/s")
			// Everything runs in this process (writers, replicas, NATS
			// nodes): the CPU a row costs the whole cluster.
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*rows), "cpu-ns/row")
		})
	}
}

// followsLive reports whether replica r follows dataset's stream live
// (it takes ingest).
func followsLive(r *demoReplica, dataset string) bool {
	for _, d := range r.srv.LogState().Datasets {
		if d.Name == dataset {
			return d.State == server.FollowLive
		}
	}
	return false
}

// processCPU is this process's user + system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
