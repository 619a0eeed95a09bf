package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// addinDir is the add-in's source directory (its node tests and tools).
const addinDir = "../addin"

// needTool finds a program, or skips the test (fails it under CI=true,
// where scripts/install-deps.sh installs everything).
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if ciRequired() {
			t.Fatalf("%s not found (CI=true: scripts/install-deps.sh installs it)", name)
		}
		t.Skipf("%s not found", name)
	}
	return p
}

// controlServer is a plain-HTTP helper on loopback for node and the
// browser: POST /apply?series=ID&value=V upserts ID's April 2010 point in
// the stocks dataset, as an update from the server would.
func controlServer(t *testing.T, b *testBridge) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := strconv.ParseFloat(r.URL.Query().Get("value"), 64)
		if err != nil || r.Method != "POST" {
			http.Error(w, "want POST /apply?series=ID&value=V", 400)
			return
		}
		b.apply(t, "stocks", r.URL.Query().Get("series"), april2010, v)
		w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestNodeAddin runs functions/addin/test with node against a real bridge
// over HTTPS, trusting the bridge's CA through NODE_EXTRA_CA_CERTS.
func TestNodeAddin(t *testing.T) {
	node := needTool(t, "node")
	b := startBridge(t, sampleHome(t), nil)
	control := controlServer(t, b)
	args := []string{"--test", "--test-reporter=spec", "test/functions.test.js"}
	// Node 20 has WebSocket behind a flag; later versions have it on.
	if exec.Command(node, "--experimental-websocket", "-e", "0").Run() == nil {
		args = append([]string{"--experimental-websocket"}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = addinDir
	cmd.Env = append(os.Environ(),
		"ES_BRIDGE_URL="+b.URL(),
		"ES_BRIDGE_TOKEN="+b.Token(),
		"ES_TEST_CONTROL="+control,
		"NODE_EXTRA_CA_CERTS="+b.Certs().CAPath(),
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^\S+ fail 0$`).Match(out) || !regexp.MustCompile(`(?m)^\S+ pass [1-9]`).Match(out) || regexp.MustCompile(`(?m)^\S+ skipped [1-9]`).Match(out) {
		t.Fatalf("node --test output:\n%s", out)
	}
	t.Logf("%s", out)
}

// TestBrowserAddin is the end-to-end test in headless Chromium (Debian's
// chromium driven by playwright-core): the task pane served by the bridge,
// formulas evaluated by the add-in's own code, ES.LIVE streaming an
// update, and the function builder. Without chromium or playwright-core it
// is skipped, except under CI=true.
func TestBrowserAddin(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	node := needTool(t, "node")
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		if ciRequired() {
			t.Fatalf("%s not found (CI=true: scripts/install-deps.sh installs chromium)", chromium)
		}
		t.Skipf("no %s", chromium)
	}
	if _, err := os.Stat(filepath.Join(addinDir, "node_modules", "playwright-core")); err != nil {
		if ciRequired() {
			t.Fatal("playwright-core missing: run npm ci in functions/addin (scripts/install-deps.sh does)")
		}
		t.Skip("playwright-core not installed (npm ci in functions/addin)")
	}
	b := startBridge(t, sampleHome(t), nil)
	control := controlServer(t, b)
	calls := []map[string]any{
		{"fn": "GET", "args": []any{[][]any{{"MSFT"}}, "2000-01-01", "2000-01-31"}},
		{"fn": "GET", "args": []any{[][]any{{"MSFT,NOPE"}}, "2004-07", "2004-07", [][][]any{{{"headers=y"}}}}},
		{"fn": "LATEST", "args": []any{[][]any{{"IBM"}}, "both"}},
		{"fn": "INFO", "args": []any{[][]any{{"Fossil Fuels"}}, "unit"}},
		{"fn": "SEARCH", "args": []any{"nuclear"}},
		{"fn": "GET", "args": []any{[][]any{{"NOPE"}}}},
	}
	shot := os.Getenv("ES_SCREENSHOT")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "tools/browser-test.js")
	cmd.Dir = addinDir
	cmd.Env = append(os.Environ(),
		"ES_BRIDGE_URL="+b.URL(),
		"ES_SPKI="+b.Certs().SPKIHash(),
		"ES_TEST_CONTROL="+control,
		"ES_CALLS="+mustJSON(t, calls),
		"CHROMIUM="+chromium,
		"ES_SCREENSHOT="+shot,
	)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("browser test: %v\n%s\n%s", err, out, stderr.Bytes())
	}
	var got struct {
		Results  []json.RawMessage `json:"results"`
		Live     []json.RawMessage `json:"live"`
		Formula  string            `json:"formula"`
		Datasets []string          `json:"datasets"`
		Conn     string            `json:"conn"`
		Errors   []string          `json:"errors"`
		Auth     []string          `json:"auth"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("browser output: %v\n%s", err, out)
	}
	want := []string{
		`{"value":[[36526,39.81]]}`,
		`{"value":[["Date","MSFT","NOPE"],[38169,23.38,{"error":{"code":"#N/A","message":"series \"NOPE\" not found"}}]]}`,
		`{"value":[[40238,125.55]]}`,
		`{"value":[["thousand MWh"]]}`,
		`{"value":[["Nuclear Energy",""]]}`,
		`{"error":{"code":"#N/A","message":"series \"NOPE\" not found"}}`,
	}
	for i, w := range want {
		if i >= len(got.Results) || string(got.Results[i]) != w {
			t.Errorf("formula %d: got %s\nwant %s", i, got.Results[min(i, len(got.Results)-1)], w)
		}
	}
	if len(got.Live) < 2 || string(got.Live[0]) != `{"value":[[28.8]]}` || string(got.Live[len(got.Live)-1]) != `{"value":[[77.25]]}` {
		t.Errorf("ES.LIVE results %s", got.Live)
	}
	if got.Formula != `=ES.GET("MSFT","2000","per=M;agg=avg;yoy=pct")` {
		t.Errorf("builder formula %q", got.Formula)
	}
	if strings.Join(got.Datasets, ",") != "iowa,seattle,stocks" || got.Conn != "connected" {
		t.Errorf("task pane status: %v %q", got.Datasets, got.Conn)
	}
	if len(got.Errors) > 0 {
		t.Errorf("page errors: %v", got.Errors)
	}
	// The token path: the page found the token the bridge wrote into it and
	// sent it on every call (the websocket's, as a subprotocol, is proved
	// by ES.LIVE's values: the bridge refuses a websocket without it).
	seen := map[string]bool{}
	for _, a := range got.Auth {
		path, auth, _ := strings.Cut(a, " ")
		seen[path] = true
		if path != "/v1/live" && auth != "Bearer "+b.Token() {
			t.Errorf("%s sent Authorization %q", path, auth)
		}
	}
	if !seen["/v1/calc"] || !seen["/v1/status"] {
		t.Errorf("API calls seen: %v", got.Auth)
	}
}
