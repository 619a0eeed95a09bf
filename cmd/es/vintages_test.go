package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/server/lake"
)

// TestVintagesCLI: on a real es serve's home, es vintages lists the lake's
// vintages and es get --asof answers what es get answered while each was
// current, both while the server runs; es tag and es rollback refuse while
// it holds the home, naming the HTTP route, and work once it stopped: the
// rollback is one new commit, a new epoch, and es get then answers the
// vintage's values. Bad WHENs and expired vintages are clear errors that
// change nothing.
func TestVintagesCLI(t *testing.T) {
	home := t.TempDir()
	cook := func() {
		mustES(t, "cook", "--home", home, "--dataset", "stocks", "--in", "../../server/cook/samples/stocks.csv",
			"--series-col", "symbol", "--period-col", "date", "--value-col", "price", "--frequency", "M")
	}
	cook()
	s := newE2EServer(t, home)
	s.start("127.0.0.1:0")
	get := func(args ...string) string {
		return mustES(t, append([]string{"get", "--home", home}, args...)...)
	}
	served := []string{get("MSFT", "2026")} // vintage 1: the migrated cook
	if _, err := s.post("stocks", []tickRow{{Series: "MSFT", Period: "2026-11-01", Value: 500}}); err != nil {
		t.Fatal(err)
	}
	if code, b, err := s.do("POST", "/v1/datasets/stocks/compact", s.write, "", nil); err != nil || code != 200 {
		t.Fatalf("compact: %d %v %s", code, err, b)
	}
	served = append(served, get("MSFT", "2026")) // vintage 2: with the November row
	if served[0] == served[1] {
		t.Fatalf("the two vintages read the same: %q", served[0])
	}

	var vs []lake.Vintage
	if err := json.Unmarshal([]byte(mustES(t, "vintages", "--home", home, "--dataset", "stocks", "--json")), &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[1].Snapshot != s.head("stocks").Snapshot {
		t.Fatalf("vintages %+v", vs)
	}
	for i, v := range vs {
		for _, when := range []string{v.Snapshot, v.CommittedAt.Format(time.RFC3339Nano)} {
			if got := get("--asof", when, "MSFT", "2026"); got != served[i] {
				t.Errorf("es get --asof %s:\n%s\nwant what es get said then:\n%s", when, got, served[i])
			}
		}
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"tag", "--home", home, "--dataset", "stocks", "--vintage", vs[0].Snapshot, "--name", "first"}, "POST /v1/datasets/stocks/tags"},
		{[]string{"rollback", "--home", home, "--dataset", "stocks", "--to", vs[0].Snapshot}, "POST /v1/datasets/stocks/rollback?to=" + vs[0].Snapshot},
	} {
		code, _, stderr := es(t, tc.args...)
		if code != 1 || !strings.Contains(stderr, "running es serve") || !strings.Contains(stderr, tc.says) {
			t.Errorf("es %s while serving: exit %d %q, want a refusal naming %s", tc.args[0], code, stderr, tc.says)
		}
	}
	s.p.kill()

	mustES(t, "tag", "--home", home, "--dataset", "stocks", "--vintage", vs[0].Snapshot, "--name", "first")
	table := mustES(t, "vintages", "--home", home, "--dataset", "stocks")
	if !strings.Contains(table, "first") || !strings.Contains(table, vs[1].Snapshot) {
		t.Errorf("es vintages table:\n%s", table)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"get", "--home", home, "--asof", "2001-01-01", "MSFT"}, "before the first vintage"},
		{[]string{"get", "--home", home, "--asof", "2026-13-45", "MSFT"}, "bad as-of"},
		{[]string{"get", "--home", home, "--asof", "nope", "MSFT"}, "nope"},
		{[]string{"rollback", "--home", home, "--dataset", "stocks", "--to", "e9-s9-0123456789ab"}, "cannot roll back"},
		{[]string{"tag", "--home", home, "--dataset", "stocks", "--vintage", vs[1].Snapshot, "--name", "first"}, "already names"},
	} {
		if code, _, stderr := es(t, tc.args...); code != 1 || !strings.Contains(stderr, tc.says) {
			t.Errorf("es %s: exit %d %q, want an error naming %q", strings.Join(tc.args, " "), code, stderr, tc.says)
		}
	}
	if n := len(lakeVintages(t, home, "stocks")); n != 2 {
		t.Fatalf("errors changed the lake: %d vintages", n)
	}

	out := mustES(t, "rollback", "--home", home, "--dataset", "stocks", "--to", "first")
	after := lakeVintages(t, home, "stocks")
	if len(after) != 3 || after[2].Epoch != vs[1].Epoch+1 || after[2].Snapshot != currentOf(t, home, "stocks") {
		t.Fatalf("after the rollback: %+v, CURRENT %s (out %q)", after, currentOf(t, home, "stocks"), out)
	}
	if !strings.Contains(out, vs[0].Snapshot) || !strings.Contains(out, after[2].Snapshot) {
		t.Errorf("rollback said %q", out)
	}
	if got := get("MSFT", "2026"); got != served[0] {
		t.Errorf("es get after the rollback:\n%s\nwant vintage 1's:\n%s", got, served[0])
	}
	// The rollback's commit names the vintage it restored: in the JSON
	// (rollback_of, the Iceberg snapshot id) and in the table.
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(mustES(t, "vintages", "--home", home, "--dataset", "stocks", "--json")), &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw) != 3 || string(raw[2]["rollback_of"]) != strconv.FormatInt(vs[0].IcebergSnapshot, 10) || raw[1]["rollback_of"] != nil {
		t.Errorf("es vintages --json after the rollback: %s, want rollback_of %d on the last only", raw, vs[0].IcebergSnapshot)
	}
	lines := strings.Split(strings.TrimSpace(mustES(t, "vintages", "--home", home, "--dataset", "stocks")), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "ROLLBACK OF") || !strings.Contains(lines[3], after[2].Snapshot) ||
		!strings.Contains(lines[3], vs[0].Snapshot+" ("+strconv.FormatInt(vs[0].IcebergSnapshot, 10)+")") || strings.Contains(lines[2], "(") {
		t.Errorf("es vintages after the rollback:\n%s\nwant the last line to name %s as restored", strings.Join(lines, "\n"), vs[0].Snapshot)
	}
}

