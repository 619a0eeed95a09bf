//go:build !probe

package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// target is one goal of the issue "Serving snapshot". The pet figures also
// apply to the small scale (a sanity check, not a goal of its own).
type target struct {
	key       string
	what      string
	unit      string
	atMost    bool // value <= goal passes; else value >= goal passes
	pet, full float64
}

var targets = []target{
	{"open_warm_ms", "open, page cache warm", "ms", true, 1, 5},
	{"open_cold_ms", "open, page cache dropped", "ms", true, 20, 50},
	{"rss_open_mb", "RSS after open", "MB", true, 16, 64},
	{"rss_touched_mb", "RSS after reading every series once", "MB", true, 190, 1800},
	{"get_p50_us", "get series + 1-year range, p50", "µs", true, 0.6, 0.8},
	{"get_p99_us", "get series + 1-year range, p99", "µs", true, 2, 3},
	{"lookup_vs_duckdb_table_x", "per lookup vs DuckDB table (p50/p50)", "x", false, 1000, 1000},
	{"open_vs_resident_x", "open vs resident path (warm)", "x", false, 500, 500},
	{"cook_vs_duckdb_ratio", "cook time / DuckDB COPY ORDER BY time", "x", true, 0.7, 0.7},
	{"data_bytes_per_row", "data.arrow bytes per row", "B", true, 17, 17},
	{"compact_vs_cook_ratio", "compaction, 1% of series updated / fresh cook", "x", true, 0.5, 0.5},
}

func (t target) goal(sc scale) float64 {
	if sc.full {
		return t.full
	}
	return t.pet
}

func (t target) ok(sc scale, v float64) bool {
	if math.IsNaN(v) {
		return false
	}
	if t.atMost {
		return v <= t.goal(sc)
	}
	return v >= t.goal(sc)
}

func fmtNum(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

func printTable(w io.Writer, sc scale, r *report) {
	tgt := "pet"
	if sc.full {
		tgt = "full"
	}
	fmt.Fprintf(w, "scale %s: %s rows, %s series, period %v (targets: %s)\n\n",
		sc.name, fmtNum(r.F("rows")), fmtNum(r.F("series")), r.vals["period_type"], tgt)
	fmt.Fprintf(w, "%-44s %12s %12s  %s\n", "target", "measured", "goal", "")
	fmt.Fprintf(w, "%s\n", strings.Repeat("-", 78))
	for _, t := range targets {
		v, ok := r.Get(t.key)
		op := ">="
		if t.atMost {
			op = "<="
		}
		res := "MISS"
		if !ok {
			res = "n/a"
		} else if t.ok(sc, v) {
			res = "PASS"
		}
		fmt.Fprintf(w, "%-44s %12s %12s  %s\n", t.what+" ("+t.unit+")", fmtNum(v), op+" "+fmtNum(t.goal(sc)), res)
	}
	fmt.Fprintf(w, "\n%-44s %12s\n", "details", "")
	fmt.Fprintf(w, "%s\n", strings.Repeat("-", 78))
	for _, row := range [][2]string{
		{"rss_baseline_mb", "Go runtime RSS before open (MB)"},
		{"open_first_get_us", "first lookup after open (µs)"},
		{"get_first_p50_us", "get p50, fresh process, first pass (µs)"},
		{"get_first_p99_us", "get p99, fresh process, first pass (µs)"},
		{"get_noread_p50_us", "get p50 without reading the points (µs)"},
		{"get_points_per_query", "points per query"},
		{"resident_open_ms", "resident path: ready (ms)"},
		{"resident_rss_mb", "resident path: RSS (MB)"},
		{"resident_open_cold_ms", "resident path: ready, cold (ms)"},
		{"resident_get_p50_us", "resident path: get p50 (µs)"},
		{"duckdb_table_p50_us", "DuckDB table query p50 (µs)"},
		{"duckdb_parquet_p50_us", "DuckDB Parquet query p50 (µs)"},
		{"lookup_vs_duckdb_parquet_x", "per lookup vs DuckDB Parquet (x)"},
		{"cook_s", "our cook (s)"},
		{"duckdb_cook_s", "DuckDB COPY ... ORDER BY (s)"},
		{"cook_peak_rss_mb", "our cook peak RSS (MB)"},
		{"compact_s", "compaction, 1% of series updated (s)"},
		{"compact_cpu_s", "compaction CPU (s)"},
		{"compact_peak_rss_mb", "compaction peak RSS (MB)"},
		{"duckdb_cook_peak_rss_mb", "DuckDB cook peak RSS (MB)"},
	} {
		fmt.Fprintf(w, "%-44s %12s\n", row[1], fmtNum(r.F(row[0])))
	}
	fmt.Fprintln(w, "\n(go run . --json prints every figure)")
}
