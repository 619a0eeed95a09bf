package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
)

// es runs a command in-process and returns its exit status and output.
func es(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(&env{stdout: &out, stderr: &errb}, args)
	return code, out.String(), errb.String()
}

func mustES(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := es(t, args...)
	if code != 0 {
		t.Fatalf("es %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

func TestCLIEndToEnd(t *testing.T) {
	home := t.TempDir()
	src := filepath.Join(t.TempDir(), "gen.csv")
	mustES(t, "gen", "--series", "50", "--rows", "5000", "--seed", "7", "--out", src)
	mustES(t, "cook", "--home", home, "--dataset", "gen", "--in", src)
	mustES(t, "cook", "--home", home, "--dataset", "stocks", "--in", "../../server/cook/samples/stocks.csv",
		"--series-col", "symbol", "--period-col", "date", "--value-col", "price")

	got := mustES(t, "get", "--home", home, "MSFT", "2000-01-01", "2000-03")
	want := "period,value\n2000-01-01,39.81\n2000-02-01,36.35\n2000-03-01,43.22\n"
	if got != want {
		t.Fatalf("es get MSFT:\n%s\nwant\n%s", got, want)
	}
	// dataset:series and --dataset name the same thing.
	if a, b := mustES(t, "get", "--home", home, "stocks:AAPL"), mustES(t, "get", "--home", home, "--dataset", "stocks", "AAPL"); a != b || strings.Count(a, "\n") < 100 {
		t.Fatalf("dataset forms disagree or too short: %d vs %d lines", strings.Count(a, "\n"), strings.Count(b, "\n"))
	}

	var info infoJSON
	if err := json.Unmarshal([]byte(mustES(t, "info", "--home", home, "MSFT")), &info); err != nil {
		t.Fatal(err)
	}
	if info.Dataset != "stocks" || info.Frequency != "M" || info.First != "2000-01-01" || info.Count != 123 {
		t.Fatalf("info %+v", info)
	}
	if out := mustES(t, "search", "--home", home, "msf"); !strings.Contains(out, "MSFT") {
		t.Fatalf("search: %s", out)
	}
	if out := mustES(t, "ls", "--home", home); !strings.Contains(out, "stocks") || !strings.Contains(out, "gen") {
		t.Fatalf("ls: %s", out)
	}
	mustES(t, "verify", "--home", home)

	// Unknown series: exit 1 with a message.
	if code, _, errs := es(t, "get", "--home", home, "NOPE"); code != 1 || !strings.Contains(errs, "not found") {
		t.Fatalf("unknown series: exit %d, %q", code, errs)
	}
	// Usage errors exit 2.
	if code, _, _ := es(t, "get", "--home", home); code != 2 {
		t.Fatalf("missing SERIES: exit %d", code)
	}
	if code, _, _ := es(t, "get", "--home", home, "MSFT", "2000-13-45"); code != 2 {
		t.Fatalf("bad FROM: exit %d", code)
	}
	// --help exits 0 for every command.
	for _, c := range commands() {
		if code, _, _ := es(t, c.name, "--help"); code != 0 {
			t.Errorf("es %s --help: exit %d", c.name, code)
		}
	}

	// A flipped byte anywhere is found by verify.
	dsDir := filepath.Join(home, "datasets", "stocks")
	id, err := format.ReadCurrent(dsDir)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dsDir, "snapshots", id, format.DataFile)
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 0x40
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := es(t, "verify", "--home", home); code != 1 || !strings.Contains(out, "FAIL stocks") {
		t.Fatalf("verify after flip: exit %d\n%s", code, out)
	}
}

func TestCookBadInput(t *testing.T) {
	home := t.TempDir()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte("series_id,period,value\nA,2020-01-01,1\nA,2020-01-02,abc\n"), 0o644)
	code, _, errs := es(t, "cook", "--home", home, "--dataset", "d", "--in", bad)
	if code != 1 || !strings.Contains(errs, "bad.csv:3") {
		t.Fatalf("bad value: exit %d, %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(home, "datasets", "d", "CURRENT")); !os.IsNotExist(err) {
		t.Fatalf("a failed cook published something: %v", err)
	}
	out := mustES(t, "cook", "--home", home, "--dataset", "d", "--in", bad, "--skip-bad")
	if !strings.Contains(out, "1 bad rows skipped") {
		t.Fatalf("skip-bad: %s", out)
	}
	// Empty value cells are no points, not errors, and the summary counts them.
	gaps := filepath.Join(dir, "gaps.csv")
	os.WriteFile(gaps, []byte("series_id,period,value\nA,2020-01-01,1\nA,2020-01-02,\nA,2020-01-03, \nA,2020-01-04,4\n"), 0o644)
	if out := mustES(t, "cook", "--home", home, "--dataset", "g", "--in", gaps); !strings.Contains(out, "2 rows") || !strings.Contains(out, "2 empty values dropped") {
		t.Fatalf("empty values: %s", out)
	}
	if code, _, _ := es(t, "cook", "--home", home, "--dataset", "../x", "--in", bad); code != 2 {
		t.Fatalf("bad dataset name: exit %d", code)
	}
}

func TestDemo(t *testing.T) {
	out := mustES(t, "demo", "--series", "200", "--rows", "20000", "--live", "2")
	for _, want := range []string{"cooked eia", "cooked iowa", "companion synced 4 datasets", "MSFT", "39.81", "random one-year lookups", "visible on the companion"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

func TestCLIPutCompact(t *testing.T) {
	home := t.TempDir()
	mustES(t, "cook", "--home", home, "--dataset", "stocks", "--in", "../../server/cook/samples/stocks.csv",
		"--series-col", "symbol", "--period-col", "date", "--value-col", "price")
	dir := t.TempDir()
	up := filepath.Join(dir, "up.csv")
	os.WriteFile(up, []byte("series_id,period,value\nMSFT,2000-02-15,99.5\nNEWCO,2026-11-27,1.25\n"), 0o644)
	mustES(t, "put", "--home", home, "--dataset", "stocks", up)
	del := filepath.Join(dir, "del.csv")
	os.WriteFile(del, []byte("series_id,period\nMSFT,2000-01-01\n"), 0o644)
	mustES(t, "put", "--home", home, "--dataset", "stocks", "--delete", del)

	want := "period,value\n2000-02-01,99.5\n2000-03-01,43.22\n"
	if got := mustES(t, "get", "--home", home, "MSFT", "2000-01-01", "2000-03"); got != want {
		t.Fatalf("merged get:\n%s", got)
	}
	// DATASET EPOCH SEQ SNAPSHOT-SEQ PENDING-RECORDS PENDING-ROWS WAL
	if out := mustES(t, "ls", "--home", home); !strings.HasPrefix(strings.Join(strings.Fields(strings.Split(out, "\n")[1]), " "), "stocks 1 3 0 3 3") {
		t.Fatalf("ls:\n%s", out)
	}
	// Bad rows change nothing.
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte("series_id,period,value\nMSFT,2000-04-01,1\nMSFT,2000-05-01,NaN\n"), 0o644)
	if code, _, errs := es(t, "put", "--home", home, "--dataset", "stocks", bad); code != 1 || !strings.Contains(errs, "bad.csv:3") {
		t.Fatalf("bad put: %d %s", code, errs)
	}
	if code, _, _ := es(t, "put", "--home", home, "--dataset", "nope", up); code != 1 {
		t.Fatalf("unknown dataset: exit %d", code)
	}
	mustES(t, "compact", "--home", home)
	if got := mustES(t, "get", "--home", home, "MSFT", "2000-01-01", "2000-03"); got != want {
		t.Fatalf("after compact:\n%s", got)
	}
	if got := mustES(t, "get", "--home", home, "NEWCO"); got != "period,value\n2026-11-27,1.25\n" {
		t.Fatalf("NEWCO after compact:\n%s", got)
	}
	mustES(t, "verify", "--home", home)
}

// TestDemoHome: es demo --home DIR leaves a home that es get, es search and es
// info open with the same --home (the synced datasets used to land in
// DIR/companion, where --home DIR found nothing).
func TestDemoHome(t *testing.T) {
	home := t.TempDir()
	out := mustES(t, "demo", "--home", home, "--series", "100", "--rows", "10000", "--live", "1")
	if !strings.Contains(out, "es get --home "+home+" MSFT") || !strings.Contains(out, "energyscope --home "+home) {
		t.Fatalf("demo does not say how to open its home:\n%s", out)
	}
	got := mustES(t, "get", "--home", home, "MSFT", "2000-01", "2000-03")
	if !strings.Contains(got, "39.81") || strings.Count(strings.TrimSpace(got), "\n") < 2 {
		t.Fatalf("es get --home %s MSFT:\n%s", home, got)
	}
	if got := mustES(t, "search", "--home", home, "gasoline"); !strings.Contains(got, "gasoline") && !strings.Contains(strings.ToLower(got), "gasoline") {
		t.Fatalf("es search --home %s gasoline:\n%s", home, got)
	}
	for _, ds := range []string{"eia", "stocks", "iowa"} {
		if _, err := os.Stat(filepath.Join(home, "datasets", ds, "CURRENT")); err != nil {
			t.Errorf("dataset %s not in the home: %v", ds, err)
		}
	}
}

// One damaged dataset does not take the home down for the CLI: es ls lists
// it as damaged beside the healthy one, es get serves the healthy one and
// names the damage for the other (issue 10, item 8).
func TestCLIDamagedDatasetContained(t *testing.T) {
	home := t.TempDir()
	src := filepath.Join(t.TempDir(), "gen.csv")
	mustES(t, "gen", "--series", "20", "--rows", "2000", "--seed", "3", "--out", src)
	mustES(t, "cook", "--home", home, "--dataset", "gen", "--in", src)
	mustES(t, "cook", "--home", home, "--dataset", "stocks", "--in", "../../server/cook/samples/stocks.csv",
		"--series-col", "symbol", "--period-col", "date", "--value-col", "price")
	dsDir := filepath.Join(home, "datasets", "gen")
	id, err := format.ReadCurrent(dsDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dsDir, format.SnapshotsDir, id, format.DataFile), 100); err != nil {
		t.Fatal(err)
	}
	out := mustES(t, "ls", "--home", home)
	var genLine, stocksLine string
	for _, l := range strings.Split(out, "\n") {
		// The first table (one line per dataset, HEALTH last).
		if f := strings.Fields(l); len(f) > 7 && f[0] == "gen" && genLine == "" {
			genLine = l
		} else if len(f) > 7 && f[0] == "stocks" && stocksLine == "" {
			stocksLine = l
		}
	}
	if !strings.Contains(genLine, "damaged") || !strings.Contains(genLine, "data.arrow") || !strings.HasSuffix(strings.TrimSpace(stocksLine), " ok") {
		t.Fatalf("es ls:\n%s", out)
	}
	if got := mustES(t, "get", "--home", home, "MSFT", "2000-01-01", "2000-01"); got != "period,value\n2000-01-01,39.81\n" {
		t.Fatalf("es get MSFT: %q", got)
	}
	code, _, errs := es(t, "get", "--home", home, "--dataset", "gen", "X")
	if code != 1 || !strings.Contains(errs, "damaged") {
		t.Fatalf("es get in the damaged dataset: exit %d, %q", code, errs)
	}
}
