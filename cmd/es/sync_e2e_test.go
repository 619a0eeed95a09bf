package main

// End-to-end tests of the central server and background sync with real
// processes on loopback: `es serve` and `es companion --server` run as
// child processes (this test binary re-executed as es, see init below), a
// test-side ticker posts rows over HTTP, and processes are killed with
// SIGKILL mid-transfer and mid-stream.
//
//	go test ./cmd/es -run TestSyncE2E -v             # the default forms (~1 min)
//	ES_NIGHTLY=1 go test ./cmd/es -run TestSyncE2E   # the long forms (2M rows)

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/sync/client"
)

// e2eChildEnv makes this test binary run as the es command: the children
// of these tests are the same main code (run) as the installed binary,
// without a separate `go build` (which costs tens of seconds of linking on
// a loaded machine).
const e2eChildEnv = "ES_E2E_CHILD"

func init() {
	if os.Getenv(e2eChildEnv) == "1" {
		// Not on the init goroutine: the runtime locks it to its OS thread
		// during init, and a coroutine (iter.Pull, which iceberg-go's
		// writer uses when a lake publishes) created there and resumed from
		// another goroutine is a fatal error.
		code := make(chan int)
		go func() { code <- run(&env{stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:]) }()
		os.Exit(<-code)
	}
}

func nightly() bool { return os.Getenv("ES_NIGHTLY") == "1" }

// esProc is a running es child process.
type esProc struct {
	t      *testing.T
	name   string
	args   []string
	cmd    *exec.Cmd
	stdout syncBuffer
	stderr syncBuffer
	done   chan struct{}
}

func startES(t *testing.T, name string, args ...string) *esProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &esProc{t: t, name: name, args: args, done: make(chan struct{})}
	p.cmd = exec.Command(exe, args...)
	p.cmd.Env = append(os.Environ(), e2eChildEnv+"=1")
	p.cmd.Stdout = &p.stdout
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if strings.Contains(p.stderr.String(), "WARNING: DATA RACE") {
			t.Errorf("%s: the race detector reported a data race", p.name)
		}
		if t.Failed() {
			t.Logf("--- %s (%s) stderr, last 8 KB:\n%s", p.name, strings.Join(p.args, " "), lastBytes(p.stderr.String(), 8<<10))
		}
	})
	return p
}

