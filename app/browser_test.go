package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/energyscope/energyscope/app"
	"github.com/energyscope/energyscope/internal/testserver"
	"github.com/energyscope/energyscope/localcache/format"
)

// repoRoot is the repository, from app/.
const repoRoot = ".."

// artifactsDir is where the UI tests leave screenshots: $ES_ARTIFACTS or
// build/artifacts (git-ignored).
func artifactsDir(t *testing.T) string {
	dir := os.Getenv("ES_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(repoRoot, "build", "artifacts")
	}
	dir, _ = filepath.Abs(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// needOrSkip skips when a tool is missing, except under CI=true, where the
// UI tests must run.
func needOrSkip(t *testing.T, what string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing (CI=true: run scripts/install-deps.sh)", what)
	}
	t.Skipf("%s is missing (scripts/install-deps.sh installs it)", what)
}

// stubJS stands in for what Wails injects: window.go.app.<View>.<Method>
// forwards each call to the real Go method of the bound view (POST
// /__call), window.runtime records
// events and the clipboard and receives the Go side's events by polling.
const stubJSFormat = `(function () {
  const call = (view, method, args) => fetch('/__call', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify({view, method, args})})
    .then((r) => r.ok ? r.json() : r.text().then((t) => Promise.reject(new Error(t))));
  const views = {};
  for (const v of %s) views[v] = new Proxy({}, {get: (_, name) => (...args) => call(v, String(name), args)});
  window.go = {app: views};
  const listeners = {};
  window.__clipboard = [];
  window.__events = [];
  window.runtime = {
    EventsOn(name, cb) { (listeners[name] = listeners[name] || []).push(cb); return () => { listeners[name] = listeners[name].filter((x) => x !== cb); }; },
    EventsEmit(name, ...data) { window.__events.push({name, data}); (listeners[name] || []).forEach((cb) => cb(...data)); },
    ClipboardSetText(text) { window.__clipboard.push(text); return fetch('/__clipboard', {method: 'POST', body: text}).then(() => true); },
  };
  let after = 0;
  (async function poll() {
    for (;;) {
      try {
        const evs = await (await fetch('/__events?after=' + after)).json();
        for (const e of evs) { after = e.n; window.runtime.EventsEmit(e.name, ...(e.data || [])); }
      } catch (e) { await new Promise((r) => setTimeout(r, 200)); }
    }
  })();
})();
`

// stubServer serves frontend/dist with the stub, over the views a binds.
type stubServer struct {
	views map[string]any // a.Bind() by type name, as Wails names them
	dist  string

	mu     sync.Mutex
	cond   *sync.Cond
	events []stubEvent
	clip   []string
	// ingest, if set, is what GET /__ingest does: a live update on the
	// server, for the page to see arrive.
	ingest func() error
}

type stubEvent struct {
	N    int    `json:"n"`
	Name string `json:"name"`
	Data []any  `json:"data"`
}

func newStubServer(t *testing.T, ta *testApp) *stubServer {
	s := &stubServer{views: boundViews(ta.App), dist: filepath.Join(repoRoot, "frontend", "dist")}
	s.cond = sync.NewCond(&s.mu)
	ta.rt.mu.Lock()
	ta.rt.notify = func(e event) {
		s.mu.Lock()
		s.events = append(s.events, stubEvent{N: len(s.events) + 1, Name: e.Name, Data: e.Data})
		s.cond.Broadcast()
		s.mu.Unlock()
	}
	ta.rt.mu.Unlock()
	return s
}

func (s *stubServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/__stub.js":
		w.Header().Set("Content-Type", "text/javascript")
		names := slices.Sorted(maps.Keys(s.views))
		js, _ := json.Marshal(names)
		fmt.Fprintf(w, stubJSFormat, js)
	case "/__call":
		s.call(w, r)
	case "/__ingest":
		if s.ingest == nil {
			http.Error(w, "no ingest", 404)
			return
		}
		if err := s.ingest(); err != nil {
			http.Error(w, err.Error(), 500)
		}
	case "/__clipboard":
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.clip = append(s.clip, string(b))
		s.mu.Unlock()
	case "/__events":
		var after int
		fmt.Sscan(r.URL.Query().Get("after"), &after)
		s.mu.Lock()
		deadline := time.AfterFunc(500*time.Millisecond, func() { s.mu.Lock(); s.cond.Broadcast(); s.mu.Unlock() })
		start := time.Now()
		for len(s.events) <= after && time.Since(start) < 500*time.Millisecond {
			s.cond.Wait()
		}
		deadline.Stop()
		evs := append([]stubEvent{}, s.events[min(after, len(s.events)):]...)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(evs)
	case "/", "/index.html":
		b, err := os.ReadFile(filepath.Join(s.dist, "index.html"))
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		// The stub runs before the app's module script, as Wails' do.
		b = bytes.Replace(b, []byte("<head>"), []byte(`<head><script src="/__stub.js"></script>`), 1)
		w.Header().Set("Content-Type", "text/html")
		w.Write(b)
	default:
		http.FileServer(http.Dir(s.dist)).ServeHTTP(w, r)
	}
}

// boundViews is what a binds, by the name Wails gives each in JavaScript
// (window.go.<package>.<type>).
func boundViews(a *app.App) map[string]any {
	out := map[string]any{}
	for _, v := range a.Bind() {
		out[reflect.TypeOf(v).Elem().Name()] = v
	}
	return out
}

