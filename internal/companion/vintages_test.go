package companion_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/energyscope/energyscope/internal/companion"
	"github.com/energyscope/energyscope/internal/testhome"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/cook"
	"github.com/energyscope/energyscope/server/cook/samples"
	"github.com/energyscope/energyscope/server/hub"
	"github.com/energyscope/energyscope/sync/protocol"
)

// vintageServer is a real server (store, hub, websocket) whose hub also
// answers version 3's vintage requests from snapshots the test kept:
// what the lake does on a lake-backed server, with the resolution rules of
// CONTRACTS 3 (latest committed at or before a time, a date meaning the
// end of its day, an es snapshot id, a tag).
type vintageServer struct {
	*server.Server
	vintages []testVintage
	asked    atomic.Int64 // vintage requests answered
	fetched  atomic.Int64 // vintage files opened
	// failFiles makes the vintage files unavailable (a fetch error).
	failFiles atomic.Bool
}

type testVintage struct {
	info protocol.VintageInfo
	man  *format.Manifest
	dir  string
}

func (s *vintageServer) Vintage(_ context.Context, dataset, asof string) (protocol.VintageInfo, *format.Manifest, error) {
	s.asked.Add(1)
	if dataset != "stocks" {
		return protocol.VintageInfo{}, nil, &hub.RequestError{Code: protocol.ErrorUnknownDataset, Err: fmt.Errorf("no dataset %s", dataset)}
	}
	at, err := time.Parse(time.RFC3339, asof)
	if d, derr := time.Parse(time.DateOnly, asof); derr == nil {
		at, err = d.Add(24*time.Hour-time.Second), nil
	}
	var best *testVintage
	for i := range s.vintages {
		v := &s.vintages[i]
		switch {
		case err == nil && !v.info.CommittedAt.After(at):
			best = v
		case err != nil && (v.info.Snapshot == asof || (len(v.info.Tags) > 0 && v.info.Tags[0] == asof) || fmt.Sprint(v.info.IcebergSnapshot) == asof):
			best = v
		}
	}
	switch {
	case best != nil:
		return best.info, best.man, nil
	case err == nil:
		return protocol.VintageInfo{}, nil, &hub.RequestError{Code: protocol.ErrorBeforeFirstVintage, Err: fmt.Errorf("%s is before the first vintage of stocks", asof)}
	}
	return protocol.VintageInfo{}, nil, &hub.RequestError{Code: protocol.ErrorUnknownVintage, Err: fmt.Errorf("no vintage %s in dataset stocks", asof)}
}

func (s *vintageServer) Revisions(_ context.Context, dataset, series, period string) ([]protocol.Revision, error) {
	d, err := time.Parse(time.DateOnly, period)
	if err != nil {
		return nil, err
	}
	var out []protocol.Revision
	for _, v := range s.vintages {
		snap, err := snapshot.Open(v.dir)
		if err != nil {
			return nil, err
		}
		r := protocol.Revision{Vintage: v.info}
		if row, ok := snap.Lookup(series); ok {
			p, err := snap.Get(row, d.Unix(), d.Unix())
			if err == nil && p.Len() == 1 {
				r.Value, r.Present = p.Values[0], true
			}
		}
		snap.Close()
		out = append(out, r)
	}
	return out, nil
}

func (s *vintageServer) OpenVintageFile(_ context.Context, dataset, snap, sha string) (hub.ReadAtCloser, error) {
	if s.failFiles.Load() {
		return nil, errors.New("the lake cannot be read")
	}
	for _, v := range s.vintages {
		if v.info.Snapshot != snap {
			continue
		}
		for _, f := range v.man.Files {
			if f.SHA256 == sha {
				s.fetched.Add(1)
				return os.Open(filepath.Join(v.dir, f.Name))
			}
		}
	}
	return nil, errors.New("no such file")
}

