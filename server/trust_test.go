package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/sync/protocol"
)

const stocksQuery = "?series_col=symbol&period_col=date&value_col=price&frequency=M"

// liveServer is a Server behind its own HTTPServer and LimitListener on
// 127.0.0.1 (the connection limits apply, unlike httptest.NewServer).
type liveServer struct {
	t           testing.TB
	home        string
	srv         *Server
	hs          *http.Server
	url, addr   string
	read, write string
	done        chan struct{}
}

func startLive(t testing.TB, home string, o Options) *liveServer {
	t.Helper()
	tokens, err := LoadTokens(filepath.Join(home, TokensFile))
	if err != nil {
		t.Fatal(err)
	}
	ls := &liveServer{t: t, home: home, done: make(chan struct{})}
	if tokens.Empty() {
		if ls.read, err = tokens.Add("r", ScopeRead); err != nil {
			t.Fatal(err)
		}
		if ls.write, err = tokens.Add("w", ScopeWrite); err != nil {
			t.Fatal(err)
		}
	}
	o.Home, o.Tokens = home, tokens
	if o.CompactRows == 0 {
		o.CompactRows, o.CompactBytes = -1, -1
	}
	if ls.srv, err = New(o); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ls.addr = ln.Addr().String()
	ls.url = "http://" + ls.addr
	ls.hs = ls.srv.HTTPServer()
	go func() { ls.hs.Serve(ls.srv.LimitListener(ln)); close(ls.done) }()
	t.Cleanup(ls.close)
	return ls
}

func (ls *liveServer) close() {
	if ls.hs == nil {
		return
	}
	ls.hs.Close()
	<-ls.done
	ls.srv.Close()
	ls.hs = nil
}

