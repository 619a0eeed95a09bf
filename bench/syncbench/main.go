// Command syncbench measures the central server and background sync on
// loopback, against the targets of the issue "Central server and
// background sync":
//
//   - snapshot transfer rate over the websocket (the sync engine: chunks
//     verified per 4 MiB, files by SHA-256, written and fsynced) vs a plain
//     HTTP GET of the same files (GET /v1/files/...), written to disk,
//     fsynced and SHA-256 checked: target >= 0.7x;
//   - server accept -> row visible in a companion's Get, p50/p99 with 100
//     subscribers (targets 5 ms / 50 ms) and p99 with 1,000 (200 ms);
//   - server memory (Go heap + stacks) per idle websocket connection, 1,000
//     idle connections held by a child process: target <= 64 KiB;
//   - resume after SIGKILL: bytes a companion downloads twice after being
//     killed mid-download and restarted: target <= one 4 MiB chunk.
//
// Usage:
//
//	cd bench && go run ./syncbench                  # table
//	cd bench && go run ./syncbench --json           # one JSON object
//	cd bench && go run ./syncbench --rows 4000000   # a bigger snapshot
//
// The server runs in this process; the subscribers of the latency runs run
// here too (so their CPU competes with the server's, as on a busy host);
// the idle connections of the memory run and the killed companion of the
// resume run are child processes (this program re-executed).
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/energyscope/energyscope/internal/wiring"
	"github.com/energyscope/energyscope/internal/wsload"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	_ "github.com/energyscope/energyscope/localcache/format/tailwrite" // format.Write can write a cold tier (tail.parquet)
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/sync/client"
	"github.com/energyscope/energyscope/sync/protocol"
)

type config struct {
	rows      int
	runs      int
	subs      []int
	samples   int
	idle      int
	bandwidth int64
	dir       string
	asJSON    bool
	only      string
}

func main() {
	var c config
	var subs string
	flag.IntVar(&c.rows, "rows", 2_000_000, "rows of the benchmark snapshot (about 16 bytes a row in data.arrow)")
	flag.IntVar(&c.runs, "runs", 7, "transfer runs of each kind (median)")
	flag.StringVar(&subs, "subs", "100,1000", "subscriber counts of the latency runs")
	flag.IntVar(&c.samples, "samples", 200, "rows posted per latency run")
	flag.IntVar(&c.idle, "idle", 1000, "idle connections of the memory run")
	flag.Int64Var(&c.bandwidth, "bandwidth", 8_000_000, "bytes/s of the companion killed in the resume run")
	flag.StringVar(&c.dir, "dir", "", "scratch directory (default: a temporary one, removed)")
	flag.BoolVar(&c.asJSON, "json", false, "print one JSON object")
	flag.StringVar(&c.only, "only", "", "run only these parts, comma-separated: transfer,latency,memory,resume")
	child := flag.String("child", "", "internal: run as a child (idle, companion)")
	server := flag.String("server", "", "internal: server URL for a child")
	home := flag.String("home", "", "internal: companion home for a child")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of this process to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	switch *child {
	case "idle":
		if err := childIdle(*server, c.idle); err != nil {
			fmt.Fprintln(os.Stderr, "idle child:", err)
			os.Exit(1)
		}
		return
	case "companion":
		if err := childCompanion(*server, *home, c.bandwidth); err != nil {
			fmt.Fprintln(os.Stderr, "companion child:", err)
			os.Exit(1)
		}
		return
	}
	for _, s := range strings.Split(subs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bad --subs %q\n", subs)
			os.Exit(2)
		}
		c.subs = append(c.subs, n)
	}
	rep, err := run(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "syncbench:", err)
		os.Exit(1)
	}
	if c.asJSON {
		b, _ := json.Marshal(rep.vals)
		fmt.Println(string(b))
		return
	}
	rep.print(os.Stdout)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "# "+format+"\n", args...)
}

// report keeps the figures in insertion order, with their targets.
type report struct {
	keys    []string
	vals    map[string]any
	targets map[string]string
	pass    map[string]bool
}