// TestServeKeepVintages: es serve --keep-vintages 2 expires older
// vintages after each publish, keeping a tagged one.
func TestServeKeepVintages(t *testing.T) {
	home := t.TempDir()
	mustES(t, "cook", "--home", home, "--dataset", "stocks", "--in", "../../server/cook/samples/stocks.csv",
		"--series-col", "symbol", "--period-col", "date", "--value-col", "price", "--frequency", "M")
	s := newE2EServer(t, home)
	s.extraArgs = []string{"--keep-vintages", "2"}
	s.start("127.0.0.1:0")
	first := lakeVintages(t, home, "stocks")[0]
	if code, b, err := s.do("POST", "/v1/datasets/stocks/tags", s.write, "application/json", []byte(`{"vintage":"`+first.Snapshot+`","name":"keep"}`)); err != nil || code != 201 {
		t.Fatalf("tag: %d %v %s", code, err, b)
	}
	for i := range 4 {
		if _, err := s.post("stocks", []tickRow{{Series: "MSFT", Period: "2026-11-01", Value: float64(500 + i)}}); err != nil {
			t.Fatal(err)
		}
		if code, b, err := s.do("POST", "/v1/datasets/stocks/compact", s.write, "", nil); err != nil || code != 200 {
			t.Fatalf("compact: %d %v %s", code, err, b)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		vs := lakeVintages(t, home, "stocks")
		if len(vs) == 3 {
			if vs[0].Snapshot != first.Snapshot || vs[2].Snapshot != s.head("stocks").Snapshot {
				t.Fatalf("kept %+v: want the tagged first and the two newest", vs)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d vintages after 5 publishes with --keep-vintages 2 and one tag, want 3", len(vs))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, _, _ := es(t, "serve", "--home", t.TempDir(), "--keep-vintages", "-1", "--no-auth"); code != 2 {
		t.Errorf("--keep-vintages -1: exit %d, want 2", code)
	}
}