// keepSnapshot copies the current snapshot of stocks out of the server's
// home (compaction retires it) and returns it as a vintage.
func keepSnapshot(t *testing.T, srv *server.Server, committed time.Time, tag string) testVintage {
	t.Helper()
	_, m, ok := srv.Head("stocks")
	if !ok {
		t.Fatal("no head")
	}
	src := filepath.Join(srv.Store().DatasetDir("stocks"), format.SnapshotsDir, m.SnapshotID)
	dst := filepath.Join(t.TempDir(), m.SnapshotID)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range append(m.Files, format.FileInfo{Name: format.ManifestFile}) {
		b, err := os.ReadFile(filepath.Join(src, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f.Name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v := testVintage{man: m, dir: dst, info: protocol.VintageInfo{Snapshot: m.SnapshotID, IcebergSnapshot: committed.Unix(),
		CommittedAt: committed, CoversSeq: m.CoversThroughSeq, Rows: m.Rows}}
	if tag != "" {
		v.info.Tags = []string{tag}
	}
	return v
}

var jan2000 = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()

// newVintageServer: three vintages of stocks in which MSFT's January 2000
// is 39.81 (the sample, committed 2026-09-01), 1000 (2026-10-01, tagged
// q3-close) and 2000 (2026-11-01, the current snapshot).
func newVintageServer(t *testing.T) (*vintageServer, *httptest.Server, *hub.Hub) {
	t.Helper()
	srv, err := server.New(server.Options{Home: t.TempDir(), CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	var opts cook.InputOptions
	for _, s := range samples.Sets {
		if s.Dataset == "stocks" {
			opts = s.Opts
		}
	}
	if _, err := srv.Replace("stocks", []string{"../../server/cook/samples/stocks.csv"}, opts); err != nil {
		t.Fatal(err)
	}
	vs := &vintageServer{Server: srv}
	vs.vintages = append(vs.vintages, keepSnapshot(t, srv, time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC), ""))
	for i, v := range []float64{1000, 2000} {
		if _, _, err := srv.Ingest("stocks", []format.Record{{Op: format.Upsert, SeriesID: "MSFT", Period: jan2000, Value: v}}); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.Compact("stocks"); err != nil {
			t.Fatal(err)
		}
		tag := ""
		if i == 0 {
			tag = "q3-close"
		}
		vs.vintages = append(vs.vintages, keepSnapshot(t, srv, time.Date(2026, 10+time.Month(i), 1, 0, 0, 0, 0, time.UTC), tag))
	}
	h := hub.New(vs, hub.Options{})
	mux := http.NewServeMux()
	mux.Handle("/v1/sync", h)
	hs := httptest.NewServer(mux)
	t.Cleanup(func() { h.Close(); hs.Close() })
	return vs, hs, h
}

// calc evaluates one call through the companion's bridge over HTTPS and
// returns the result's value or error.
func calc(t *testing.T, c *companion.Companion, fn string, args ...any) (value [][]any, code, msg string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"calls": []any{map[string]any{"fn": fn, "args": args}}})
	req, _ := http.NewRequest("POST", c.Bridge().URL()+"/v1/calc", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+c.Bridge().Token())
	cl := bridgeClient(t, c)
	cl.Timeout = 60 * time.Second
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct {
		Results []struct {
			Value [][]any `json:"value"`
			Error *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Results) != 1 {
		t.Fatalf("calc %s: %d %s", fn, resp.StatusCode, b)
	}
	r := out.Results[0]
	if r.Error != nil {
		return nil, r.Error.Code, r.Error.Message
	}
	return r.Value, "", ""
}

func wantValue(t *testing.T, c *companion.Companion, want float64, args ...any) {
	t.Helper()
	v, code, msg := calc(t, c, "ES.Get", args...)
	if code != "" || len(v) != 1 || len(v[0]) != 2 || v[0][0] != 36526.0 || v[0][1] != want {
		t.Fatalf("ES.Get%v = %v %s %s, want [[36526 %v]]", args, v, code, msg, want)
	}
}

func wantError(t *testing.T, c *companion.Companion, wantCode, wantMsg string, args ...any) {
	t.Helper()
	_, code, msg := calc(t, c, "ES.Get", args...)
	if code != wantCode || msg != wantMsg {
		t.Fatalf("ES.Get%v = %s %q, want %s %q", args, code, msg, wantCode, wantMsg)
	}
}

// TestCompanionAsOf: as-of reads through the bridge over HTTPS, answered
// from a vintage fetched over the sync connection into the cache, from
// the cache again without asking, from the store when it serves that
// vintage, offline from what is held; the errors name the vintage.
func TestCompanionAsOf(t *testing.T) {
	vs, hs, h := newVintageServer(t)
	home := t.TempDir()
	c, err := companion.Start(companion.Config{Home: home, Port: 0, Server: hs.URL, Datasets: []string{"stocks"}})
	if err != nil {
		t.Fatal(err)
	}
	defer closeC(t, c)
	current := vs.vintages[2].info.Snapshot
	waitFor(t, "the current snapshot synced", func() bool {
		_, id, _, err := c.Store().State("stocks")
		return err == nil && id == current
	})
	wantValue(t, c, 2000, "MSFT", "2000-01", "2000-01")

	// A date before the second vintage: the first, downloaded and verified.
	wantValue(t, c, 39.81, "MSFT", "2000-01", "2000-01", "asof=2026-09-15")
	v1 := vs.vintages[0].info.Snapshot
	if _, err := os.Stat(filepath.Join(home, localcache.VintagesDir, "stocks", v1, format.ManifestFile)); err != nil {
		t.Fatalf("vintage not in the cache: %v", err)
	}
	fetched := vs.fetched.Load()
	if fetched == 0 {
		t.Fatal("no vintage file was fetched")
	}
	// Again, and another day resolving to it: the first is answered from
	// the cache without asking (the server said a newer vintage exists).
	asked := vs.asked.Load()
	wantValue(t, c, 39.81, "MSFT", "2000-01", "2000-01", "asof=2026-09-15")
	if vs.asked.Load() != asked {
		t.Fatal("a resolved time asked the server again")
	}
	wantValue(t, c, 39.81, "MSFT", "2000-01", "2000-01", "asof=2026-09-20T10:00:00+02:00")
	if vs.fetched.Load() != fetched {
		t.Fatal("a cached vintage was downloaded again")
	}
	// By snapshot id and by tag.
	wantValue(t, c, 1000, "MSFT", "2000-01", "2000-01", "asof="+vs.vintages[1].info.Snapshot)
	wantValue(t, c, 1000, "msft", "2000-01", "2000-01", "asof=q3-close")
	// The vintage the store serves is read from the store: nothing fetched.
	fetched = vs.fetched.Load()
	wantValue(t, c, 2000, "MSFT", "2000-01", "2000-01", "asof=2026-11-15")
	if vs.fetched.Load() != fetched {
		t.Fatal("the vintage in service was downloaded")
	}
	// A time that resolved to the server's newest vintage may name a later
	// one after the next publish: it is asked again, not kept.
	asked = vs.asked.Load()
	wantValue(t, c, 2000, "MSFT", "2000-01", "2000-01", "asof=2026-11-15")
	if vs.asked.Load() != asked+1 {
		t.Fatalf("a time resolving to the newest vintage was answered without asking (%d -> %d requests)", asked, vs.asked.Load())
	}
	if n, _ := companionCacheUsage(t, home); n != 2 {
		t.Fatalf("%d vintages cached, want 2", n)
	}
	// Several series, transforms over the vintage.
	v, code, msg := calc(t, c, "ES.Get", "MSFT,IBM", "2000-02", "2000-02", "asof=2026-09-15;chg=diff;headers=y")
	if d, ok := v[1][1].(float64); code != "" || len(v) != 2 || !ok || math.Abs(d-(36.35-39.81)) > 1e-9 {
		t.Fatalf("chg over a vintage: %v %s %s", v, code, msg)
	}

	// Errors name the vintage.
	wantError(t, c, "#N/A", "MSFT: vintage asof=e9-s9-0123456789ab: unknown vintage (no vintage e9-s9-0123456789ab in dataset stocks)",
		"MSFT", "asof=e9-s9-0123456789ab")
	wantError(t, c, "#N/A", "MSFT: vintage asof=2026-08-01: before the first vintage (2026-08-01 is before the first vintage of stocks)",
		"MSFT", "asof=2026-08-01")
	wantError(t, c, "#VALUE!", "option asof=2026-02-30: not a date: "+errBadAsOf, "MSFT", "asof=2026-02-30")

	// ES.Revisions: every value of the period, oldest vintage first.
	v, code, msg = calc(t, c, "ES.Revisions", "MSFT", "2000-01-15")
	if code != "" || len(v) != 4 || v[0][0] != "Vintage" || v[0][1] != "MSFT" {
		t.Fatalf("revisions: %v %s %s", v, code, msg)
	}
	for i, want := range []float64{39.81, 1000, 2000} {
		at := vs.vintages[i].info.CommittedAt.Unix()
		if v[i+1][0] != float64(at/86400+25569) || v[i+1][1] != want {
			t.Fatalf("revision %d: %v, want [%d %v]", i, v[i+1], at/86400+25569, want)
		}
	}

	// Offline: what is held answers; anything else names the vintage.
	h.Close() // ends the websocket
	hs.Close()
	waitFor(t, "offline", func() bool { return !c.Engine().Progress().Online })
	wantValue(t, c, 39.81, "MSFT", "2000-01", "2000-01", "asof=2026-09-15")
	wantValue(t, c, 1000, "MSFT", "2000-01", "2000-01", "asof=q3-close")
	wantValue(t, c, 1000, "MSFT", "2000-01", "2000-01", "asof="+vs.vintages[1].info.Snapshot)
	wantValue(t, c, 39.81, "MSFT", "2000-01", "2000-01", fmt.Sprintf("asof=%d", vs.vintages[0].info.IcebergSnapshot))
	wantError(t, c, "#N/A", "MSFT: vintage asof=2026-10-15 is not held on this computer and the server is unreachable",
		"MSFT", "asof=2026-10-15")
	_, code, msg = calc(t, c, "ES.Revisions", "MSFT", "2000-02")
	if code != "#N/A" || msg != "MSFT: vintages: not held on this computer and the server is unreachable" {
		t.Fatalf("revisions offline: %s %q", code, msg)
	}
}

const errBadAsOf = "want a time (2026-10-01T12:00:00Z), a date (2026-10-01), a snapshot id (e3-s120-0123456789ab) or a tag"

// companionCacheUsage counts the vintages in home's cache on disk.
func companionCacheUsage(t *testing.T, home string) (int, error) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(home, localcache.VintagesDir, "stocks"))
	n := 0
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			n++
		}
	}
	return n, err
}