func newReport() *report {
	return &report{vals: map[string]any{}, targets: map[string]string{}, pass: map[string]bool{}}
}

func (r *report) set(k string, v any) {
	if _, ok := r.vals[k]; !ok {
		r.keys = append(r.keys, k)
	}
	r.vals[k] = v
}

// target records a figure with its target and whether it is met.
func (r *report) target(k string, v float64, target string, ok bool) {
	r.set(k, round(v))
	r.targets[k] = target
	r.pass[k] = ok
	r.vals[k+"_ok"] = ok
}

func (r *report) print(w io.Writer) {
	for _, k := range r.keys {
		t := r.targets[k]
		mark := ""
		if t != "" {
			mark = "MISS"
			if r.pass[k] {
				mark = "ok"
			}
		}
		v := r.vals[k]
		if f, ok := v.(float64); ok {
			v = strconv.FormatFloat(f, 'f', -1, 64)
		}
		fmt.Fprintf(w, "%-40s %-18v %-12s %s\n", k, v, t, mark)
	}
}

func round(v float64) float64 {
	switch {
	case v >= 100:
		return float64(int64(v + 0.5))
	case v >= 1:
		return float64(int64(v*100+0.5)) / 100
	default:
		return float64(int64(v*10000+0.5)) / 10000
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p)
	return s[i]
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func want(c config, part string) bool {
	if c.only == "" {
		return true
	}
	for _, p := range strings.Split(c.only, ",") {
		if strings.TrimSpace(p) == part {
			return true
		}
	}
	return false
}

func run(c config) (*report, error) {
	rep := newReport()
	dir := c.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "syncbench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	rep.set("date", time.Now().UTC().Format(time.RFC3339))
	rep.set("cpus", runtime.NumCPU())
	rep.set("loadavg_start", loadAvg())

	if want(c, "transfer") || want(c, "resume") {
		logf("writing a snapshot of %d rows", c.rows)
		home := filepath.Join(dir, "server-big")
		m, err := writeBigHome(home, c.rows)
		if err != nil {
			return nil, err
		}
		var size int64
		for _, f := range m.Files {
			size += f.Size
		}
		rep.set("snapshot_rows", m.Rows)
		rep.set("snapshot_bytes", size)
		if want(c, "transfer") {
			if err := benchTransfer(rep, c, dir, home, size); err != nil {
				return nil, fmt.Errorf("transfer: %w", err)
			}
		}
		if want(c, "resume") {
			if err := benchResume(rep, c, dir, home, size); err != nil {
				return nil, fmt.Errorf("resume: %w", err)
			}
		}
	}
	if want(c, "latency") {
		for _, n := range c.subs {
			if err := benchLatency(rep, c, dir, n); err != nil {
				return nil, fmt.Errorf("latency with %d subscribers: %w", n, err)
			}
		}
	}
	if want(c, "memory") {
		if err := benchMemory(rep, c, dir); err != nil {
			return nil, fmt.Errorf("memory: %w", err)
		}
	}
	rep.set("loadavg_end", loadAvg())
	return rep, nil
}

// writeBigHome writes dataset "big" (random values, 2,000 daily series)
// into a server home, as es cook would publish it.
func writeBigHome(home string, rows int) (*format.Manifest, error) {
	dsDir := filepath.Join(home, localcache.DatasetsDir, "big")
	if id, err := format.ReadCurrent(dsDir); err == nil {
		if m, err := format.ReadManifest(filepath.Join(dsDir, format.SnapshotsDir, id)); err == nil && m.Rows == int64(rows) {
			return m, nil
		}
	}
	tb := &format.Table{}
	const series = 2000
	r := rand.New(rand.NewPCG(1, 2))
	per := max(rows/series, 1)
	for s := range series {
		tb.Series = append(tb.Series, format.SeriesMeta{ID: fmt.Sprintf("S%05d", s), Frequency: "D"})
		day := time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
		for i := range per {
			tb.Append(uint32(s), day+int64(i)*86400, float64(int64(r.Float64()*1e6))/100)
		}
	}
	tmp, err := format.TempSnapshotDir(dsDir)
	if err != nil {
		return nil, err
	}
	m, _, err := format.Write(tmp, tb, format.WriteOptions{Dataset: "big", Epoch: 1})
	if err != nil {
		return nil, err
	}
	if _, err := format.Publish(dsDir, tmp, m); err != nil {
		return nil, err
	}
	return m, nil
}

// startServer runs a server on home behind an httptest server.
func startServer(home string) (*server.Server, *httptest.Server, error) {
	srv, err := server.New(server.Options{Home: home, CompactRows: -1, CompactBytes: -1})
	if err != nil {
		return nil, nil, err
	}
	hs := httptest.NewServer(srv.Handler())
	return srv, hs, nil
}

// startBigServer runs a server on home holding dataset "big" of 20,000
// rows (written unless it is there already).
func startBigServer(home string) (*server.Server, *httptest.Server, error) {
	if _, err := writeBigHome(home, 20_000); err != nil {
		return nil, nil, err
	}
	return startServer(home)
}

func stopServer(srv *server.Server, hs *httptest.Server) {
	hs.CloseClientConnections()
	hs.Close()
	srv.Close()
}

// dropCache asks the kernel to forget a directory's files (best effort:
// needs root); the transfers then read the server's files from disk alike.
func dropCache(dir string) {
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		if f, err := os.Open(p); err == nil {
			syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, 4 /* POSIX_FADV_DONTNEED */, 0, 0)
			f.Close()
		}
		return nil
	})
}

