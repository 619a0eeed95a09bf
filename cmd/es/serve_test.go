package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
)

// TestServeNoAuthLoopbackOnly (item 18): es serve --no-auth refuses an
// address that is not loopback only, and serves on a loopback one.
func TestServeNoAuthLoopbackOnly(t *testing.T) {
	home := t.TempDir()
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0"} {
		// A child process: a server that does not refuse serves for ever.
		p := startES(t, "serve --no-auth "+addr, "serve", "--home", home, "--no-auth", "--listen", addr)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("--no-auth --listen %s: still serving after 30 s; stdout %s", addr, p.stdout.String())
		}
		if code := p.cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(p.stderr.String(), "--no-auth") {
			t.Errorf("--no-auth --listen %s: exit %d, %q", addr, code, p.stderr.String())
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
		p := startES(t, "serve --no-auth "+addr, "serve", "--home", home, "--no-auth", "--listen", addr)
		m := p.waitStdout(listeningRE, 60*time.Second)
		resp, err := http.Get(m[1] + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("healthz on %s: %d", addr, resp.StatusCode)
		}
		p.kill()
	}
}

// TestServeTokenRemoveRevokes (item 6): es token rm refuses the token on
// a running es serve within two seconds, es token add is accepted without
// a restart.
func TestServeTokenRemoveRevokes(t *testing.T) {
	s := newE2EServer(t, t.TempDir())
	s.start("127.0.0.1:0")
	waitCode := func(token string, want int) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for {
			code, _, err := s.do("GET", "/v1/datasets", token, "", nil)
			if err == nil && code == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET with the token: %d %v after 2 s, want %d", code, err, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitCode(s.read, 200)
	mustES(t, "token", "rm", "--home", s.home, "--name", "companions")
	waitCode(s.read, 401)
	added := strings.TrimSpace(mustES(t, "token", "add", "--home", s.home, "--name", "late", "--scope", "read"))
	waitCode(added, 200)
}

// TestCookRefusedWhileServing (item 3): es cook on a home a running
// es serve holds is refused with a message naming the server's upload
// route, and changes nothing.
func TestCookRefusedWhileServing(t *testing.T) {
	home := t.TempDir()
	mustES(t, "cook", "--home", home, "--dataset", "stocks", "--in", "../../server/cook/samples/stocks.csv",
		"--series-col", "symbol", "--period-col", "date", "--value-col", "price")
	before, err := os.ReadFile(filepath.Join(home, "datasets", "stocks", "CURRENT"))
	if err != nil {
		t.Fatal(err)
	}
	s := newE2EServer(t, home)
	s.start("127.0.0.1:0")
	code, _, errs := es(t, "cook", "--home", home, "--dataset", "stocks", "--in", "../../server/cook/samples/stocks.csv",
		"--series-col", "symbol", "--period-col", "date", "--value-col", "price")
	if code != 1 || !strings.Contains(errs, "PUT /v1/datasets/stocks") {
		t.Fatalf("cook while serving: exit %d, %q", code, errs)
	}
	after, _ := os.ReadFile(filepath.Join(home, "datasets", "stocks", "CURRENT"))
	if string(after) != string(before) {
		t.Fatalf("CURRENT moved under the server: %q -> %q", before, after)
	}
}

// TestCookNewEpochDropsLiveUpdates (item 3): a cook over a dataset with
// live updates starts an epoch without them: stale values do not come
// back and a series only the updates had is gone, also when the home is
// opened again; seqs never go backwards.
func TestCookNewEpochDropsLiveUpdates(t *testing.T) {
	home := t.TempDir()
	dir := t.TempDir()
	v1 := filepath.Join(dir, "v1.csv")
	v2 := filepath.Join(dir, "v2.csv")
	os.WriteFile(v1, []byte("series_id,period,value\nA,2020-01-01,1\nA,2020-01-02,2\nB,2020-01-01,5\n"), 0o644)
	os.WriteFile(v2, []byte("series_id,period,value\nA,2020-01-01,10\nA,2020-01-02,20\n"), 0o644)
	upd := filepath.Join(dir, "upd.csv")
	os.WriteFile(upd, []byte("series_id,period,value\nA,2020-01-02,-1\nGHOST,2020-01-01,7\n"), 0o644)
	mustES(t, "cook", "--home", home, "--dataset", "d", "--in", v1, "--frequency", "D")
	mustES(t, "put", "--home", home, "--dataset", "d", upd)
	if got := mustES(t, "get", "--home", home, "A"); got != "period,value\n2020-01-01,1\n2020-01-02,-1\n" {
		t.Fatalf("before the cook: %q", got)
	}
	mustES(t, "cook", "--home", home, "--dataset", "d", "--in", v2, "--frequency", "D")
	for range 2 { // each es get opens the home afresh
		if got := mustES(t, "get", "--home", home, "A"); got != "period,value\n2020-01-01,10\n2020-01-02,20\n" {
			t.Fatalf("after the cook: %q", got)
		}
		if code, _, _ := es(t, "get", "--home", home, "GHOST"); code != 1 {
			t.Fatalf("a series of the old epoch's updates came back (exit %d)", code)
		}
	}
	os.WriteFile(upd, []byte("series_id,period,value\nA,2020-01-03,3\n"), 0o644)
	mustES(t, "put", "--home", home, "--dataset", "d", upd)
	if got := mustES(t, "get", "--home", home, "A"); got != "period,value\n2020-01-01,10\n2020-01-02,20\n2020-01-03,3\n" {
		t.Fatalf("update after the cook: %q", got)
	}
	dsDir := filepath.Join(home, "datasets", "d")
	id, err := format.ReadCurrent(dsDir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := format.ReadManifest(filepath.Join(dsDir, format.SnapshotsDir, id))
	if err != nil {
		t.Fatal(err)
	}
	if m.Epoch != 2 || m.CoversThroughSeq < 2 {
		t.Fatalf("the cook's snapshot: epoch %d covers %d, want epoch 2 covering the 2 updates", m.Epoch, m.CoversThroughSeq)
	}
}

// TestServeMetricsListen: --metrics-listen serves /metrics on its own
// address and takes it off the API's.
func TestServeMetricsListen(t *testing.T) {
	s := newE2EServer(t, t.TempDir())
	s.extraArgs = []string{"--metrics-listen", "127.0.0.1:0"}
	s.start("127.0.0.1:0")
	m := s.p.waitStdout(regexp.MustCompile(`metrics on (http://\S+/metrics)\n`), 30*time.Second)
	resp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "es_ingest_rows_total") {
		t.Fatalf("metrics listener: %d %.200s", resp.StatusCode, b)
	}
	if code, _, err := s.do("GET", "/metrics", "", "", nil); err != nil || code != 404 {
		t.Fatalf("/metrics on the API address: %d %v", code, err)
	}
}

// TestCookCaseConflict (item 13): es cook refuses a dataset name that
// differs only by case from an existing one, and a Windows device name.
func TestCookCaseConflict(t *testing.T) {
	home := t.TempDir()
	src := filepath.Join(t.TempDir(), "a.csv")
	os.WriteFile(src, []byte("series_id,period,value\nA,2020-01-01,1\n"), 0o644)
	mustES(t, "cook", "--home", home, "--dataset", "prices", "--in", src, "--frequency", "D")
	if code, _, errs := es(t, "cook", "--home", home, "--dataset", "Prices", "--in", src, "--frequency", "D"); code != 1 || !strings.Contains(errs, "case") {
		t.Fatalf("cook Prices beside prices: exit %d %q", code, errs)
	}
	if code, _, _ := es(t, "cook", "--home", home, "--dataset", "aux", "--in", src, "--frequency", "D"); code != 2 {
		t.Fatalf("cook aux: exit %d", code)
	}
	if ents, _ := os.ReadDir(filepath.Join(home, "datasets")); len(ents) != 1 {
		t.Fatalf("datasets: %v", ents)
	}
}