// call invokes the bound method by reflection, decoding each JSON argument
// into the parameter's type and encoding the first result, as Wails does.
func (s *stubServer) call(w http.ResponseWriter, r *http.Request) {
	var req struct {
		View   string            `json:"view"`
		Method string            `json:"method"`
		Args   []json.RawMessage `json:"args"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	v, ok := s.views[req.View]
	if !ok {
		http.Error(w, "nothing bound as "+req.View, 404)
		return
	}
	m := reflect.ValueOf(v).MethodByName(req.Method)
	if !m.IsValid() {
		http.Error(w, "no method "+req.View+"."+req.Method, 404)
		return
	}
	mt := m.Type()
	if len(req.Args) != mt.NumIn() {
		http.Error(w, fmt.Sprintf("%s takes %d arguments, got %d", req.Method, mt.NumIn(), len(req.Args)), 400)
		return
	}
	in := make([]reflect.Value, len(req.Args))
	for i, raw := range req.Args {
		p := reflect.New(mt.In(i))
		if err := json.Unmarshal(raw, p.Interface()); err != nil {
			http.Error(w, fmt.Sprintf("%s argument %d: %v", req.Method, i, err), 400)
			return
		}
		in[i] = p.Elem()
	}
	res := m.Call(in)
	w.Header().Set("Content-Type", "application/json")
	if len(res) == 0 {
		io.WriteString(w, "null")
		return
	}
	if err := json.NewEncoder(w).Encode(res[0].Interface()); err != nil {
		http.Error(w, err.Error(), 500)
	}
}

// TestBrowserUI drives the built frontend (frontend/dist) in headless
// Chromium against the real bindings over a real store of the samples.
func TestBrowserUI(t *testing.T) {
	node, err := exec.LookPath("node")
	needOrSkip(t, "node", err == nil)
	_, err = os.Stat("/usr/bin/chromium")
	needOrSkip(t, "/usr/bin/chromium", err == nil)
	_, err = os.Stat(filepath.Join(repoRoot, "frontend", "node_modules", "playwright-core"))
	needOrSkip(t, "frontend/node_modules (npm ci in frontend/)", err == nil)
	if _, err := os.Stat(filepath.Join(repoRoot, "frontend", "dist", "index.html")); err != nil {
		t.Fatalf("frontend/dist is not built: %v", err)
	}

	ta := newTestApp(t)
	// A real server with the same samples: the app syncs from it (it
	// already holds its snapshots) and the Sync view shows it live.
	// The list names a dead server first: the Sync view shows the
	// second in use and the failover past the first.
	server, srvURL := testserver.SampleServer(t)
	dl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + dl.Addr().String()
	dl.Close()
	set := ta.GetSettings()
	set.Server = dead + "," + srvURL
	if r := ta.SaveSettings(set); r.Error != "" {
		t.Fatal(r.Error)
	}
	srv := newStubServer(t, ta)
	// The page asks for a live update of MSFT (a new month after its last)
	// and times how long the Explorer takes to show it.
	srv.ingest = func() error {
		when := time.Date(2010, 4, 1, 0, 0, 0, 0, time.UTC).Unix()
		_, _, err := server.Ingest("stocks", []format.Record{{Op: format.Upsert, SeriesID: "MSFT", Period: when, Value: 31.25}})
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv}
	go hs.Serve(ln)
	defer hs.Close()

	exportPath := filepath.Join(t.TempDir(), "msft-ibm.xlsx")
	art := artifactsDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "tests/ui.mjs", "http://"+ln.Addr().String()+"/", art, exportPath, srvURL)
	cmd.Dir = filepath.Join(repoRoot, "frontend")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	t.Logf("ui.mjs: %s", strings.TrimSpace(stdout.String()))
	if err != nil {
		t.Fatalf("ui.mjs: %v\n%s", err, stderr.String())
	}
	var res struct {
		OK      bool   `json:"ok"`
		Formula string `json:"formula"`
		LiveMs  int    `json:"liveMs"`
	}
	if err := json.Unmarshal(lastLine(stdout.Bytes()), &res); err != nil || !res.OK {
		t.Fatalf("ui.mjs result: %v %s", err, stdout.String())
	}

	// What the page copied is what the Go side computes, and went through
	// the runtime's clipboard.
	want := ta.Formula("MSFT", "2005-01", "2008-12", app.GetOptions{Per: "Q", Agg: "avg"})
	srv.mu.Lock()
	clip := append([]string{}, srv.clip...)
	srv.mu.Unlock()
	if res.Formula != want.Text || !slices.Contains(clip, want.Text) {
		t.Fatalf("copied %q (clipboard %q), want %q", res.Formula, clip, want.Text)
	}
	f, err := excelize.OpenFile(exportPath)
	if err != nil {
		t.Fatalf("exported workbook: %v", err)
	}
	defer f.Close()
	rows, err := f.GetRows(f.GetSheetList()[0])
	if err != nil || len(rows) != 25 || rows[0][1] != "MSFT" || rows[0][2] != "IBM" {
		t.Fatalf("exported rows %v %v", err, len(rows))
	}
	t.Logf("a live update of the open series showed in the Explorer %d ms after the server took it", res.LiveMs)
	// "Show in folder" opened the exported file's folder.
	if got := ta.openedDirs(); len(got) != 1 || got[0] != filepath.Dir(exportPath) {
		t.Errorf("folders opened %q, want %q", got, filepath.Dir(exportPath))
	}
	for _, shot := range []string{"ui-status.png", "ui-sync.png", "ui-explorer.png", "ui-compare.png", "ui-export.png", "ui-excel.png"} {
		if fi, err := os.Stat(filepath.Join(art, shot)); err != nil || fi.Size() < 5000 {
			t.Errorf("screenshot %s: %v", shot, err)
		}
	}
}

func lastLine(b []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return lines[len(lines)-1]
}