func lastBytes(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func (p *esProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *esProc) kill() {
	if !p.exited() {
		p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// waitStdout waits for a line of stdout matching re and returns its
// submatches.
func (p *esProc) waitStdout(re *regexp.Regexp, timeout time.Duration) []string {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if m := re.FindStringSubmatch(p.stdout.String()); m != nil {
			return m
		}
		if p.exited() {
			p.t.Fatalf("%s exited before printing %q: %s\nstdout: %s", p.name, re, p.cmd.ProcessState, p.stdout.String())
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s did not print %q within %v", p.name, re, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logCount counts the log lines of stderr that contain every one of subs.
func (p *esProc) logCount(subs ...string) int {
	n := 0
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(line, s)
		}
		if all {
			n++
		}
	}
	return n
}

// e2eServer is an es serve child process and what its clients need.
type e2eServer struct {
	t            *testing.T
	home         string
	url, addr    string
	write, read  string
	p            *esProc
	extraArgs    []string
	restarts     int
	httpc        *http.Client
	startTimeout time.Duration
}

// newE2EServer makes a server home with a write and a read token. The
// caller cooks datasets into home before start.
func newE2EServer(t *testing.T, home string) *e2eServer {
	s := &e2eServer{t: t, home: home, httpc: &http.Client{Timeout: 30 * time.Second}, startTimeout: 60 * time.Second}
	s.write = strings.TrimSpace(mustES(t, "token", "add", "--home", home, "--name", "ingest", "--scope", "write"))
	s.read = strings.TrimSpace(mustES(t, "token", "add", "--home", home, "--name", "companions", "--scope", "read"))
	t.Cleanup(s.httpc.CloseIdleConnections)
	return s
}

var listeningRE = regexp.MustCompile(`listening on (http://(\S+))\n`)

// start runs es serve on listen ("127.0.0.1:0" the first time, the same
// address after a kill).
func (s *e2eServer) start(listen string) {
	s.t.Helper()
	name := "server"
	if s.restarts > 0 {
		name = fmt.Sprintf("server (restart %d)", s.restarts)
	}
	s.restarts++
	s.p = startES(s.t, name, append([]string{"serve", "--home", s.home, "--listen", listen}, s.extraArgs...)...)
	m := s.p.waitStdout(listeningRE, s.startTimeout)
	if s.url == "" {
		s.url, s.addr = m[1], m[2]
	} else if s.url != m[1] {
		s.t.Fatalf("restarted on %s, was %s", m[1], s.url)
	}
}

func (s *e2eServer) do(method, path, token, ctype string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(method, s.url+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := s.httpc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

type headJSON struct {
	Dataset  string `json:"dataset"`
	Epoch    uint64 `json:"epoch"`
	Snapshot string `json:"snapshot"`
	Seq      uint64 `json:"seq"`
	Bytes    int64  `json:"bytes"`
}

func (s *e2eServer) head(ds string) headJSON {
	s.t.Helper()
	code, b, err := s.do("GET", "/v1/datasets", s.read, "", nil)
	if err != nil || code != 200 {
		s.t.Fatalf("GET /v1/datasets: %d %v %s", code, err, b)
	}
	var out struct{ Datasets []headJSON }
	if err := json.Unmarshal(b, &out); err != nil {
		s.t.Fatal(err)
	}
	for _, h := range out.Datasets {
		if h.Dataset == ds {
			return h
		}
	}
	s.t.Fatalf("server has no dataset %s: %s", ds, b)
	return headJSON{}
}

// tickRow is one row the ticker posts: series TICK.<k>, a day, a value.
type tickRow struct {
	Series string
	Period string
	Value  float64
}

func tickRowN(i int) tickRow {
	day := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i/5)
	return tickRow{Series: fmt.Sprintf("TICK.%d", i%5), Period: day.Format("2006-01-02"), Value: float64(i) + 0.25}
}

// post sends rows; ok is false when the server did not answer 200 (the
// rows may or may not be durable then).
func (s *e2eServer) post(ds string, rows []tickRow) (lastSeq uint64, err error) {
	type row struct {
		SeriesID  string  `json:"series_id"`
		Period    string  `json:"period"`
		Value     float64 `json:"value"`
		Frequency string  `json:"frequency"`
		Name      string  `json:"name"`
	}
	var body struct {
		Rows []row `json:"rows"`
	}
	for _, r := range rows {
		body.Rows = append(body.Rows, row{r.Series, r.Period, r.Value, "D", "ticker " + r.Series})
	}
	b, _ := json.Marshal(body)
	code, resp, err := s.do("POST", "/v1/datasets/"+ds+"/rows", s.write, "application/json", b)
	if err != nil {
		return 0, err
	}
	if code != 200 {
		return 0, fmt.Errorf("post rows: %d %s", code, resp)
	}
	var ack struct {
		LastSeq uint64 `json:"last_seq"`
	}
	err = json.Unmarshal(resp, &ack)
	return ack.LastSeq, err
}

// ticker posts tickRowN(0), (1), ... every interval until stopped,
// retrying a row until the server takes it (through a server restart).
type ticker struct {
	stop chan struct{}
	done chan struct{}
	sent atomic.Int64 // rows acknowledged
	errs atomic.Int64 // failed posts (retried)
}

func startTicker(s *e2eServer, ds string, every time.Duration) *ticker {
	tk := &ticker{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(tk.done)
		for i := 0; ; {
			select {
			case <-tk.stop:
				return
			case <-time.After(every):
			}
			if _, err := s.post(ds, []tickRow{tickRowN(i)}); err != nil {
				tk.errs.Add(1)
				continue
			}
			i++
			tk.sent.Add(1)
		}
	}()
	return tk
}

func (tk *ticker) halt() int {
	close(tk.stop)
	<-tk.done
	return int(tk.sent.Load())
}

// e2eCompanion is an es companion --server child process.
type e2eCompanion struct {
	t       *testing.T
	name    string
	home    string
	metrics string // its --sync-metrics file
	args    []string
	p       *esProc
}

func newE2ECompanion(t *testing.T, name, server, token string, extra ...string) *e2eCompanion {
	dir := t.TempDir()
	c := &e2eCompanion{t: t, name: name, home: filepath.Join(dir, name), metrics: filepath.Join(dir, name+"-metrics.json")}
	c.args = append([]string{"companion", "--home", c.home, "--server", server, "--token", token, "--port", "0", "-v", "--sync-metrics", c.metrics}, extra...)
	return c
}

// waitMetrics waits until the companion's --sync-metrics file (written
// within 50 ms of a change) satisfies ok, and returns it.
func (c *e2eCompanion) waitMetrics(what string, timeout time.Duration, ok func(client.Metrics) bool) client.Metrics {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var m client.Metrics
		b, err := os.ReadFile(c.metrics)
		if err == nil {
			if err := json.Unmarshal(b, &m); err != nil {
				c.t.Fatalf("%s: %v", c.metrics, err)
			}
			if ok(m) {
				return m
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: no %s in %v (metrics: %s)", c.name, what, timeout, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitDownload waits until the companion's metrics report a completed
// download of snapshot and returns its accounting.
func (c *e2eCompanion) waitDownload(snapshot string, timeout time.Duration) client.DownloadMetrics {
	c.t.Helper()
	m := c.waitMetrics("completed download of "+snapshot, timeout, func(m client.Metrics) bool {
		_, ok := m.Download(snapshot)
		return ok
	})
	d, _ := m.Download(snapshot)
	return d
}

func (c *e2eCompanion) start() {
	c.p = startES(c.t, c.name, c.args...)
}

// homeState reads a home's state of a dataset read-only, as `es ls` does
// (another process may be writing it).
func homeState(home, ds string) (epoch uint64, snap string, seq uint64, err error) {
	st, err := openStore(home) // a server home's snapshots are in its lake
	if err != nil {
		return 0, "", 0, err
	}
	defer st.Close()
	return st.State(ds)
}

// waitState waits until the companion holds snapshot snap (any, if "")
// and seq >= seq.
func (c *e2eCompanion) waitState(ds, snap string, seq uint64, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		_, id, s, err := homeState(c.home, ds)
		if err == nil && (snap == "" || id == snap) && s >= seq {
			return
		}
		last = fmt.Sprintf("snapshot %s seq %d err %v", id, s, err)
		if c.p != nil && c.p.exited() {
			c.t.Fatalf("%s exited: %s", c.name, c.p.cmd.ProcessState)
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: wanted snapshot %q seq >= %d within %v; has %s", c.name, snap, seq, timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// esGet is `es get --home HOME SERIES` (read-only).
func esGet(t *testing.T, home, series string) string {
	t.Helper()
	return mustES(t, "get", "--home", home, series)
}

// walRecords reads a dataset's write-ahead log read-only: the records
// above covers. A server home's are in its delta log (read through its
// running node, or one started for the call).
func walRecords(t *testing.T, home, ds string, covers uint64) []format.Record {
	t.Helper()
	if serverHome(home) {
		return logRecords(t, home, ds, covers)
	}
	_, recs, err := delta.OpenWAL(filepath.Join(home, localcache.DatasetsDir, ds, localcache.WALDir), true, covers, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// checkSameDataset compares a companion's dataset with the server's: the
// same snapshot (byte-identical: the store verified every SHA-256 when it
// installed it), the same head seq, the same delta records above the
// snapshot with every seq exactly once and none missing, and the same
// `es get` output for each of series.
func checkSameDataset(t *testing.T, serverHome string, c *e2eCompanion, ds string, series []string) {
	t.Helper()
	sEp, sSnap, sSeq, err := homeState(serverHome, ds)
	if err != nil {
		t.Fatal(err)
	}
	cEp, cSnap, cSeq, err := homeState(c.home, ds)
	if err != nil {
		t.Fatal(err)
	}
	if sEp != cEp || sSnap != cSnap || sSeq != cSeq {
		t.Fatalf("%s: epoch %d snapshot %s seq %d; server epoch %d snapshot %s seq %d", c.name, cEp, cSnap, cSeq, sEp, sSnap, sSeq)
	}
	m, err := format.ReadManifest(filepath.Join(c.home, localcache.DatasetsDir, ds, format.SnapshotsDir, cSnap))
	if err != nil {
		t.Fatal(err)
	}
	sRecs := walRecords(t, serverHome, ds, m.CoversThroughSeq)
	cRecs := walRecords(t, c.home, ds, m.CoversThroughSeq)
	for i, r := range cRecs {
		if want := m.CoversThroughSeq + uint64(i) + 1; r.Seq != want {
			t.Fatalf("%s: record %d of the log has seq %d, want %d (a gap or a duplicate)", c.name, i, r.Seq, want)
		}
	}
	if uint64(len(cRecs)) != cSeq-m.CoversThroughSeq {
		t.Fatalf("%s: %d records above seq %d, head %d", c.name, len(cRecs), m.CoversThroughSeq, cSeq)
	}
	if !reflect.DeepEqual(sRecs, cRecs) {
		t.Fatalf("%s: delta records differ from the server's (%d vs %d records)", c.name, len(cRecs), len(sRecs))
	}
	for _, id := range series {
		if a, b := esGet(t, serverHome, id), esGet(t, c.home, id); a != b {
			t.Fatalf("%s: es get %s differs:\n%s\nserver:\n%s", c.name, id, lastBytes(b, 400), lastBytes(a, 400))
		}
	}
}

func cookStocks(t *testing.T, home string) {
	t.Helper()
	mustES(t, "cook", "--home", home, "--dataset", "stocks", "--in", "../../server/cook/samples/stocks.csv",
		"--series-col", "symbol", "--period-col", "date", "--value-col", "price", "--frequency", "M")
}

func skipE2E(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("uses SIGKILL")
	}
	if testing.Short() {
		t.Skip("real processes; skipped with -short")
	}
}

// TestSyncE2E runs the end-to-end forms in parallel (they mostly wait on
// processes and the network).
func TestSyncE2E(t *testing.T) {
	skipE2E(t)
	big := &bigDataset{dir: t.TempDir()}
	t.Run("Live", func(t *testing.T) { t.Parallel(); testE2ELive(t) })
	t.Run("ServerKill", func(t *testing.T) { t.Parallel(); testE2EServerKill(t) })
	t.Run("ResumeAfterKill", func(t *testing.T) { t.Parallel(); testE2EResumeAfterKill(t, big) })
	t.Run("CorruptingProxy", func(t *testing.T) { t.Parallel(); testE2ECorruptingProxy(t, big) })
	t.Run("HealDamaged", func(t *testing.T) { t.Parallel(); testE2EHealDamaged(t, big) })
}

// testE2ELive: initial sync of two companions, live rows visible on
// both through `es get`, and a server compaction that both rebase on by
// compacting locally (same SHA-256s, nothing downloaded).
func testE2ELive(t *testing.T) {
	srv := newE2EServer(t, t.TempDir())
	cookStocks(t, srv.home)
	srv.start("127.0.0.1:0")
	h := srv.head("stocks")

	c1 := newE2ECompanion(t, "companion-1", srv.url, srv.read)
	c2 := newE2ECompanion(t, "companion-2", srv.url, srv.read, "--datasets", "stocks")
	c1.start()
	c2.start()
	for _, c := range []*e2eCompanion{c1, c2} {
		c.waitState("stocks", h.Snapshot, 0, 60*time.Second)
		c.waitDownload(h.Snapshot, 30*time.Second)
		if got, want := esGet(t, c.home, "MSFT"), esGet(t, srv.home, "MSFT"); got != want || !strings.Contains(got, "2000-01-01,39.81\n") {
			t.Fatalf("%s: MSFT after the initial sync:\n%s", c.name, lastBytes(got, 300))
		}
	}

	// Live rows: each visible on both companions.
	var rows []tickRow
	for i := range 20 {
		rows = append(rows, tickRowN(i))
	}
	last, err := srv.post("stocks", rows[:10])
	if err != nil {
		t.Fatal(err)
	}
	for i := 10; i < 20; i++ {
		if last, err = srv.post("stocks", rows[i:i+1]); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []*e2eCompanion{c1, c2} {
		c.waitState("stocks", h.Snapshot, last, 30*time.Second)
		got := esGet(t, c.home, "TICK.3")
		if !strings.Contains(got, "2030-01-01,3.25\n") || !strings.Contains(got, "2030-01-04,18.25\n") {
			t.Fatalf("%s: TICK.3:\n%s", c.name, got)
		}
	}

	// Server compaction: both rebase by compacting locally.
	code, b, err := srv.do("POST", "/v1/datasets/stocks/compact", srv.write, "", nil)
	if err != nil || code != 200 {
		t.Fatalf("compact: %d %v %s", code, err, b)
	}
	var m format.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.CoversThroughSeq != last {
		t.Fatalf("compaction covers %d, want %d", m.CoversThroughSeq, last)
	}
	for _, c := range []*e2eCompanion{c1, c2} {
		c.waitState("stocks", m.SnapshotID, last, 30*time.Second)
		mt := c.waitMetrics("local rebase", 10*time.Second, func(m client.Metrics) bool { return m.LocalRebases >= 1 })
		if mt.LocalRebases != 1 {
			t.Errorf("%s rebased locally %d times, want 1", c.name, mt.LocalRebases)
		}
		if n := mt.DownloadRebases; n != 1 {
			t.Errorf("%s downloaded %d snapshots, want 1 (the initial one)", c.name, n)
		}
	}
	// Live again on the new snapshot.
	if last, err = srv.post("stocks", []tickRow{tickRowN(20)}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*e2eCompanion{c1, c2} {
		c.waitState("stocks", m.SnapshotID, last, 30*time.Second)
		checkSameDataset(t, srv.home, c, "stocks", []string{"MSFT", "TICK.0", "TICK.1", "TICK.2", "TICK.3", "TICK.4"})
	}
}

// testE2EServerKill: the server is SIGKILLed while a ticker posts
// rows, and restarted on the same port. Both companions reconnect and
// converge: the same snapshot, the same records with every seq exactly
// once, and the same values for every touched series.
func testE2EServerKill(t *testing.T) {
	srv := newE2EServer(t, t.TempDir())
	cookStocks(t, srv.home)
	srv.start("127.0.0.1:0")
	h := srv.head("stocks")
	c1 := newE2ECompanion(t, "companion-1", srv.url, srv.read)
	c2 := newE2ECompanion(t, "companion-2", srv.url, srv.read)
	c1.start()
	c2.start()
	for _, c := range []*e2eCompanion{c1, c2} {
		c.waitState("stocks", h.Snapshot, 0, 60*time.Second)
	}

	kills := 1
	if nightly() {
		kills = 5
	}
	tk := startTicker(srv, "stocks", 5*time.Millisecond)
	for k := range kills {
		// Let rows flow, then kill the server mid-stream.
		target := tk.sent.Load() + 30
		for tk.sent.Load() < target {
			time.Sleep(5 * time.Millisecond)
		}
		srv.p.kill()
		t.Logf("kill %d: server killed after %d rows acknowledged", k+1, tk.sent.Load())
		time.Sleep(time.Duration(100+rand.IntN(400)) * time.Millisecond)
		srv.start(srv.addr)
	}
	// More rows after the last restart, then stop.
	target := tk.sent.Load() + 30
	for tk.sent.Load() < target {
		time.Sleep(5 * time.Millisecond)
	}
	n := tk.halt()
	t.Logf("ticker: %d rows acknowledged, %d failed posts retried", n, tk.errs.Load())

	h = srv.head("stocks")
	if h.Seq < uint64(n) {
		t.Fatalf("server head %d < %d acknowledged rows", h.Seq, n)
	}
	for _, c := range []*e2eCompanion{c1, c2} {
		c.waitState("stocks", h.Snapshot, h.Seq, 90*time.Second)
	}
	series := []string{"MSFT"}
	for k := range 5 {
		series = append(series, fmt.Sprintf("TICK.%d", k))
	}
	for _, c := range []*e2eCompanion{c1, c2} {
		checkSameDataset(t, srv.home, c, "stocks", series)
		c.waitMetrics(fmt.Sprintf("%d reconnects", kills), 10*time.Second, func(m client.Metrics) bool { return m.Reconnects >= int64(kills) })
	}
	// Every acknowledged row is there (no gap on the server side either).
	got := esGet(t, c1.home, "TICK.4")
	for i := 4; i < n; i += 5 {
		r := tickRowN(i)
		if !strings.Contains(got, r.Period+","+strconv.FormatFloat(r.Value, 'g', -1, 64)+"\n") {
			t.Fatalf("acknowledged row %d (%v) missing from the companion:\n%s", i, r, lastBytes(got, 400))
		}
	}
}

// bigDataset is a synthetic dataset cooked once (by the first test that
// needs it) into a template server home that tests copy. Default 1M rows
// (data.arrow ~16 MB: four 4 MiB chunks); 2M with ES_NIGHTLY=1.
type bigDataset struct {
	dir  string // the parent test's
	once sync.Once
	err  error
}

func (b *bigDataset) home(t *testing.T) string {
	t.Helper()
	b.once.Do(func() {
		rows := "1000000"
		if nightly() {
			rows = "2000000"
		}
		src := filepath.Join(b.dir, "big.csv")
		var out, errb bytes.Buffer
		if code := run(&env{stdout: &out, stderr: &errb}, []string{"gen", "--series", "20000", "--rows", rows, "--seed", "3", "--out", src}); code != 0 {
			b.err = fmt.Errorf("gen: %s", errb.String())
			return
		}
		if code := run(&env{stdout: &out, stderr: &errb}, []string{"cook", "--home", filepath.Join(b.dir, "home"), "--dataset", "big", "--in", src}); code != 0 {
			b.err = fmt.Errorf("cook: %s", errb.String())
			return
		}
		os.Remove(src)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	home := t.TempDir()
	if err := os.CopyFS(home, os.DirFS(filepath.Join(b.dir, "home"))); err != nil {
		t.Fatal(err)
	}
	return home
}

// testE2EResumeAfterKill: a companion slowed by --bandwidth is
// SIGKILLed in the middle of a snapshot download and restarted: it
// completes, keeping every verified 4 MiB chunk of its .partial file, so
// it downloads at most one chunk twice.
func testE2EResumeAfterKill(t *testing.T, big *bigDataset) {
	srv := newE2EServer(t, big.home(t))
	srv.start("127.0.0.1:0")
	h := srv.head("big")
	bw := "3000000"
	if nightly() {
		bw = "4000000"
	}
	c := newE2ECompanion(t, "companion", srv.url, srv.read, "--bandwidth", bw)
	c.start()
	// Kill it once it holds more than 1.5 chunks of the download.
	deadline := time.Now().Add(90 * time.Second)
	for {
		held, _ := localcache.StagedBytes(c.home, "big")
		if held > format.ChunkSize*3/2 {
			break
		}
		if time.Now().After(deadline) || c.p.exited() {
			t.Fatalf("the download did not get going: %d bytes held", held)
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.p.kill()
	held, partial := localcache.StagedBytes(c.home, "big")
	if held >= h.Bytes {
		t.Fatalf("the download finished before the kill (%d of %d bytes)", held, h.Bytes)
	}
	t.Logf("killed with %d of %d bytes on disk (%d in .partial files)", held, h.Bytes, partial)

	c.start()
	c.waitState("big", h.Snapshot, 0, 120*time.Second)
	dl := c.waitDownload(h.Snapshot, 30*time.Second)
	fetched, resumed := dl.Fetched, dl.Resumed
	if dl.Bytes != h.Bytes || fetched+resumed != h.Bytes {
		t.Fatalf("fetched %d + resumed %d != %d bytes: %+v", fetched, resumed, h.Bytes, dl)
	}
	again := held - resumed // bytes on disk before the kill that were fetched again
	t.Logf("after restart: resumed %d bytes, fetched %d, re-downloaded %d (a chunk is %d)", resumed, fetched, again, format.ChunkSize)
	if again < 0 || again > format.ChunkSize {
		t.Fatalf("re-downloaded %d bytes after the kill; at most one chunk (%d) allowed", again, format.ChunkSize)
	}
	if m := c.waitMetrics("metrics", time.Second, func(client.Metrics) bool { return true }); m.ChunksRefetched != 0 {
		t.Fatal("a chunk mismatched on a clean loopback")
	}
	// The installed snapshot is the server's, byte for byte.
	mustES(t, "verify", "--home", c.home, "--dataset", "big")
	checkSameDataset(t, srv.home, c, "big", someSeries(t, srv.home, "big", 3))
}

// someSeries returns n series ids of a dataset.
func someSeries(t *testing.T, home, ds string, n int) []string {
	t.Helper()
	st, err := openStore(home)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hits, err := st.Search("A", n)
	if err != nil || len(hits) == 0 {
		t.Fatalf("search: %v %v", hits, err)
	}
	var out []string
	for _, h := range hits {
		out = append(out, ds+":"+h.ID)
	}
	return out
}

// chaosProxy forwards TCP connections to a target, corrupting random
// bytes of both directions and cutting connections after a random number
// of bytes from the server.
type chaosProxy struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu        sync.Mutex
	rng       *rand.Rand
	down, up  int64 // mean bytes between two corrupted bytes, server to client and back (0: none)
	cutMin    int64 // cut a connection after [cutMin, cutMax) bytes from the server (0: never)
	cutMax    int64
	conns     map[net.Conn]struct{}
	corrupted map[string]int64 // direction -> bytes corrupted

	accepted, cuts, bytesDown atomic.Int64
}

func newChaosProxy(t *testing.T, target string, seed uint64) *chaosProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &chaosProxy{t: t, ln: ln, target: target, rng: rand.New(rand.NewPCG(seed, 7)), conns: map[net.Conn]struct{}{}, corrupted: map[string]int64{}}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	})
	return p
}

// set changes the corruption rates and the cut window (for new
// connections; the rates apply at once).
func (p *chaosProxy) set(down, up, cutMin, cutMax int64) {
	p.mu.Lock()
	p.down, p.up, p.cutMin, p.cutMax = down, up, cutMin, cutMax
	p.mu.Unlock()
}

func (p *chaosProxy) count(dir string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.corrupted[dir]
}

// cutAll cuts every connection in progress.
func (p *chaosProxy) cutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	p.cuts.Add(1)
}

func (p *chaosProxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *chaosProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		go p.handle(c)
	}
}

func (p *chaosProxy) handle(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	p.conns[client], p.conns[server] = struct{}{}, struct{}{}
	cutAt := int64(-1)
	if p.cutMax > 0 {
		cutAt = p.cutMin + p.rng.Int64N(p.cutMax-p.cutMin)
	}
	p.mu.Unlock()
	closeBoth := func() {
		client.Close()
		server.Close()
		p.mu.Lock()
		delete(p.conns, client)
		delete(p.conns, server)
		p.mu.Unlock()
	}
	go func() { p.pump(server, client, "up", -1); closeBoth() }()
	p.pump(client, server, "down", cutAt)
	closeBoth()
}

// upCorruptSpan: the companion's bytes are corrupted only in the first
// ones of a connection: the upgrade request (token included) and the
// hello. A fetch whose offset is damaged into another valid number makes
// the server stream from the wrong place, which the companion only notices
// after its stall timeout (60 s; sync/client's TestCorruptChunkHeader
// covers that case with a short one).
const upCorruptSpan = 512

// pump copies src to dst, flipping random bytes at the direction's rate,
// until an error or cutAt bytes (< 0: never).
func (p *chaosProxy) pump(dst, src net.Conn, dir string, cutAt int64) {
	next := int64(-1) // offset of the next byte to corrupt
	var done int64
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			every := p.down
			if dir == "up" {
				every = p.up
			}
			if every == 0 {
				next = -1
			} else if next == -1 {
				// The first corrupted byte of a connection comes before its
				// cut: every cut connection carries at least one, and a
				// download larger than the cut window cannot get through
				// untouched (it did about once in eight runs otherwise).
				span := 2 * every
				if cutAt > done && cutAt-done < span {
					span = cutAt - done
				}
				next = done + p.rng.Int64N(span)
			}
			for next >= 0 && next < done+int64(n) {
				if dir == "up" && next >= upCorruptSpan {
					next = -2 // nothing more on this connection
					break
				}
				buf[next-done] ^= byte(1 + p.rng.IntN(255))
				p.corrupted[dir]++
				next += 1 + p.rng.Int64N(2*every)
			}
			p.mu.Unlock()
			if cutAt >= 0 && done+int64(n) >= cutAt {
				dst.Write(buf[:cutAt-done])
				p.cuts.Add(1)
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
			done += int64(n)
			if dir == "down" {
				p.bytesDown.Add(int64(n))
			}
		}
		if err != nil {
			return
		}
	}
}

// testE2ECorruptingProxy: a companion downloads a snapshot through a
// proxy that corrupts random bytes of the server's stream and cuts
// connections. Every corruption that lands in data the companion keeps is
// detected (a chunk hash mismatch makes it fetch the chunk again; a
// malformed frame or control message makes it reconnect), and it ends with
// the server's snapshot byte for byte. Then, with the proxy still cutting
// connections but no longer corrupting, live rows arrive with no gap.
func testE2ECorruptingProxy(t *testing.T, big *bigDataset) {
	srv := newE2EServer(t, big.home(t))
	srv.start("127.0.0.1:0")
	h := srv.head("big")
	seed := uint64(time.Now().UnixNano())
	t.Logf("proxy seed %d", seed)
	px := newChaosProxy(t, srv.addr, seed)
	// About one corrupted byte per 6 MB from the server (a 4 MiB chunk is
	// hit with probability ~0.5), one per KB of the companion's upgrade
	// requests and hellos, and a cut every 6 to 14 MB.
	px.set(6<<20, 1<<10, 6<<20, 14<<20)
	c := newE2ECompanion(t, "companion", px.url(), srv.read)
	c.start()
	c.waitState("big", h.Snapshot, 0, 150*time.Second)
	dl := c.waitDownload(h.Snapshot, 10*time.Second)
	down, up, cuts := px.count("down"), px.count("up"), px.cuts.Load()
	cm := c.waitMetrics("metrics", time.Second, func(client.Metrics) bool { return true })
	mismatches, malformed, reconnects := cm.ChunksRefetched, cm.Malformed, cm.Reconnects
	refused := int64(srv.p.logCount("refusing connection")) + cm.Unauthorized
	t.Logf("proxy: %d connections, %d bytes down, %d bytes corrupted down and %d up, %d cuts; companion: %d chunk mismatches, %d malformed frames, %d reconnects; server: %d refusals; download %+v",
		px.accepted.Load(), px.bytesDown.Load(), down, up, cuts, mismatches, malformed, reconnects, refused, dl)
	if down == 0 {
		t.Fatal("the proxy corrupted nothing")
	}
	if mismatches+malformed+reconnects == 0 {
		t.Fatal("no corruption was detected")
	}
	if dl.RefetchedChunks != mismatches {
		t.Errorf("%d refetched chunks in the download's metrics %+v, %d chunk mismatches in the engine's", dl.RefetchedChunks, dl, mismatches)
	}
	mustES(t, "verify", "--home", c.home, "--dataset", "big")

	// Live rows through the proxy, no longer corrupting but cutting the
	// connection every 10 rows.
	px.set(0, 0, 0, 0)
	var last uint64
	for i := range 100 {
		var err error
		if last, err = srv.post("big", []tickRow{tickRowN(i)}); err != nil {
			t.Fatal(err)
		}
		if i%10 == 9 {
			px.cutAll()
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.waitState("big", h.Snapshot, last, 90*time.Second)
	checkSameDataset(t, srv.home, c, "big", append(someSeries(t, srv.home, "big", 2), "TICK.0", "TICK.4"))
	t.Logf("live phase: %d more cuts", px.cuts.Load()-cuts)
}

// logRecords reads dataset ds's records above covers from a server
// home's delta log.
func logRecords(t *testing.T, home, ds string, covers uint64) []format.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := server.ReadHomeLog(ctx, home, ds, covers+1)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}
