package format

import (
	"context"
	"encoding/csv"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"
)

// interopTable has ids that stress the string paths (Unicode, a comma, a
// quote, a newline, prefixes of each other), periods before and after the
// epoch, values at the edges of float64, a series without rows, and several
// record batches. Periods are bucket starts, so the expected rows are the
// input rows sorted by (id bytes, period): nothing here depends on the cook.
func interopTable(hourly bool) *Table {
	tb := &Table{}
	add := func(m SeriesMeta, start string, n int, value func(k int) float64) {
		tb.Series = append(tb.Series, m)
		p := ts(start)
		for k := range n {
			tb.Append(uint32(len(tb.Series)-1), p, value(k))
			p = nextPeriod(m.Frequency, p)
		}
	}
	edge := []float64{0, math.Copysign(0, -1), 0.1 + 0.2, -1e-300, 5e-324, math.MaxFloat64, -math.MaxFloat64, 1 << 53, 123456.789}
	add(SeriesMeta{ID: "PET.RWTC.D", Name: "WTI", Unit: "$/bbl", Frequency: Daily}, "1999-12-20T00:00:00Z", 40, func(k int) float64 { return 25 + float64(k)/8 })
	add(SeriesMeta{ID: "PET.RWTC", Frequency: Weekly}, "1969-12-29T00:00:00Z", 9, func(k int) float64 { return edge[k] })
	add(SeriesMeta{ID: `Zürich, "quoted"`, Name: "comma, quote", Frequency: Monthly}, "1969-06-01T00:00:00Z", 13, func(k int) float64 { return float64(-k) })
	add(SeriesMeta{ID: "東京.電力", Frequency: Quarterly}, "2019-10-01T00:00:00Z", 6, func(k int) float64 { return float64(k) * 1e6 })
	add(SeriesMeta{ID: "line\nbreak", Frequency: Annual}, "1850-01-01T00:00:00Z", 11, func(k int) float64 { return float64(k) / 3 })
	add(SeriesMeta{ID: "empty", Frequency: Daily}, "2000-01-01T00:00:00Z", 0, nil)
	if hourly {
		add(SeriesMeta{ID: "H.load", Frequency: Hourly}, "2020-03-28T20:00:00Z", 50, func(k int) float64 { return float64(k%24) + 0.5 })
	}
	return tb
}

// writeExpectedCSV writes series_id,period,value for the rows of tb, sorted
// the way the snapshot must hold them.
func writeExpectedCSV(t *testing.T, path string, tb *Table, timestamps bool) {
	t.Helper()
	idx := make([]int, tb.Len())
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ia, ib := tb.Series[tb.SeriesIdx[idx[a]]].ID, tb.Series[tb.SeriesIdx[idx[b]]].ID
		if ia != ib {
			return ia < ib
		}
		return tb.Period[idx[a]] < tb.Period[idx[b]]
	})
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := csv.NewWriter(f)
	w.Write([]string{"series_id", "period", "value"})
	for _, i := range idx {
		layout := "2006-01-02"
		if timestamps {
			layout = "2006-01-02T15:04:05Z"
		}
		w.Write([]string{tb.Series[tb.SeriesIdx[i]].ID, time.Unix(tb.Period[i], 0).UTC().Format(layout), strconv.FormatFloat(tb.Value[i], 'g', -1, 64)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		t.Fatal(err)
	}
}

// TestInteropArrowJS reads cooked snapshots with a third-party Arrow
// implementation (apache-arrow on Node, pinned in interop/package-lock.json)
// and checks them against the expected rows. It skips only outside CI
// (CI != "true") when interop/node_modules is missing; under CI it installs
// the modules with npm ci if needed and fails if Node is missing.
func TestInteropArrowJS(t *testing.T) {
	dir, err := filepath.Abs("interop")
	if err != nil {
		t.Fatal(err)
	}
	_, err = os.Stat(filepath.Join(dir, "node_modules", "apache-arrow", "package.json"))
	haveModules := err == nil
	if !haveModules && os.Getenv("CI") != "true" {
		t.Skip("localcache/format/interop/node_modules is missing: run `npm ci` there (under CI=true this test installs it and never skips)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed for the Arrow interop test: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if !haveModules {
		npm, err := exec.LookPath("npm")
		if err != nil {
			t.Fatalf("npm is needed to install the interop test's modules: %v", err)
		}
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
	for _, c := range []struct {
		name   string
		hourly bool
	}{{"date32", false}, {"timestamp", true}} {
		t.Run(c.name, func(t *testing.T) {
			tb := interopTable(c.hourly)
			snap, m := writeSnap(t, tb, WriteOptions{BatchRows: 16})
			if want := map[bool]PeriodType{false: PeriodDate32, true: PeriodTimestamp}[c.hourly]; m.PeriodType != want || m.Batches < 3 {
				t.Fatalf("cooked a %s snapshot of %d batches", m.PeriodType, m.Batches)
			}
			expected := filepath.Join(t.TempDir(), "expected.csv")
			writeExpectedCSV(t, expected, tb, c.hourly)
			cmd := exec.CommandContext(ctx, node, "--test", "interop.test.mjs")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "ES_SNAPSHOT_DIR="+snap, "ES_EXPECTED_CSV="+expected)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("node --test: %v\n%s", err, out)
			}
			t.Logf("%s", out)
		})
	}
}