func (ls *liveServer) do(method, path, token, ctype string, body io.Reader) (int, string) {
	ls.t.Helper()
	req, err := http.NewRequest(method, ls.url+path, body)
	if err != nil {
		ls.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	c := &http.Client{Timeout: 60 * time.Second}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		ls.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (ls *liveServer) health() Health {
	ls.t.Helper()
	code, body := ls.do("GET", "/healthz", ls.read, "", nil)
	var h Health
	if err := json.Unmarshal([]byte(body), &h); code != 200 || err != nil {
		ls.t.Fatalf("healthz: %d %v %s", code, err, body)
	}
	return h
}

func stocksBody(t testing.TB) []byte {
	b, err := os.ReadFile(stocksCSV)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestErrorStatuses (item 15): a too-large batch or body answers 413, bad
// input 400, an unknown dataset 404, and an internal install failure 500
// (it answered 400 before; a too-large batch answered 500).
func TestErrorStatuses(t *testing.T) {
	ls := startLive(t, t.TempDir(), Options{MaxIngestBody: 4 << 10, MaxBatchBytes: 2 << 10})
	if code, body := ls.do("PUT", "/v1/datasets/stocks"+stocksQuery, ls.write, "text/csv", bytes.NewReader(stocksBody(t))); code != 200 {
		t.Fatalf("upload: %d %s", code, body)
	}
	// A batch whose log frame would be over the limit: 413, nothing stored.
	var b strings.Builder
	b.WriteString("series_id,period,value\n")
	for i := range 30 {
		fmt.Fprintf(&b, "%s,2030-01-01,%d\n", strings.Repeat("X", 80)+fmt.Sprint(i), i)
	}
	if b.Len() > 4<<10 {
		t.Fatalf("test batch %d bytes is over the body limit", b.Len())
	}
	if code, body := ls.do("POST", "/v1/datasets/stocks/rows", ls.write, "text/csv", strings.NewReader(b.String())); code != 413 {
		t.Fatalf("batch over the frame limit: %d %s", code, body)
	}
	// A body over MaxIngestBody: 413.
	big := "series_id,period,value\n" + strings.Repeat("MSFT,2030-01-01,1\n", 400)
	if code, body := ls.do("POST", "/v1/datasets/stocks/rows", ls.write, "text/csv", strings.NewReader(big)); code != 413 {
		t.Fatalf("body over the limit: %d %s", code, body)
	}
	if seq, _ := ls.srv.Store().LastSeq("stocks"); seq != 0 {
		t.Fatalf("a refused batch was stored: seq %d", seq)
	}
	if code, _ := ls.do("POST", "/v1/datasets/stocks/rows", ls.write, "text/csv", strings.NewReader("series_id,period,value\nMSFT,2030-01-01,NaN\n")); code != 400 {
		t.Fatalf("bad row: %d", code)
	}
	if code, _ := ls.do("POST", "/v1/datasets/nope/rows", ls.write, "text/csv", strings.NewReader("series_id,period,value\nA,2030-01-01,1\n")); code != 404 {
		t.Fatalf("unknown dataset: %d", code)
	}
	if code, _ := ls.do("PUT", "/v1/datasets/other?frequency=M", ls.write, "text/csv", strings.NewReader("no,such,columns\n1,2,3\n")); code != 400 {
		t.Fatalf("bad upload: %d", code)
	}
	// An install that fails inside the server (the dataset's directory is
	// a file): 500, and the message does not carry the home's path.
	if err := os.MkdirAll(filepath.Join(ls.home, localcache.DatasetsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ls.home, localcache.DatasetsDir, "blocked"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, body := ls.do("PUT", "/v1/datasets/blocked"+stocksQuery, ls.write, "text/csv", bytes.NewReader(stocksBody(t)))
	if code != 500 {
		t.Fatalf("internal install failure: %d %s", code, body)
	}
	if strings.Contains(body, ls.home) {
		t.Fatalf("500 message leaks the home path: %s", body)
	}
}

// TestPanicRecovered: a handler that panics answers 500, is counted, and
// the server goes on serving on the same listener.
func TestPanicRecovered(t *testing.T) {
	home := t.TempDir()
	tokens, _ := LoadTokens(filepath.Join(home, TokensFile))
	read, _ := tokens.Add("r", ScopeRead)
	srv, err := New(Options{Home: home, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.beforeHandle = func(r *http.Request) {
		if r.URL.Query().Has("panic") {
			var m map[string]int
			m["boom"]++ // a nil map write: a real runtime panic
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := srv.HTTPServer()
	go hs.Serve(srv.LimitListener(ln))
	defer hs.Close()
	get := func(q string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/v1/datasets"+q, nil)
		req.Header.Set("Authorization", "Bearer "+read)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", q, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for range 3 {
		if code, body := get("?panic=1"); code != 500 || !strings.Contains(body, "internal error") {
			t.Fatalf("panicking request: %d %s", code, body)
		}
		if code, _ := get(""); code != 200 {
			t.Fatalf("after a panic: %d", code)
		}
	}
	if n := testCounter(t, srv, "es_http_panics_total"); n != 3 {
		t.Fatalf("es_http_panics_total %v, want 3", n)
	}
}

func testCounter(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	mfs, err := s.m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestDatasetNames (item 13): names Windows or macOS cannot hold are
// refused before the body is read, and a name differing only by case from
// an existing dataset is refused at creation.
func TestDatasetNames(t *testing.T) {
	ls := startLive(t, t.TempDir(), Options{})
	for _, bad := range []string{"CON", "nul", "Aux.csv", "com1", "LPT9", "prices."} {
		if code, body := ls.do("PUT", "/v1/datasets/"+bad+stocksQuery, ls.write, "text/csv", bytes.NewReader(stocksBody(t))); code != 400 {
			t.Errorf("PUT %q: %d %s", bad, code, body)
		}
	}
	if code, body := ls.do("PUT", "/v1/datasets/prices"+stocksQuery, ls.write, "text/csv", bytes.NewReader(stocksBody(t))); code != 200 {
		t.Fatalf("PUT prices: %d %s", code, body)
	}
	if code, body := ls.do("PUT", "/v1/datasets/Prices"+stocksQuery, ls.write, "text/csv", bytes.NewReader(stocksBody(t))); code != 409 {
		t.Fatalf("PUT Prices beside prices: %d %s", code, body)
	}
	// Replacing the same name is fine.
	if code, body := ls.do("PUT", "/v1/datasets/prices"+stocksQuery, ls.write, "text/csv", bytes.NewReader(stocksBody(t))); code != 200 {
		t.Fatalf("PUT prices again: %d %s", code, body)
	}
	if names := ls.srv.Store().DatasetNames(); len(names) != 1 || names[0] != "prices" {
		t.Fatalf("datasets %v", names)
	}
}

// TestConcurrentCreate (item 2): twenty concurrent PUTs of a dataset that
// does not exist yet, then a restart: the server starts, the dataset is
// consistent, and each successful PUT made one epoch.
func TestConcurrentCreate(t *testing.T) {
	home := t.TempDir()
	ls := startLive(t, home, Options{})
	body := stocksBody(t)
	const n = 20
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _ = ls.do("PUT", "/v1/datasets/fresh"+stocksQuery, ls.write, "text/csv", bytes.NewReader(body))
		}()
	}
	wg.Wait()
	ok := 0
	for _, c := range codes {
		if c == 200 {
			ok++
		} else {
			t.Errorf("a PUT answered %d", c)
		}
	}
	read, write := ls.read, ls.write
	ls.close()
	ls = startLive(t, home, Options{})
	ls.read, ls.write = read, write
	h := ls.health()
	if h.State != HealthOK || len(h.Datasets) != 1 || h.Datasets[0].Name != "fresh" || h.Datasets[0].Epoch != uint64(ok) {
		t.Fatalf("after restart: %+v (want one dataset at epoch %d)", h, ok)
	}
	if code, body := ls.do("GET", "/v1/series/MSFT?from=2000-01-01&to=2000-01-31", ls.read, "", nil); code != 200 || !strings.Contains(body, "39.81") {
		t.Fatalf("lookup after restart: %d %s", code, body)
	}
	ents, _ := os.ReadDir(home)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), uploadPrefix) {
			t.Errorf("upload directory left: %s", e.Name())
		}
	}
}

// TestLostCurrent (item 11): a dataset whose CURRENT is lost is reported
// damaged (not dropped); a PUT over it starts a clean epoch whose seqs
// continue above every seq it held, and no old record comes back, also
// after a restart.
func TestLostCurrent(t *testing.T) {
	home := t.TempDir()
	ls := startLive(t, home, Options{})
	if code, body := ls.do("PUT", "/v1/datasets/stocks"+stocksQuery, ls.write, "text/csv", bytes.NewReader(stocksBody(t))); code != 200 {
		t.Fatalf("upload: %d %s", code, body)
	}
	if code, body := ls.do("POST", "/v1/datasets/stocks/rows", ls.write, "text/csv", strings.NewReader("series_id,period,value\nGHOST,2030-01-01,1\nMSFT,2000-01-01,-7\nMSFT,2000-02-01,-8\n")); code != 200 {
		t.Fatalf("ingest: %d %s", code, body)
	}
	read, write := ls.read, ls.write
	restart := func() {
		ls.close()
		ls = startLive(t, home, Options{})
		ls.read, ls.write = read, write
	}
	ls.close()
	if err := os.Remove(filepath.Join(home, localcache.DatasetsDir, "stocks", format.CurrentFile)); err != nil {
		t.Fatal(err)
	}
	restart()
	h := ls.health()
	if h.State != HealthDegraded || h.Damaged != 1 || len(h.Datasets) != 1 || h.Datasets[0].State != HealthDamaged || !strings.Contains(h.Datasets[0].Reason, "CURRENT") {
		t.Fatalf("health with CURRENT lost: %+v", h)
	}
	var list struct{ Damaged []DatasetHealth }
	if _, body := ls.do("GET", "/v1/datasets", ls.read, "", nil); json.Unmarshal([]byte(body), &list) != nil || len(list.Damaged) != 1 || list.Damaged[0].Name != "stocks" {
		t.Fatalf("/v1/datasets does not list the damaged dataset: %s", body)
	}
	// Its rows and lookups say it is damaged (503), not unknown.
	if code, body := ls.do("POST", "/v1/datasets/stocks/rows", ls.write, "text/csv", strings.NewReader("series_id,period,value\nMSFT,2030-01-01,1\n")); code != 503 {
		t.Fatalf("ingest into a damaged dataset: %d %s", code, body)
	}
	// Without a token /healthz tells the state, not the names.
	if code, body := ls.do("GET", "/healthz", "", "", nil); code != 200 || strings.Contains(body, "stocks") || !strings.Contains(body, `"degraded"`) {
		t.Fatalf("unauthenticated healthz: %d %s", code, body)
	}

	// Re-create it from a smaller input (MSFT only).
	var msft bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(stocksBody(t)))
	for i := 0; sc.Scan(); i++ {
		if i == 0 || strings.HasPrefix(sc.Text(), "MSFT,") {
			msft.WriteString(sc.Text() + "\n")
		}
	}
	if code, body := ls.do("PUT", "/v1/datasets/stocks"+stocksQuery, ls.write, "text/csv", &msft); code != 200 {
		t.Fatalf("re-create: %d %s", code, body)
	}
	check := func(when string) {
		t.Helper()
		if h := ls.health(); h.State != HealthOK || len(h.Datasets) != 1 || h.Datasets[0].Epoch < 2 {
			t.Fatalf("%s: health %+v", when, h)
		}
		if code, body := ls.do("GET", "/v1/series/GHOST", ls.read, "", nil); code != 404 {
			t.Fatalf("%s: a record of the lost epoch came back: %d %s", when, code, body)
		}
		if code, body := ls.do("GET", "/v1/series/MSFT?from=2000-01-01&to=2000-02-28", ls.read, "", nil); code != 200 || body != "period,value\n2000-01-01,39.81\n2000-02-01,36.35\n" {
			t.Fatalf("%s: MSFT: %d %q", when, code, body)
		}
	}
	check("after re-create")
	code, body := ls.do("POST", "/v1/datasets/stocks/rows", ls.write, "text/csv", strings.NewReader("series_id,period,value\nMSFT,2030-01-01,1\n"))
	var ack struct {
		FirstSeq uint64 `json:"first_seq"`
	}
	if json.Unmarshal([]byte(body), &ack); code != 200 || ack.FirstSeq <= 3 {
		t.Fatalf("ingest after re-create: %d %s (seq must stay above 3)", code, body)
	}
	restart()
	check("after restart")
}

// TestUploadSweep (item 12): interrupted uploads are removed at start; an
// upload in progress is never removed by a sweep.
func TestUploadSweep(t *testing.T) {
	home := t.TempDir()
	stale := filepath.Join(home, uploadPrefix+"123")
	if err := os.MkdirAll(filepath.Join(stale, "snap"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(stale, "upload.csv"), make([]byte, 1<<20), 0o644)
	ls := startLive(t, home, Options{})
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("interrupted upload not swept at start: %v", err)
	}
	// An upload in progress: a body that has not ended.
	pr, pw := io.Pipe()
	done := make(chan int)
	go func() {
		code, _ := ls.do("PUT", "/v1/datasets/stocks"+stocksQuery, ls.write, "text/csv", pr)
		done <- code
	}()
	body := stocksBody(t)
	pw.Write(body[:100])
	var inUse string
	for deadline := time.Now().Add(30 * time.Second); inUse == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		ents, _ := os.ReadDir(home)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), uploadPrefix) {
				inUse = filepath.Join(home, e.Name())
			}
		}
	}
	if inUse == "" {
		t.Fatal("no upload directory appeared")
	}
	ls.srv.sweepUploads()
	if _, err := os.Stat(inUse); err != nil {
		t.Fatalf("an upload in use was swept: %v", err)
	}
	pw.Write(body[100:])
	pw.Close()
	if code := <-done; code != 200 {
		t.Fatalf("upload: %d", code)
	}
}