// TestCompanionAsOfVersion2Server: a server that speaks protocol version 2
// keeps no vintages: as-of reads and revisions are #N/A saying so, and
// nothing version 3 is sent to it.
func TestCompanionAsOfVersion2Server(t *testing.T) {
	var sawV3 atomic.Bool
	up := websocket.Upgrader{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			m, err := protocol.DecodeMessage(b)
			if err != nil {
				return
			}
			switch m.Type {
			case protocol.THello:
				ws.WriteMessage(websocket.TextMessage, (&protocol.Message{Type: protocol.TWelcome, Version: 2}).Encode())
			case protocol.TVintage, protocol.TRevisions:
				sawV3.Store(true)
			}
		}
	}))
	defer hs.Close()
	home := t.TempDir()
	testhome.CookSamples(t, home)
	c, err := companion.Start(companion.Config{Home: home, Port: 0, Server: hs.URL, Datasets: []string{"stocks"}})
	if err != nil {
		t.Fatal(err)
	}
	defer closeC(t, c)
	waitFor(t, "welcomed", func() bool { return c.Engine().Progress().Online })
	wantError(t, c, "#N/A", "MSFT: vintage asof=2026-10-01: the server does not keep vintages (protocol 2)", "MSFT", "asof=2026-10-01")
	_, code, msg := calc(t, c, "ES.Revisions", "MSFT", "2000-01")
	if code != "#N/A" || msg != "MSFT: vintages: the server does not keep vintages (protocol 2)" {
		t.Fatalf("revisions: %s %q", code, msg)
	}
	if sawV3.Load() {
		t.Fatal("a version 3 request went to a version 2 server")
	}
}

