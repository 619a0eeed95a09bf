package bridge

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// TestCalcGolden posts a batch of calls on the real sample data to a
// running bridge and compares the answers, one per call, with
// testdata/calc.golden.
func TestCalcGolden(t *testing.T) {
	b := startBridge(t, sampleHome(t), nil)
	req, err := os.ReadFile("testdata/calc.request.json")
	if err != nil {
		t.Fatal(err)
	}
	resp, out := b.do(t, "POST", "/v1/calc", req, b.auth())
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, out)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var calls struct{ Calls []json.RawMessage }
	if err := json.Unmarshal(req, &calls); err != nil {
		t.Fatal(err)
	}
	var res struct{ Results []json.RawMessage }
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("response is not JSON: %v", err)
	}
	if len(res.Results) != len(calls.Calls) {
		t.Fatalf("%d results for %d calls", len(res.Results), len(calls.Calls))
	}
	var got bytes.Buffer
	for i := range calls.Calls {
		var c bytes.Buffer
		json.Compact(&c, calls.Calls[i])
		got.WriteString(c.String() + "\n    " + string(res.Results[i]) + "\n")
	}
	path := filepath.Join("testdata", "calc.golden")
	if *update {
		if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestCalcGolden -update)", err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		gl, wl := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Errorf("line %d:\n got  %s\n want %s", i+1, g, w)
			}
		}
	}
	// The documented example: MSFT in January 2000 was 39.81.
	if !strings.Contains(string(res.Results[0]), "[36526,39.81]") {
		t.Errorf("MSFT Jan 2000: %s", res.Results[0])
	}
}