// TestConnectionLimits (item 7): over the cap of unauthenticated
// connections the oldest are closed, an authenticated client still gets
// through, silent connections are closed after the header timeout, a
// slow body is cut, and a websocket outlives every timeout.
func TestConnectionLimits(t *testing.T) {
	const capConns = 8
	ls := startLive(t, t.TempDir(), Options{Conn: ConnOptions{
		MaxUnauthConns: capConns, ReadHeaderTimeout: 500 * time.Millisecond, IdleTimeout: 500 * time.Millisecond,
		WriteTimeout: 500 * time.Millisecond, BodyGrace: 300 * time.Millisecond, MinBodyRate: 4096,
	}})
	if code, body := ls.do("PUT", "/v1/datasets/stocks"+stocksQuery, ls.write, "text/csv", bytes.NewReader(stocksBody(t))); code != 200 {
		t.Fatalf("upload: %d %s", code, body)
	}

	// The websocket first: it must outlive what follows.
	ws, _, err := (&websocket.Dialer{HandshakeTimeout: 10 * time.Second}).Dial("ws://"+ls.addr+"/v1/sync", http.Header{"Authorization": {"Bearer " + ls.read}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	hello := &protocol.Message{Type: protocol.THello, Proto: []int{protocol.VersionMin, protocol.VersionMax}, Client: "limits-test"}
	if err := ws.WriteMessage(websocket.TextMessage, hello.Encode()); err != nil {
		t.Fatal(err)
	}
	pongs := make(chan struct{}, 4)
	ws.SetPongHandler(func(string) error { pongs <- struct{}{}; return nil })
	wsErr := make(chan error, 1)
	go func() {
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				wsErr <- err
				return
			}
		}
	}()

	// 3x the cap of idle connections that never send a byte.
	var idle []net.Conn
	for range 3 * capConns {
		c, err := net.Dial("tcp", ls.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	// An authenticated request still gets through.
	if code, body := ls.do("GET", "/v1/series/MSFT?from=2000-01-01&to=2000-01-31", ls.read, "", nil); code != 200 || !strings.Contains(body, "39.81") {
		t.Fatalf("authenticated request with the cap full: %d %s", code, body)
	}
	if n := testCounter(t, ls.srv, "es_unauthenticated_evictions_total"); n < 2*capConns {
		t.Fatalf("evictions %v, want >= %d", n, 2*capConns)
	}
	// Every idle connection is closed, by eviction or by the header timeout.
	for i, c := range idle {
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
			t.Fatalf("idle connection %d: %v, want closed by the server", i, err)
		}
	}
	if n := ls.srv.conns.unauthenticated(); n > capConns {
		t.Fatalf("%d unauthenticated connections open, cap %d", n, capConns)
	}

	// A keep-alive connection idle after its request is closed after
	// IdleTimeout.
	kc, err := net.Dial("tcp", ls.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	fmt.Fprintf(kc, "GET /v1/datasets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", ls.read)
	kr := bufio.NewReader(kc)
	resp, err := http.ReadResponse(kr, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("keep-alive request: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	idleStart := time.Now()
	kc.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := kr.ReadByte(); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("idle keep-alive connection: %v, want closed by the server", err)
	}
	if took := time.Since(idleStart); took > 10*time.Second {
		t.Fatalf("idle keep-alive connection closed after %v", took)
	}

	// A body at ~20 bytes/s is cut (408 or the connection closed) well
	// before it ends; it would take 20 s.
	pr, pw := io.Pipe()
	go func() {
		defer pw.Close()
		pw.Write([]byte("series_id,period,value\n"))
		for range 400 {
			if _, err := pw.Write([]byte("M")); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	start := time.Now()
	req, _ := http.NewRequest("POST", ls.url+"/v1/datasets/stocks/rows", pr)
	req.Header.Set("Authorization", "Bearer "+ls.write)
	req.Header.Set("Content-Type", "text/csv")
	resp, err = http.DefaultClient.Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("slow body: %d, want 408", resp.StatusCode)
		}
	}
	pr.CloseWithError(errors.New("test done"))
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("slow body held for %v", took)
	}

	// The websocket is still alive both ways after every timeout passed.
	time.Sleep(time.Second)
	if err := ws.WriteControl(websocket.PingMessage, []byte("x"), time.Now().Add(5*time.Second)); err != nil {
		t.Fatalf("websocket ping: %v", err)
	}
	select {
	case <-pongs:
	case err := <-wsErr:
		t.Fatalf("websocket closed: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no pong on the websocket")
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && strings.Contains(op.Err.Error(), "reset")
}

// TestTokenReload (item 6): a running server refuses a removed token and
// accepts an added one within two seconds, without a restart.
func TestTokenReload(t *testing.T) {
	home := t.TempDir()
	ls := startLive(t, home, Options{})
	// Another process's view of the file (es token add/rm).
	cli, err := LoadTokens(filepath.Join(home, TokensFile))
	if err != nil {
		t.Fatal(err)
	}
	added, err := cli.Add("late", ScopeRead)
	if err != nil {
		t.Fatal(err)
	}
	waitCode := func(token string, want int) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for {
			code, _ := ls.do("GET", "/v1/datasets", token, "", nil)
			if code == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("token still answers %d after 2 s, want %d", code, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitCode(added, 200)
	if err := cli.Remove("r"); err != nil {
		t.Fatal(err)
	}
	waitCode(ls.read, 401)
	waitCode(added, 200)
	// Removing every token refuses everything; it never opens the server.
	cli.Remove("late")
	cli.Remove("w")
	waitCode(added, 401)
	if code, _ := ls.do("GET", "/v1/datasets", "", "", nil); code != 401 {
		t.Fatalf("no token with an empty tokens file: %d", code)
	}
}

// TestAuthBeforeBody (item 7): a request without a valid token is refused
// at once, without waiting for (or reading) its body, and its connection
// is closed: a slow unauthenticated body holds nothing open.
func TestAuthBeforeBody(t *testing.T) {
	ls := startLive(t, t.TempDir(), Options{})
	for _, auth := range []string{"", "Authorization: Bearer es_wrong\r\n"} {
		c, err := net.Dial("tcp", ls.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Announces 100 kB (less than net/http drains after a handler), sends 10 bytes, then nothing.
		fmt.Fprintf(c, "PUT /v1/datasets/x HTTP/1.1\r\nHost: x\r\n%sContent-Type: text/csv\r\nContent-Length: 100000\r\n\r\nseries_id,", auth)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("auth %q: no answer before the body: %v", auth, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("auth %q: %d", auth, resp.StatusCode)
		}
		if _, err := br.ReadByte(); !errors.Is(err, io.EOF) && !isReset(err) {
			t.Fatalf("auth %q: connection not closed after the refusal: %v", auth, err)
		}
	}
	if ents, _ := os.ReadDir(ls.home); len(ents) > 0 {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), uploadPrefix) {
				t.Fatalf("a refused upload left %s", e.Name())
			}
		}
	}
}
