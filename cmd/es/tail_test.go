package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

func tierOf(t *testing.T, home, series string) string {
	t.Helper()
	var info infoJSON
	if err := json.Unmarshal([]byte(mustES(t, "info", "--home", home, series)), &info); err != nil {
		t.Fatal(err)
	}
	return info.Tier
}

// seriesIDs lists the ids of the snapshot in service of a dataset.
func seriesIDs(t *testing.T, home, dataset string) []string {
	t.Helper()
	dsDir := filepath.Join(home, "datasets", dataset)
	id, err := format.ReadCurrent(dsDir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Open(filepath.Join(dsDir, "snapshots", id))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ids []string
	for r := uint32(0); r < uint32(s.NumSeries()); r++ {
		ids = append(ids, s.Info(r).ID)
	}
	return ids
}

func TestCookTail(t *testing.T) {
	src := filepath.Join(t.TempDir(), "gen.csv")
	mustES(t, "gen", "--series", "120", "--rows", "30000", "--seed", "11", "--out", src)
	hotHome, coldHome := t.TempDir(), t.TempDir()
	mustES(t, "cook", "--home", hotHome, "--dataset", "gen", "--in", src)
	out := mustES(t, "cook", "--home", coldHome, "--dataset", "gen", "--in", src, "--tail", "fraction=0.7")
	if !strings.Contains(out, "cold tier: 84 series in tail.parquet") {
		t.Fatalf("cook output: %s", out)
	}
	mustES(t, "verify", "--home", coldHome)
	colds := 0
	for _, id := range seriesIDs(t, hotHome, "gen") {
		if a, b := mustES(t, "get", "--home", hotHome, id), mustES(t, "get", "--home", coldHome, id); a != b {
			t.Fatalf("%s: cold get differs:\n%s\nwant\n%s", id, b, a)
		}
		if tierOf(t, coldHome, id) == "cold" {
			colds++
		}
	}
	if colds != 84 {
		t.Fatalf("%d cold series, want 84", colds)
	}

	// list=FILE, and compaction keeps the tier of a cold series it updates.
	home := t.TempDir()
	list := filepath.Join(t.TempDir(), "cold.txt")
	os.WriteFile(list, []byte("MSFT\nNOT.THERE\n"), 0o644)
	mustES(t, "cook", "--home", home, "--dataset", "stocks", "--in", "../../server/cook/samples/stocks.csv",
		"--series-col", "symbol", "--period-col", "date", "--value-col", "price", "--tail", "list="+list)
	if tierOf(t, home, "MSFT") != "cold" || tierOf(t, home, "AAPL") != "hot" {
		t.Fatal("list rule not applied")
	}
	if got := mustES(t, "get", "--home", home, "MSFT", "2000-01-01", "2000-03"); got != "period,value\n2000-01-01,39.81\n2000-02-01,36.35\n2000-03-01,43.22\n" {
		t.Fatalf("cold MSFT:\n%s", got)
	}
	up := filepath.Join(t.TempDir(), "up.csv")
	os.WriteFile(up, []byte("series_id,period,value\nMSFT,2000-02-15,99.5\n"), 0o644)
	mustES(t, "put", "--home", home, "--dataset", "stocks", up)
	mustES(t, "compact", "--home", home)
	if tierOf(t, home, "MSFT") != "cold" || tierOf(t, home, "AAPL") != "hot" {
		t.Fatal("compaction changed tiers")
	}
	if got := mustES(t, "get", "--home", home, "MSFT", "2000-01-01", "2000-03"); got != "period,value\n2000-01-01,39.81\n2000-02-01,99.5\n2000-03-01,43.22\n" {
		t.Fatalf("cold MSFT after compaction:\n%s", got)
	}
	mustES(t, "verify", "--home", home)

	for _, bad := range []string{"fraction=2", "oldest", "list=/no/such/file", "before=soon"} {
		if code, _, errs := es(t, "cook", "--home", home, "--dataset", "x", "--in", src, "--tail", bad); code != 2 {
			t.Fatalf("--tail %s: exit %d %s", bad, code, errs)
		}
	}
}