// httpDownload fetches every file of the snapshot over plain HTTP, writes
// it to dir, fsyncs it and checks its SHA-256.
func httpDownload(base string, m *format.Manifest, dir string) error {
	for _, f := range m.Files {
		resp, err := http.Get(base + "/v1/files/" + m.Dataset + "/" + f.SHA256)
		if err != nil {
			return err
		}
		if resp.StatusCode != 200 {
			resp.Body.Close()
			return fmt.Errorf("GET %s: %s", f.Name, resp.Status)
		}
		out, err := os.Create(filepath.Join(dir, f.Name))
		if err != nil {
			resp.Body.Close()
			return err
		}
		h := sha256.New()
		_, err = io.CopyBuffer(io.MultiWriter(out, h), resp.Body, make([]byte, 1<<20))
		resp.Body.Close()
		if err == nil {
			err = out.Sync()
		}
		out.Close()
		if err != nil {
			return err
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
			return fmt.Errorf("%s: SHA-256 %s, want %s", f.Name, got, f.SHA256)
		}
	}
	return nil
}

// traceLogger is the engine's log on stderr when SYNCBENCH_TRACE is set
// (for a person reading along; no figure comes from it), else nil.
func traceLogger() *slog.Logger {
	if os.Getenv("SYNCBENCH_TRACE") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// wsDownload syncs a fresh companion store from the server and returns
// the time the engine reports for the download (every file verified, fsynced and
// renamed) and to the snapshot installed (the store checks every SHA-256
// again and swaps it in).
func wsDownload(url, home, snap string) (complete, installed time.Duration, err error) {
	st, err := localcache.Open(home, &localcache.Options{CompactRows: -1, CompactBytes: -1})
	if err != nil {
		return 0, 0, err
	}
	defer st.Close()
	eng := client.New(wiring.Sink{Store: st}, client.Options{Server: url, Name: "bench", Logger: traceLogger()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	done := make(chan struct{})
	go func() { eng.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := start.Add(10 * time.Minute)
	for {
		if _, id, _, err := st.State("big"); err == nil && id == snap {
			installed = time.Since(start)
			break
		}
		if time.Now().After(deadline) {
			return 0, 0, errors.New("download did not finish in 10 minutes")
		}
		time.Sleep(time.Millisecond)
	}
	d, ok := eng.Metrics().Download(snap)
	if !ok {
		return 0, 0, fmt.Errorf("snapshot %s installed but the engine completed no download of it", snap)
	}
	return d.Duration, installed, nil
}

func benchTransfer(rep *report, c config, dir, home string, size int64) error {
	srv, hs, err := startServer(home)
	if err != nil {
		return err
	}
	defer stopServer(srv, hs)
	_, m, _ := srv.Head("big")
	var httpS, wsS, wsInstS, httpCPU, wsCPU, ratios []float64
	for i := range c.runs {
		// Alternate the order; each starts with the server's files out of
		// the page cache when that is allowed (root), warm otherwise.
		for _, kind := range []string{"http", "ws"} {
			if i%2 == 1 {
				kind = map[string]string{"http": "ws", "ws": "http"}[kind]
			}
			dropCache(home)
			out := filepath.Join(dir, fmt.Sprintf("dl-%s-%d", kind, i))
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			cpu0 := cpuTime()
			switch kind {
			case "http":
				start := time.Now()
				if err := httpDownload(hs.URL, m, out); err != nil {
					return err
				}
				httpS = append(httpS, time.Since(start).Seconds())
				httpCPU = append(httpCPU, cpuTime()-cpu0)
			case "ws":
				complete, installed, err := wsDownload(hs.URL, out, m.SnapshotID)
				if err != nil {
					return err
				}
				wsS = append(wsS, complete.Seconds())
				wsInstS = append(wsInstS, installed.Seconds())
				wsCPU = append(wsCPU, cpuTime()-cpu0)
			}
			os.RemoveAll(out)
		}
		ratios = append(ratios, httpS[i]/wsS[i])
		logf("transfer run %d: http %.2fs (cpu %.2fs), websocket %.2fs (installed %.2fs, cpu %.2fs)", i+1, httpS[i], httpCPU[i], wsS[i], wsInstS[i], wsCPU[i])
	}
	mb := float64(size) / 1e6
	rep.set("transfer_http_mb_s", round(mb/median(httpS)))
	rep.set("transfer_ws_mb_s", round(mb/median(wsS)))
	rep.set("transfer_ws_installed_mb_s", round(mb/median(wsInstS)))
	rep.set("transfer_http_runs_s", roundAll(httpS))
	rep.set("transfer_ws_runs_s", roundAll(wsS))
	// Each run pairs the two back to back; the median of the pairs'
	// ratios is less sensitive to a shared machine's load swings.
	ratio := median(ratios)
	rep.target("transfer_ws_vs_http_x", ratio, ">= 0.7", ratio >= 0.7)
	rep.set("transfer_ws_vs_http_runs_x", roundAll(ratios))
	// CPU (this process: server and client sides) per MB moved.
	rep.set("transfer_http_cpu_ms_per_mb", round(median(httpCPU)*1000/mb))
	rep.set("transfer_ws_cpu_ms_per_mb", round(median(wsCPU)*1000/mb))
	rep.set("transfer_ws_installed_vs_http_x", round(median(httpS)/median(wsInstS)))
	return nil
}

// cpuTime is this process's user + system CPU seconds.
func cpuTime() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func roundAll(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = round(x)
	}
	return out
}

// benchLatency: a server with one companion (the sync engine on a store)
// and n-1 raw websocket subscribers; rows are posted over HTTP one at a
// time and timed until the companion's store serves them.
func benchLatency(rep *report, c config, dir string, n int) error {
	raiseNoFile(uint64(2*n + 512))
	home := filepath.Join(dir, fmt.Sprintf("server-lat-%d", n))
	srv, hs, err := startBigServer(home)
	if err != nil {
		return err
	}
	defer stopServer(srv, hs)
	head, _, _ := srv.Head("big")

	// The companion.
	st, err := localcache.Open(filepath.Join(dir, fmt.Sprintf("companion-lat-%d", n)), &localcache.Options{CompactRows: -1, CompactBytes: -1})
	if err != nil {
		return err
	}
	defer st.Close()
	ctx, cancel := context.WithCancel(context.Background())
	eng := client.New(wiring.Sink{Store: st}, client.Options{Server: hs.URL, Name: "companion"})
	engDone := make(chan struct{})
	go func() { eng.Run(ctx); close(engDone) }()
	defer func() { cancel(); <-engDone }()
	for {
		if _, id, _, err := st.State("big"); err == nil && id == head.Snapshot {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Visibility: the store's Watch runs after a batch is visible.
	seen := make(chan time.Time, 16)
	unwatch := st.Watch(func(ds string, ids []string) {
		if slices.Contains(ids, "LAT") {
			select {
			case seen <- time.Now():
			default:
			}
		}
	})
	defer unwatch()

	// The other subscribers read and discard.
	subs, err := wsload.DialSubscribers(hs.URL, n-1, protocol.Sub{Dataset: "big", Epoch: head.Epoch, Snapshot: head.Snapshot, Seq: head.Seq})
	if err != nil {
		return err
	}
	defer func() {
		for _, ws := range subs {
			ws.Close()
		}
	}()
	logf("latency: %d subscribers (1 companion + %d websocket clients)", n, n-1)

	hc := &http.Client{}
	var lat, acks []time.Duration
	day := time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range c.samples + 10 {
		period := day.AddDate(0, 0, i)
		v := float64(i) + 0.5
		body := fmt.Sprintf(`{"rows":[{"series_id":"LAT","period":"%s","value":%g,"frequency":"D"}]}`, period.Format("2006-01-02"), v)
		t0 := time.Now()
		resp, err := hc.Post(hs.URL+"/v1/datasets/big/rows", "application/json", strings.NewReader(body))
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		tAck := time.Now()
		if resp.StatusCode != 200 {
			return fmt.Errorf("post: %s", resp.Status)
		}
		var t1 time.Time
		select {
		case t1 = <-seen:
		case <-time.After(30 * time.Second):
			return fmt.Errorf("row %d not visible on the companion after 30 s", i)
		}
		// Get through the store, as the functions do.
		p, vals, err := st.Copy("LAT", period.Unix(), period.Unix())
		if err != nil || len(p) != 1 || vals[0] != v {
			return fmt.Errorf("row %d: Get returned %v %v %v", i, p, vals, err)
		}
		if i >= 10 { // warm-up
			lat = append(lat, t1.Sub(t0))
			acks = append(acks, tAck.Sub(t0))
		}
		time.Sleep(time.Duration(5+rand.IntN(10)) * time.Millisecond)
	}
	p50, p99 := percentile(lat, 0.5), percentile(lat, 0.99)
	key := fmt.Sprintf("latency_%d_subs", n)
	switch n {
	case 100:
		rep.target(key+"_p50_ms", ms(p50), "<= 5", ms(p50) <= 5)
		rep.target(key+"_p99_ms", ms(p99), "<= 50", ms(p99) <= 50)
	case 1000:
		rep.set(key+"_p50_ms", round(ms(p50)))
		rep.target(key+"_p99_ms", ms(p99), "<= 200", ms(p99) <= 200)
	default:
		rep.set(key+"_p50_ms", round(ms(p50)))
		rep.set(key+"_p99_ms", round(ms(p99)))
	}
	rep.set(key+"_max_ms", round(ms(percentile(lat, 1))))
	// The server's part: POST until its answer (rows durable in its
	// history and store, fanned out to the subscribers' queues).
	rep.set(key+"_post_ack_p50_ms", round(ms(percentile(acks, 0.5))))
	rep.set(key+"_post_ack_p99_ms", round(ms(percentile(acks, 0.99))))
	logf("latency with %d subscribers: p50 %v p99 %v (POST answered: p50 %v p99 %v)", n, p50.Round(time.Microsecond), p99.Round(time.Microsecond),
		percentile(acks, 0.5).Round(time.Microsecond), percentile(acks, 0.99).Round(time.Microsecond))
	return nil
}

func raiseNoFile(n uint64) {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil && rl.Cur < n {
		rl.Cur = min(n, rl.Max)
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
}

// memNow returns the Go heap in use plus goroutine stacks, after a GC.
func memNow() (heap, stack uint64) {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse, m.StackInuse
}

// benchMemory: the server in this process, c.idle idle subscribers in a
// child process; the server's Go heap + stacks before and after, per
// connection.
func benchMemory(rep *report, c config, dir string) error {
	raiseNoFile(uint64(c.idle + 512))
	home := filepath.Join(dir, "server-mem")
	srv, hs, err := startBigServer(home)
	if err != nil {
		return err
	}
	defer stopServer(srv, hs)
	// One connection first, so that one-off allocations (buffer pools,
	// the dataset's state) are not counted per connection.
	head, _, _ := srv.Head("big")
	warm, err := wsload.DialSubscribers(hs.URL, 1, protocol.Sub{Dataset: "big", Epoch: head.Epoch, Snapshot: head.Snapshot, Seq: head.Seq})
	if err != nil {
		return err
	}
	defer warm[0].Close()
	h0, s0 := memNow()
	g0 := runtime.NumGoroutine()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, "--child", "idle", "--server", hs.URL, "--idle", strconv.Itoa(c.idle))
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready") {
		return fmt.Errorf("idle child: %q %v", line, err)
	}
	if got := srv.Hub().Stats().Connections; got != int64(c.idle+1) {
		return fmt.Errorf("%d connections, want %d", got, c.idle+1)
	}
	time.Sleep(time.Second) // let the handshakes' garbage go
	h1, s1 := memNow()
	g1 := runtime.NumGoroutine()
	per := (float64(h1+s1) - float64(h0+s0)) / float64(c.idle)
	rep.set("memory_idle_conns", c.idle)
	rep.target("memory_per_idle_conn_kib", per/1024, "<= 64", per/1024 <= 64)
	rep.set("memory_per_idle_conn_heap_kib", round((float64(h1)-float64(h0))/float64(c.idle)/1024))
	rep.set("memory_per_idle_conn_stack_kib", round((float64(s1)-float64(s0))/float64(c.idle)/1024))
	rep.set("memory_goroutines_per_conn", round(float64(g1-g0)/float64(c.idle)))
	logf("memory: %d idle connections: %.1f KiB each (heap %.1f, stacks %.1f)", c.idle, per/1024,
		(float64(h1)-float64(h0))/float64(c.idle)/1024, (float64(s1)-float64(s0))/float64(c.idle)/1024)
	return nil
}

// childIdle holds n idle subscribers of dataset big, caught up at its
// head, until stdin closes.
func childIdle(url string, n int) error {
	raiseNoFile(uint64(n + 256))
	resp, err := http.Get(url + "/v1/datasets")
	if err != nil {
		return err
	}
	var heads struct{ Datasets []protocol.Head }
	err = json.NewDecoder(resp.Body).Decode(&heads)
	resp.Body.Close()
	if err != nil || len(heads.Datasets) == 0 {
		return fmt.Errorf("heads: %v %v", heads, err)
	}
	h := heads.Datasets[0]
	conns, err := wsload.DialSubscribers(url, n, protocol.Sub{Dataset: h.Dataset, Epoch: h.Epoch, Snapshot: h.Snapshot, Seq: h.Seq})
	if err != nil {
		return err
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	for _, ws := range conns {
		ws.Close()
	}
	return nil
}

// childCompanion runs the sync engine on a companion home (what es
// companion --server runs, minus the Excel bridge) until killed.
func childCompanion(url, home string, bandwidth int64) error {
	st, err := localcache.Open(home, &localcache.Options{CompactRows: -1, CompactBytes: -1})
	if err != nil {
		return err
	}
	defer st.Close()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	eng := client.New(wiring.Sink{Store: st}, client.Options{Server: url, Name: "companion", BandwidthLimit: bandwidth, Logger: log})
	go reportDownloads(eng, os.Stdout)
	return eng.Run(context.Background())
}

// reportDownloads writes each download the engine completes to w as a
// JSON line (client.DownloadMetrics): the parent reads the figures from
// there, not from the log.
func reportDownloads(eng *client.Engine, w io.Writer) {
	enc := json.NewEncoder(w)
	seen := 0
	for {
		m := eng.Metrics()
		for _, d := range m.Downloads[min(seen, len(m.Downloads)):] {
			enc.Encode(d)
		}
		seen = len(m.Downloads)
		time.Sleep(10 * time.Millisecond)
	}
}

// childDownload returns the first download a child reported on its
// stdout (reportDownloads), if any yet.
func childDownload(stdout string) (client.DownloadMetrics, bool) {
	dec := json.NewDecoder(strings.NewReader(stdout))
	var d client.DownloadMetrics
	if err := dec.Decode(&d); err != nil {
		return client.DownloadMetrics{}, false
	}
	return d, true
}

// benchResume: a companion child downloading the snapshot at a limited
// rate is SIGKILLed with 40-60% on disk and restarted unthrottled; the
// download it reports on stdout (reportDownloads) says how much it fetched
// and how much it kept.
func benchResume(rep *report, c config, dir, serverHome string, size int64) error {
	srv, hs, err := startServer(serverHome)
	if err != nil {
		return err
	}
	defer stopServer(srv, hs)
	head, _, _ := srv.Head("big")
	home := filepath.Join(dir, "companion-resume")
	os.RemoveAll(home)
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	var errb lockedBuf
	cmd := exec.Command(exe, "--child", "companion", "--server", hs.URL, "--home", home, "--bandwidth", strconv.FormatInt(c.bandwidth, 10))
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		return err
	}
	killAt := size * int64(40+rand.IntN(20)) / 100
	deadline := time.Now().Add(5 * time.Minute)
	for held(home) < killAt {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			return fmt.Errorf("download did not reach %d bytes: %s", killAt, errb.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	onDisk := held(home)
	logf("resume: killed with %d of %d bytes on disk", onDisk, size)

	var out, dls lockedBuf
	cmd = exec.Command(exe, "--child", "companion", "--server", hs.URL, "--home", home, "--bandwidth", "0")
	cmd.Stderr, cmd.Stdout = &out, &dls
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var dl client.DownloadMetrics
	for ok := false; !ok; {
		if time.Now().After(deadline) {
			return fmt.Errorf("no download complete after restart: %s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
		dl, ok = childDownload(dls.String())
	}
	fetched, resumed := dl.Fetched, dl.Resumed
	again := onDisk - resumed
	rep.set("resume_bytes_on_disk_at_kill", onDisk)
	rep.set("resume_bytes_kept", resumed)
	rep.set("resume_bytes_fetched_after", fetched)
	rep.target("resume_bytes_downloaded_twice", float64(again), fmt.Sprintf("<= %d", format.ChunkSize), again <= format.ChunkSize)
	if _, id, _, err := readState(home); err != nil || id != head.Snapshot {
		// The child may still be installing; give it a moment.
		time.Sleep(2 * time.Second)
		if _, id, _, err = readState(home); err != nil || id != head.Snapshot {
			return fmt.Errorf("after the restart the companion holds %q (%v), want %s", id, err, head.Snapshot)
		}
	}
	return nil
}

// lockedBuf is a buffer a child's output is copied into while it is read.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func readState(home string) (uint64, string, uint64, error) {
	st, err := localcache.Open(home, &localcache.Options{ReadOnly: true})
	if err != nil {
		return 0, "", 0, err
	}
	defer st.Close()
	return st.State("big")
}

// held is the bytes of a download on disk in staging directories.
func held(home string) int64 {
	var n int64
	dirs, _ := filepath.Glob(filepath.Join(home, localcache.DatasetsDir, "*", format.SnapshotsDir, ".dl-*"))
	for _, d := range dirs {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if info, err := e.Info(); err == nil && e.Name() != format.ManifestFile {
				n += info.Size()
			}
		}
	}
	return n
}