// TestBrowserAsOf is the add-in end to end for vintages: headless
// Chromium runs the add-in's own ES.GET and ES.REVISIONS (functions.js,
// served by the companion's bridge over HTTPS) against a companion that
// fetches the vintage from the server over its sync connection. Without
// chromium or playwright-core it is skipped, except under CI=true.
func TestBrowserAsOf(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	ci := os.Getenv("CI") == "true"
	node, err := exec.LookPath("node")
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	addin := filepath.Join("..", "..", "functions", "addin")
	_, errC := os.Stat(chromium)
	_, errP := os.Stat(filepath.Join(addin, "node_modules", "playwright-core"))
	if err != nil || errC != nil || errP != nil {
		if ci {
			t.Fatalf("node %v, %s %v, playwright-core %v (CI=true: scripts/install-deps.sh installs them)", err, chromium, errC, errP)
		}
		t.Skipf("node %v, %s %v, playwright-core %v", err, chromium, errC, errP)
	}
	vs, hs, _ := newVintageServer(t)
	c, err := companion.Start(companion.Config{Home: t.TempDir(), Port: 0, Server: hs.URL, Datasets: []string{"stocks"}})
	if err != nil {
		t.Fatal(err)
	}
	defer closeC(t, c)
	waitFor(t, "the current snapshot synced", func() bool {
		_, id, _, err := c.Store().State("stocks")
		return err == nil && id == vs.vintages[2].info.Snapshot
	})
	calls := []map[string]any{
		{"fn": "GET", "args": []any{[][]any{{"MSFT"}}, "2000-01-01", "2000-01-31", [][][]any{{{"asof=2026-09-15"}}}}},
		{"fn": "GET", "args": []any{[][]any{{"MSFT"}}, "2000-01", "2000-01", [][][]any{{{"asof=q3-close"}}}}},
		{"fn": "REVISIONS", "args": []any{[][]any{{"MSFT"}}, "2000-01"}},
		{"fn": "GET", "args": []any{[][]any{{"MSFT"}}, nil, nil, [][][]any{{{"asof=2026-13-01"}}}}},
		{"fn": "GET", "args": []any{[][]any{{"MSFT"}}, nil, nil, [][][]any{{{"asof=e9-s9-0123456789ab"}}}}},
	}
	b, _ := json.Marshal(calls)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "tools/browser-test.js")
	cmd.Dir = addin
	cmd.Env = append(os.Environ(),
		"ES_BRIDGE_URL="+c.Bridge().URL(),
		"ES_SPKI="+c.Bridge().Certs().SPKIHash(),
		"ES_TEST_CONTROL=",
		"ES_CALLS="+string(b),
		"CHROMIUM="+chromium,
	)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("browser test: %v\n%s\n%s", err, out, stderr.String())
	}
	var got struct {
		Results []json.RawMessage `json:"results"`
		Errors  []string          `json:"errors"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("browser output: %v\n%s", err, out)
	}
	serial := func(i int) string {
		return fmt.Sprint(vs.vintages[i].info.CommittedAt.Unix()/86400 + 25569)
	}
	want := []string{
		`{"value":[[36526,39.81]]}`,
		`{"value":[[36526,1000]]}`,
		`{"value":[["Vintage","MSFT"],[` + serial(0) + `,39.81],[` + serial(1) + `,1000],[` + serial(2) + `,2000]]}`,
		`{"error":{"code":"#VALUE!","message":"option asof=2026-13-01: not a date: ` + errBadAsOf + `"}}`,
		`{"error":{"code":"#N/A","message":"MSFT: vintage asof=e9-s9-0123456789ab: unknown vintage (no vintage e9-s9-0123456789ab in dataset stocks)"}}`,
	}
	for i, w := range want {
		if i >= len(got.Results) || string(got.Results[i]) != w {
			t.Errorf("formula %d: got %s\nwant %s", i, got.Results[min(i, len(got.Results)-1)], w)
		}
	}
	if len(got.Errors) > 0 {
		t.Errorf("page errors: %v", got.Errors)
	}
}

// TestCompanionAsOfBatchAsksOnce: sheets recalculating many cells as of
// one day (several /v1/calc batches at once) ask the server once and
// download the vintage once.
func TestCompanionAsOfBatchAsksOnce(t *testing.T) {
	vs, hs, _ := newVintageServer(t)
	c, err := companion.Start(companion.Config{Home: t.TempDir(), Port: 0, Server: hs.URL, Datasets: []string{"stocks"}})
	if err != nil {
		t.Fatal(err)
	}
	defer closeC(t, c)
	waitFor(t, "the current snapshot synced", func() bool {
		_, id, _, err := c.Store().State("stocks")
		return err == nil && id == vs.vintages[2].info.Snapshot
	})
	before := c.Engine().Stats.BytesDownloaded.Load()
	// Eight requests at once, as Excel's batches from several sheets come.
	type answer struct {
		code int
		body []byte
		err  error
	}
	answers := make(chan answer, 8)
	cl := bridgeClient(t, c)
	cl.Timeout = 60 * time.Second
	for range 8 {
		go func() {
			var calls []any
			for i := range 5 {
				id := []string{"MSFT", "IBM", "AAPL", "AMZN"}[i%4]
				calls = append(calls, map[string]any{"fn": "ES.Get", "args": []any{id, "2000-01", "2000-01", "asof=2026-10-15"}})
			}
			body, _ := json.Marshal(map[string]any{"calls": calls})
			req, _ := http.NewRequest("POST", c.Bridge().URL()+"/v1/calc", strings.NewReader(string(body)))
			req.Header.Set("Authorization", "Bearer "+c.Bridge().Token())
			resp, err := cl.Do(req)
			if err != nil {
				answers <- answer{err: err}
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			answers <- answer{resp.StatusCode, b, err}
		}()
	}
	for range 8 {
		a := <-answers
		if a.err != nil {
			t.Fatal(a.err)
		}
		var out struct {
			Results []struct {
				Value [][]any `json:"value"`
			} `json:"results"`
		}
		if err := json.Unmarshal(a.body, &out); err != nil || len(out.Results) != 5 {
			t.Fatalf("calc: %d %s", a.code, a.body)
		}
		if v := out.Results[0].Value; len(v) != 1 || v[0][1] != 1000.0 {
			t.Fatalf("MSFT as of 2026-10-15: %s", a.body)
		}
		for i, r := range out.Results {
			if len(r.Value) != 1 {
				t.Fatalf("call %d: %s", i, a.body)
			}
		}
	}
	if n := vs.asked.Load(); n != 1 {
		t.Fatalf("%d vintage requests for one WHEN, want 1", n)
	}
	var size int64
	for _, f := range vs.vintages[1].man.Files {
		size += f.Size
	}
	if n := c.Engine().Stats.BytesDownloaded.Load() - before; n != size {
		t.Fatalf("%d bytes downloaded, want %d (the vintage once)", n, size)
	}
}

// TestCompanionAsOfAfterEviction: a WHEN resolved once and then evicted
// from the cache (one vintage kept) is fetched again, not refused.
func TestCompanionAsOfAfterEviction(t *testing.T) {
	vs, hs, _ := newVintageServer(t)
	c, err := companion.Start(companion.Config{Home: t.TempDir(), Port: 0, Server: hs.URL, Datasets: []string{"stocks"},
		VintageCache: localcache.VintageCacheOptions{MaxCount: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer closeC(t, c)
	waitFor(t, "the current snapshot synced", func() bool {
		_, id, _, err := c.Store().State("stocks")
		return err == nil && id == vs.vintages[2].info.Snapshot
	})
	wantValue(t, c, 39.81, "MSFT", "2000-01", "2000-01", "asof=2026-09-15")
	wantValue(t, c, 39.81, "MSFT", "2000-01", "2000-01", "asof="+vs.vintages[0].info.Snapshot)
	wantValue(t, c, 1000, "MSFT", "2000-01", "2000-01", "asof=q3-close") // evicts the first
	wantValue(t, c, 39.81, "MSFT", "2000-01", "2000-01", "asof=2026-09-15")
	wantValue(t, c, 1000, "MSFT", "2000-01", "2000-01", "asof=q3-close")
	wantValue(t, c, 39.81, "MSFT", "2000-01", "2000-01", "asof="+vs.vintages[0].info.Snapshot)
}

// TestCompanionAsOfFetchFails: a vintage whose files the server cannot
// send is #N/A naming it, and the connection (and live sync) goes on.
func TestCompanionAsOfFetchFails(t *testing.T) {
	vs, hs, _ := newVintageServer(t)
	vs.failFiles.Store(true)
	c, err := companion.Start(companion.Config{Home: t.TempDir(), Port: 0, Server: hs.URL, Datasets: []string{"stocks"}})
	if err != nil {
		t.Fatal(err)
	}
	defer closeC(t, c)
	waitFor(t, "the current snapshot synced", func() bool {
		_, id, _, err := c.Store().State("stocks")
		return err == nil && id == vs.vintages[2].info.Snapshot
	})
	sessions := c.Engine().Stats.Sessions.Load()
	v1 := vs.vintages[0].info.Snapshot
	_, code, msg := calc(t, c, "ES.Get", "MSFT", "asof="+v1)
	if code != "#N/A" || !strings.HasPrefix(msg, "MSFT: vintage asof="+v1+": download vintage "+v1+": server: ") {
		t.Fatalf("failed fetch: %s %q", code, msg)
	}
	if n := c.Engine().Stats.Sessions.Load(); n != sessions || !c.Engine().Progress().Online {
		t.Fatalf("the connection dropped: sessions %d -> %d", sessions, n)
	}
	vs.failFiles.Store(false)
	wantValue(t, c, 39.81, "MSFT", "2000-01", "2000-01", "asof="+v1)
}
