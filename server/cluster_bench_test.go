//go:build unix

package server_test

// The benchmarks of issue 13 ("Cluster", side by side in one run): real
// servers over a real NATS JetStream cluster (three nodes in this
// process, R=3, loopback TCP), real listeners and websockets, a real
// SeaweedFS (internal/testweed) as the s3 warehouse. BENCHMARKS.md
// "Cluster: the benchmarks" has the figures and commands.

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/energyscope/energyscope/internal/testcluster"
	"github.com/energyscope/energyscope/internal/testweed"
	"github.com/energyscope/energyscope/internal/wiring"
	"github.com/energyscope/energyscope/internal/wsload"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/deltalog"
	"github.com/energyscope/energyscope/server/lake"
	"github.com/energyscope/energyscope/sync/client"
	"github.com/energyscope/energyscope/sync/protocol"
)

// cbCluster starts a 3-node JetStream cluster in this process (loopback
// routes and client ports) and returns a function connecting a new Log
// to all three nodes (streams get R=3).
func cbCluster(b *testing.B) func() *deltalog.Log {
	b.Helper()
	var ports [3]int
	var routes []string
	for i := range ports {
		p, err := deltalog.FreePort()
		if err != nil {
			b.Fatal(err)
		}
		ports[i] = p
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	var urls []string
	for i := range ports {
		n, err := deltalog.StartNode(deltalog.NodeOptions{Dir: b.TempDir(), Name: fmt.Sprintf("n%d", i+1), Cluster: &deltalog.ClusterOptions{Port: ports[i], Routes: routes}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(n.Shutdown)
		urls = append(urls, n.ClientURL())
	}
	return func() *deltalog.Log {
		l, err := deltalog.Connect(strings.Join(urls, ","), deltalog.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(l.Close)
		return l
	}
}

// cbServer starts a server over a fresh home on the log (and lake, when
// given) and serves it on a loopback listener; stop (idempotent, also
// run at the benchmark's end) closes both.
func cbServer(b *testing.B, home string, dl *deltalog.Log, lk *lake.Lake) (*server.Server, *httptest.Server, func()) {
	b.Helper()
	if home == "" {
		home = b.TempDir()
	}
	srv, err := server.New(server.Options{Home: home, CompactRows: -1, CompactBytes: -1, DeltaLog: dl, Lake: lk})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	var once sync.Once
	stop := func() { once.Do(func() { hs.Close(); srv.Close() }) }
	b.Cleanup(stop)
	return srv, hs, stop
}

// BenchmarkClusterIngestReplicas: acknowledged ingest with 1 and 3
// replicas on a 3-node cluster (R=3), the load of BenchmarkClusterIngest
// (its peer: the single server); with 3, writer w posts to replica w%3.
// Every replica applies every dataset's records (read-your-writes on the
// replica that took the ingest, fan-out on the others).
func BenchmarkClusterIngestReplicas(b *testing.B) {
	connect := cbCluster(b)
	for _, n := range []int{1, 3} {
		var srvs []*server.Server
		var stops []func()
		var names []string
		prefix := fmt.Sprintf("r%d", n)
		for range n {
			srv, _, stop := cbServer(b, "", connect(), nil)
			names = cbPutDatasets(b, srv, prefix)
			srvs, stops = append(srvs, srv), append(stops, stop)
		}
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) { cbIngest(b, srvs, names) })
		for _, stop := range stops {
			stop()
		}
	}
}

// BenchmarkClusterAcceptToVisible: ES_CLUSTER_BENCH_SUBS companions
// (default 3,000), each server's being one real sync engine on a local
// store and the rest idle websocket subscribers (they read and discard).
// One row at a time is posted over HTTP to the first server and timed
// until it is visible in the store of every server's sync engine.
// Side by side in one run: "single", one server on its embedded node
// holding all the companions (the peer), and "replicas=3", three replicas
// on the 3-node cluster (R=3), a third of the companions each: the row
// posted to replica 0 reaches the others through the log. Reports p50/p99
// of the slowest engine (all, the figure), of the first server's
// engine (local) and of the POST's answer (ack).
func BenchmarkClusterAcceptToVisible(b *testing.B) {
	total := 3000
	if v, err := strconv.Atoi(os.Getenv("ES_CLUSTER_BENCH_SUBS")); err == nil && v >= 3 {
		total = v
	}
	cbRaiseNoFile(b, uint64(2*total+1024))
	connect := cbCluster(b)
	day := time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC)
	i := 0
	for _, n := range []int{1, 3} {
		dl := connect
		name := "single"
		if n == 1 {
			dl = func() *deltalog.Log { return nil } // the embedded node
		} else {
			name = fmt.Sprintf("replicas=%d", n)
		}
		reps, stop := cbLatencySetup(b, n, total, dl)
		b.Logf("%s: %d companions (%d sync engines + %d websocket subscribers)", name, total, n, n*(total/n-1))
		b.Run(fmt.Sprintf("%s/companions=%d", name, total), func(b *testing.B) {
			var all, local, acks []time.Duration
			c0 := cbCPU()
			for b.Loop() {
				period := day.AddDate(0, 0, i)
				v := float64(i) + 0.5
				i++
				body := fmt.Sprintf(`{"rows":[{"series_id":"LAT","period":"%s","value":%g,"frequency":"D"}]}`, period.Format("2006-01-02"), v)
				t0 := time.Now()
				resp, err := http.Post(reps[0].hs.URL+"/v1/datasets/lat0/rows", "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("post: %s", resp.Status)
				}
				acks = append(acks, time.Since(t0))
				var last time.Duration
				for k, r := range reps {
					var t1 time.Time
					select {
					case t1 = <-r.seen:
					case <-time.After(30 * time.Second):
						b.Fatalf("row %d not visible on server %d's companion after 30 s", i, k)
					}
					p, vals, err := r.st.Copy("LAT", period.Unix(), period.Unix())
					if err != nil || len(p) != 1 || vals[0] != v {
						b.Fatalf("row %d on server %d's companion: %v %v %v", i, k, p, vals, err)
					}
					if k == 0 {
						local = append(local, t1.Sub(t0))
					}
					last = max(last, t1.Sub(t0))
				}
				all = append(all, last)
				time.Sleep(time.Duration(5+rand.IntN(10)) * time.Millisecond)
			}
			// The whole process's CPU (servers, NATS, both ends of every
			// websocket) per posted row: what the fan-out costs.
			b.ReportMetric(float64((cbCPU()-c0).Microseconds())/1000/float64(b.N), "cpu-ms/row")
			cbReportPercentiles(b, "all", all)
			cbReportPercentiles(b, "local", local)
			cbReportPercentiles(b, "ack", acks)
			b.ReportMetric(0, "ns/op")
		})
		stop()
	}
}

// cbLatencyServer is one server of BenchmarkClusterAcceptToVisible with
// its sync engine's store; seen gets the time the engine's store made
// series LAT visible.
type cbLatencyServer struct {
	srv  *server.Server
	hs   *httptest.Server
	st   *localcache.Store
	seen chan time.Time
}

// cbLatencySetup starts n servers on dl() (nil: each its embedded node),
// each with dataset lat0, one sync engine caught up and total/n-1 idle
// websocket subscribers. stop closes all of it (also run at the end).
func cbLatencySetup(b *testing.B, n, total int, dl func() *deltalog.Log) ([]*cbLatencyServer, func()) {
	var stops []func()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			for _, f := range slices.Backward(stops) {
				f()
			}
		})
	}
	b.Cleanup(stop)
	reps := make([]*cbLatencyServer, n)
	for i := range reps {
		r := &cbLatencyServer{seen: make(chan time.Time, 16)}
		var stopSrv func()
		r.srv, r.hs, stopSrv = cbServer(b, "", dl(), nil)
		stops = append(stops, stopSrv)
		cbPutDatasets(b, r.srv, "lat")
		st, err := localcache.Open(b.TempDir(), &localcache.Options{CompactRows: -1, CompactBytes: -1})
		if err != nil {
			b.Fatal(err)
		}
		r.st = st
		ctx, cancel := context.WithCancel(context.Background())
		eng := client.New(wiring.Sink{Store: st}, client.Options{Server: r.hs.URL, Name: fmt.Sprintf("companion%d", i)})
		done := make(chan struct{})
		go func() { eng.Run(ctx); close(done) }()
		stops = append(stops, func() { cancel(); <-done; st.Close() })
		head, _, _ := r.srv.Head("lat0")
		cbWait(b, 60*time.Second, "companion caught up", func() bool {
			_, id, _, err := st.State("lat0")
			return err == nil && id == head.Snapshot
		})
		stops = append(stops, st.Watch(func(ds string, ids []string) {
			if slices.Contains(ids, "LAT") {
				select {
				case r.seen <- time.Now():
				default:
				}
			}
		}))
		subs, err := wsload.DialSubscribers(r.hs.URL, total/n-1, protocol.Sub{Dataset: "lat0", Epoch: head.Epoch, Snapshot: head.Snapshot, Seq: head.Seq})
		stops = append(stops, func() {
			for _, ws := range subs {
				if ws != nil {
					ws.Close()
				}
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		reps[i] = r
	}
	return reps, stop
}

// BenchmarkClusterFailover: two replicas over the 3-node cluster and one
// lake (SeaweedFS: Iceberg REST catalog + S3), each behind a loopback
// proxy; one companion with --server A,B and the default backoff. Each
// round posts a row to the replica in use, then cuts that replica off
// (the proxy closes its connections and resets new ones, as a killed
// host's port would) and times until the companion is live on the other
// (welcome and catch-up done); the cut replica comes back for the next
// round. It fails if the companion downloaded the snapshot twice.
func BenchmarkClusterFailover(b *testing.B) {
	w := testweed.Start(b)
	cbWeedEnv(b, w)
	connect := cbCluster(b)
	ctx := context.Background()
	type rep struct {
		srv *server.Server
		px  *testcluster.Proxy
		url string
	}
	var reps []*rep
	for range 2 {
		home := b.TempDir()
		lk, err := lake.Open(ctx, lake.Options{Home: home, CatalogURI: w.Catalog, Warehouse: w.RESTWarehouse(), S3Endpoint: w.S3})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { lk.Close() })
		srv, hs, _ := cbServer(b, home, connect(), lk)
		px, err := testcluster.NewProxy(strings.TrimPrefix(hs.URL, "http://"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { px.Close() })
		reps = append(reps, &rep{srv: srv, px: px, url: "http://" + px.Addr()})
	}
	a, bb := reps[0], reps[1]
	names := cbPutDatasets(b, a.srv, "fo")
	headA, _, _ := a.srv.Head(names[0])
	cbWait(b, 30*time.Second, "B installs A's vintage", func() bool {
		h, _, ok := bb.srv.Head(names[0])
		return ok && h.Snapshot == headA.Snapshot
	})
	// One row a month (the datasets are monthly) from 2040-02.
	month := func(i int) int64 { return time.Date(2040, time.Month(1+i), 1, 0, 0, 0, 0, time.UTC).Unix() }
	seq := 0
	post := func(r *rep) {
		seq++
		if _, _, err := r.srv.Ingest(names[0], []format.Record{{Op: format.Upsert, SeriesID: "S1", Period: month(seq), Value: float64(seq)}}); err != nil {
			b.Fatal(err)
		}
	}
	post(a)
	st, err := localcache.Open(b.TempDir(), &localcache.Options{CompactRows: -1, CompactBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	eng := client.New(wiring.Sink{Store: st}, client.Options{Server: a.url + "," + bb.url, Name: "bench", Datasets: []string{names[0]}})
	changed := make(chan struct{}, 1)
	eng.OnProgress(func(client.Progress) {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { eng.Run(cctx); close(done) }()
	defer func() { cancel(); <-done }()
	byURL := map[string]*rep{a.url: a, bb.url: bb}
	liveOn := func(server string, sessions int64) {
		deadline := time.After(60 * time.Second)
		for {
			p := eng.Progress()
			if p.Online && p.Server == server && eng.Metrics().Sessions > sessions && len(p.Datasets) == 1 && p.Datasets[0].State == client.StateLive {
				return
			}
			select {
			case <-changed:
			case <-time.After(time.Millisecond):
			case <-deadline:
				b.Fatalf("not live on %s within 60 s: %+v", server, p)
			}
		}
	}
	liveOn(a.url, 0)
	b.Run("failover", func(b *testing.B) {
		var ds []time.Duration
		for b.Loop() {
			cur := eng.Progress().Server
			next := a.url
			if cur == a.url {
				next = bb.url
			}
			post(byURL[cur])
			sessions := eng.Metrics().Sessions
			start := time.Now()
			byURL[cur].px.Cut()
			liveOn(next, sessions)
			ds = append(ds, time.Since(start))
			byURL[cur].px.Resume()
		}
		cbReportPercentiles(b, "", ds)
		b.ReportMetric(0, "ns/op")
	})
	// Every posted row reached the companion, once.
	cbWait(b, 30*time.Second, "the companion has every posted row", func() bool {
		p, v, err := st.Copy("S1", month(1), month(seq))
		return err == nil && len(p) == seq && v[seq-1] == float64(seq)
	})
	if m := eng.Metrics(); m.DownloadRebases != 1 {
		b.Fatalf("%d snapshot downloads; want the first only", m.DownloadRebases)
	}
}

// BenchmarkClusterColdStart: a replica's cold start from an s3 warehouse
// (SeaweedFS: REST catalog + S3) holding one PET-shaped vintage of
// ES_CLUSTER_BENCH_ROWS rows (default 1 Mi; pet scale: 13800000, 80
// points a series), on the 3-node cluster's log. Side by side in each
// iteration: "download", a fresh lake.Lake with an empty cache opening
// the vintage (catalog, Puffin download, SHA-256 checks, mapping) and one
// lookup, the download time; "replica", a fresh home: lake.Open,
// server.New, the HTTP listener, until GET /v1/series answers the
// vintage's value.
func BenchmarkClusterColdStart(b *testing.B) {
	rows := 1 << 20
	if v, err := strconv.Atoi(os.Getenv("ES_CLUSTER_BENCH_ROWS")); err == nil && v >= 80 {
		rows = v
	}
	w := testweed.Start(b)
	cbWeedEnv(b, w)
	connect := cbCluster(b)
	ctx := context.Background()
	tab := &format.Table{}
	r := rand.New(rand.NewPCG(1, 2))
	day := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	for s := range rows / 80 {
		tab.Series = append(tab.Series, format.SeriesMeta{ID: fmt.Sprintf("PET.S%07d.W", s), Name: fmt.Sprintf("Series %d", s), Unit: "Thousand Barrels", Source: "EIA", Frequency: format.Daily})
		for i := range 80 {
			tab.Append(uint32(s), day+int64(i)*86400, r.Float64()*1000)
		}
	}
	dir := filepath.Join(b.TempDir(), "snap")
	if _, _, err := format.Write(dir, tab, format.WriteOptions{Dataset: "pet", Epoch: 1}); err != nil {
		b.Fatal(err)
	}
	probe := tab.Series[len(tab.Series)/2].ID
	opts := func() lake.Options {
		return lake.Options{Home: b.TempDir(), CatalogURI: w.Catalog, Warehouse: w.RESTWarehouse(), S3Endpoint: w.S3}
	}
	pub, err := lake.Open(ctx, opts())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pub.Publish(ctx, "pet", dir); err != nil {
		b.Fatal(err)
	}
	pub.Close()
	tab = nil
	b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
		var dl, cold, inNew time.Duration
		for b.Loop() {
			t0 := time.Now()
			l, err := lake.Open(ctx, opts())
			if err != nil {
				b.Fatal(err)
			}
			v, err := l.Current(ctx, "pet")
			if err != nil {
				b.Fatal(err)
			}
			s, err := l.OpenSnapshot(ctx, "pet", v, snapshot.Options{})
			if err != nil {
				b.Fatal(err)
			}
			if _, ok := s.Lookup(probe); !ok {
				b.Fatal("probe not found")
			}
			dl += time.Since(t0)
			s.Close()
			l.Close()

			t0 = time.Now()
			o := opts()
			o.ConnectLater = true
			lk, err := lake.Open(ctx, o)
			if err != nil {
				b.Fatal(err)
			}
			srv, err := server.New(server.Options{Home: o.Home, CompactRows: -1, CompactBytes: -1, DeltaLog: connect(), Lake: lk})
			if err != nil {
				b.Fatal(err)
			}
			inNew += time.Since(t0)
			hs := httptest.NewServer(srv.Handler())
			for {
				resp, err := http.Get(hs.URL + "/v1/series/" + probe + "?from=2000-01-01&to=2000-01-01")
				if err != nil {
					b.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 && strings.Contains(string(body), "2000-01-01,") {
					break
				}
				if time.Since(t0) > 5*time.Minute {
					b.Fatalf("no answer after 5 min: %d %s", resp.StatusCode, body)
				}
				time.Sleep(10 * time.Millisecond)
			}
			cold += time.Since(t0)
			hs.Close()
			srv.Close()
			lk.Close()
		}
		n := float64(b.N)
		b.ReportMetric(dl.Seconds()/n, "download-s")
		b.ReportMetric(cold.Seconds()/n, "replica-s")
		b.ReportMetric(inNew.Seconds()/n, "replica-new-s")
		b.ReportMetric((cold-dl).Seconds()/n, "replica-minus-download-s")
		b.ReportMetric(0, "ns/op")
	})
}

// cbReportPercentiles reports p50 and p99 of ds in ms (prefixed).
func cbReportPercentiles(b *testing.B, prefix string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	if prefix != "" {
		prefix += "-"
	}
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, prefix+"p50-ms")
	b.ReportMetric(float64(ds[min(len(ds)-1, len(ds)*99/100)].Microseconds())/1000, prefix+"p99-ms")
}

func cbWait(b *testing.B, d time.Duration, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cbRaiseNoFile raises the soft RLIMIT_NOFILE to n (at most the hard
// limit) and logs what it set.
func cbRaiseNoFile(b *testing.B, n uint64) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		b.Fatal(err)
	}
	if rl.Cur < n {
		rl.Cur = min(n, rl.Max)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			b.Fatal(err)
		}
	}
	if rl.Cur < n {
		b.Fatalf("RLIMIT_NOFILE %d (hard %d) < the %d this run needs", rl.Cur, rl.Max, n)
	}
	b.Logf("RLIMIT_NOFILE soft %d, hard %d", rl.Cur, rl.Max)
}

// cbWeedEnv sets the weed's credentials in this process's environment.
func cbWeedEnv(b *testing.B, w *testweed.Server) {
	for _, kv := range w.Env() {
		k, v, _ := strings.Cut(kv, "=")
		b.Setenv(k, v)
	}
}
