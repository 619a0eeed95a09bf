//go:build !probe

// Command bench measures the serving snapshot side by side with its peers:
// the resident path (copying Arrow read + Go map) and DuckDB (native table
// and Parquet), plus the cook against DuckDB's COPY ... ORDER BY.
//
//	cd bench && go run . --scale small          # readable table with targets
//	cd bench && go run . --scale pet --json     # one JSON object
//
// See ../BENCHMARKS.md for the method and the figures.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/energyscope/energyscope/internal/synth"
	"github.com/energyscope/energyscope/localcache/format"
)

type scale struct {
	name   string
	series int
	rows   int64
	full   bool // use the full-scale targets
}

var scales = map[string]scale{
	"small": {"small", 20_000, 1_500_000, false},
	"pet":   {"pet", 175_000, 13_800_000, false},
	"full":  {"full", 2_820_000, 136_000_000, true},
}

func main() {
	var a childArgs
	var scaleName, dataDir, profDir string
	var asJSON, noDuck, noCook, genOnly bool
	var openRuns, coldRuns, residentRuns int
	flag.StringVar(&scaleName, "scale", "small", "small (20K series, 1.5M rows), pet (175K, 13.8M) or full (2.82M, 136M)")
	flag.BoolVar(&asJSON, "json", false, "print one JSON object instead of the table")
	flag.StringVar(&dataDir, "data", ".data", "cache directory for generated data and snapshots")
	flag.IntVar(&openRuns, "open-runs", 5, "fresh processes for the warm open (median)")
	flag.IntVar(&coldRuns, "cold-runs", 3, "fresh processes for the cold open, each after dropping the page cache (median)")
	flag.IntVar(&residentRuns, "resident-runs", 3, "fresh processes for the resident path (median)")
	flag.BoolVar(&noDuck, "no-duckdb", false, "skip DuckDB (cook and queries)")
	flag.BoolVar(&noCook, "no-cook", false, "reuse the snapshot cooked by an earlier run (cook_s is then not measured)")
	flag.BoolVar(&genOnly, "gen-only", false, "only generate (and cache) the scale's CSV, then exit")
	flag.StringVar(&profDir, "profile", "", "write CPU profiles of the cook and get children into this directory")
	childFlags(flag.CommandLine, &a)
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: go run . [--scale small|pet|full] [--json] [flags]\n")
		flag.VisitAll(func(f *flag.Flag) {
			if f.Usage != "" {
				fmt.Fprintf(os.Stderr, "  --%s (default %q)\n    \t%s\n", f.Name, f.DefValue, f.Usage)
			}
		})
	}
	flag.Parse()
	if a.mode != "" {
		if err := runChild(a); err != nil {
			fmt.Fprintf(os.Stderr, "bench child %s: %v\n", a.mode, err)
			os.Exit(1)
		}
		return
	}
	sc, ok := scales[scaleName]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown scale %q (small, pet, full)\n", scaleName)
		os.Exit(2)
	}
	r, err := run(sc, dataDir, profDir, a, runOpts{noDuck, noCook, genOnly, openRuns, coldRuns, residentRuns})
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
	if asJSON {
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
		return
	}
	printTable(os.Stdout, sc, r)
}

type runOpts struct {
	noDuck, noCook, genOnly          bool
	openRuns, coldRuns, residentRuns int
}

// probeExe is the DuckDB-free build of this program (probe.go); children
// that do not need DuckDB run it.
var probeExe string

// probeNice is passed to the probe children as --nice. (Real-time
// scheduling was tried and dropped: a Go process under SCHED_FIFO on both
// cores can starve its own runtime threads and crawl at the RT throttling
// limit.)
var probeNice int

// child runs this program in a child mode and decodes its JSON answer.
func child(mode string, args ...string) (map[string]any, error) {
	exe := probeExe
	if heavyModes[mode] != nil || exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	} else if probeNice != 0 {
		args = append(args, "--nice", strconv.Itoa(probeNice))
	}
	cmd := exec.Command(exe, append([]string{"--child", mode}, args...)...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("child %s: %w", mode, err)
	}
	wall := time.Since(t0)
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		return nil, fmt.Errorf("child %s: %w (output %q)", mode, err, out.String())
	}
	m["child_wall_ms"] = ms(wall)
	return m, nil
}

// medianOf runs a child mode k times (prepare before each) and returns the
// run whose key is the median, with the other runs' values of key listed.
func medianOf(k int, key string, prepare func() error, mode string, args ...string) (map[string]any, []float64, error) {
	var runs []map[string]any
	var vals []float64
	for range k {
		if prepare != nil {
			if err := prepare(); err != nil {
				return nil, nil, err
			}
		}
		m, err := child(mode, args...)
		if err != nil {
			return nil, nil, err
		}
		runs = append(runs, m)
		v, _ := m[key].(float64)
		vals = append(vals, v)
	}
	med := median(vals)
	best := runs[0]
	bd := math.Inf(1)
	for i, v := range vals {
		if d := math.Abs(v - med); d < bd {
			best, bd = runs[i], d
		}
	}
	return best, vals, nil
}

func run(sc scale, dataDir, profDir string, a childArgs, o runOpts) (*report, error) {
	dir, err := filepath.Abs(filepath.Join(dataDir, sc.name))
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if profDir != "" {
		if profDir, err = filepath.Abs(profDir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(profDir, 0o755); err != nil {
			return nil, err
		}
	}
	prof := func(name string) []string {
		if profDir == "" {
			return nil
		}
		return []string{"--cpuprofile", filepath.Join(profDir, sc.name+"-"+name+".pprof")}
	}
	probeNice = a.nice
	rep := newReport()
	rep.Set("scale", sc.name)
	rep.Set("date", time.Now().UTC().Format(time.RFC3339))
	rep.Set("cpus", runtime.NumCPU())
	rep.Set("loadavg_start", loadAvg())
	rep.Set("nice", a.nice)

	// Data: the synthetic CSV, generated once per scale and seed.
	variant := fmt.Sprintf("seed%d", a.seed)
	if a.intraday {
		variant += "-intraday"
		dir += "-intraday"
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	rep.Set("intraday", a.intraday)
	csv := filepath.Join(dir, "synth-"+variant+".csv")
	if _, err := os.Stat(csv); err != nil {
		logf("generating %s (%d series, %d rows)", csv, sc.series, sc.rows)
		t0 := time.Now()
		if _, err := synth.WriteFile(csv, synth.Options{Series: sc.series, Rows: sc.rows, Seed: a.seed, Intraday: a.intraday}); err != nil {
			return nil, fmt.Errorf("synth: %w", err)
		}
		logf("generated in %.1fs", time.Since(t0).Seconds())
	}
	rep.Set("csv_bytes", fileSize(csv))
	if o.genOnly {
		return rep, nil
	}
	logf("building the probe (this program without DuckDB)")
	if probeExe, err = buildProbe(filepath.Join(dataDir, "bin")); err != nil {
		return nil, err
	}
	home := filepath.Join(dir, "home")
	parquet := filepath.Join(dir, "synth-"+variant+".sorted.parquet")

	// Cook: ours, then DuckDB's, on the same CSV, one after the other.
	snapDir, err := currentSnapshot(home)
	if o.noCook && err == nil {
		logf("reusing %s", snapDir)
	} else {
		logf("cooking %s", csv)
		m, err := child("cook", append([]string{"--csv", csv, "--home", home}, prof("cook")...)...)
		if err != nil {
			return nil, err
		}
		delete(m, "snapshot")
		delete(m, "child_wall_ms")
		rep.Merge("", m)
		// RSS of a full read with the page cache as the cook's writes left
		// it (large folios from the write path; see BENCHMARKS.md).
		if sd, err := currentSnapshot(home); err == nil {
			if t, err := child("touch", "--snap", sd); err == nil {
				rep.Set("rss_touched_after_cook_mb", t["rss_touched_mb"])
				rep.Set("touch_after_cook_rss_data_arrow_mb", t["touch_rss_data_arrow_mb"])
			}
		}
		if snapDir, err = currentSnapshot(home); err != nil {
			return nil, err
		}
	}
	if !o.noDuck {
		_, haveParquet := os.Stat(parquet)
		if !o.noCook || haveParquet != nil {
			logf("DuckDB cook of %s", csv)
			out := filepath.Join(dir, "duckdb-cook.parquet")
			args := []string{"--csv", csv, "--out", out}
			if a.intraday {
				args = append(args, "--intraday")
			}
			m, err := child("duckcook", args...)
			if err != nil {
				return nil, err
			}
			if o.noCook {
				delete(m, "duckdb_cook_s")
			}
			delete(m, "child_wall_ms")
			rep.Merge("", m)
			if haveParquet != nil {
				if err := parquetFrom(out, parquet); err != nil {
					return nil, err
				}
			} else {
				os.Remove(out)
			}
		}
		rep.Set("parquet_bytes", fileSize(parquet))
	}

	// Compaction (issue "Liveness"): 1% of the series revised, folded into
	// a new snapshot, against the fresh cook of the same rows above.
	logf("compaction with %d%% of the series updated", compactPct)
	cm, err := child("compact", "--home", home, "--snap", snapDir, "--out", filepath.Join(dir, "compact-home"))
	if err != nil {
		return nil, err
	}
	delete(cm, "child_wall_ms")
	rep.Merge("", cm)
	if _, ok := rep.Get("cook_s"); ok {
		rep.Set("compact_vs_cook_ratio", rep.F("compact_s")/rep.F("cook_s"))
	}

	man, err := format.ReadManifest(snapDir)
	if err != nil {
		return nil, err
	}
	rep.Set("rows", man.Rows)
	rep.Set("series", man.Series)
	rep.Set("period_type", string(man.PeriodType))
	dataBytes := fileSize(filepath.Join(snapDir, format.DataFile))
	rep.Set("data_arrow_bytes", dataBytes)
	rep.Set("index_arrow_bytes", fileSize(filepath.Join(snapDir, format.IndexFile)))
	rep.Set("index_hash_bytes", fileSize(filepath.Join(snapDir, format.HashFile)))
	rep.Set("data_bytes_per_row", float64(dataBytes)/float64(man.Rows))

	files, err := regularFiles(snapDir)
	if err != nil {
		return nil, err
	}
	snapArrow := []string{filepath.Join(snapDir, format.DataFile), filepath.Join(snapDir, format.IndexFile)}
	warm := func() error { return warmCache(files...) }
	// settle puts the page cache in a defined state: the snapshot's pages
	// dropped, then read back sequentially (as after a reboot and one read
	// of the files). The kernel's folio sizes, and so how much one fault
	// maps, depend on how the pages got into the cache.
	settle := func() error {
		if _, err := dropCache(files...); err != nil {
			return err
		}
		return warm()
	}

	// A series id for the first lookup after open.
	qs, err := queriesFromSnapshot(snapDir, 1, a.seed)
	if err != nil {
		return nil, err
	}
	firstID := qs[0].ID

	// Open, warm: files in the page cache, fresh process each time.
	logf("open (warm) x%d", o.openRuns)
	if err := settle(); err != nil {
		return nil, err
	}
	m, vals, err := medianOf(o.openRuns, "open_ms", warm, "open", "--home", home, "--id", firstID)
	if err != nil {
		return nil, err
	}
	rep.Set("open_warm_ms", m["open_ms"])
	rep.Set("open_warm_runs_ms", roundAll(vals))
	// The whole child as the parent sees it: exec, Go runtime and package
	// init, open, one lookup, JSON, exit (what a one-shot `es get` pays).
	rep.Set("open_process_wall_ms", m["child_wall_ms"])
	for _, k := range []string{"rss_baseline_mb", "rss_open_mb", "rss_open_anon_mb", "rss_open_file_mb", "open_minor_faults", "open_first_get_us", "rss_first_get_mb", "first_get_minor_faults",
		"rss_open_data_arrow_mb", "rss_open_index_arrow_mb", "rss_open_index_hash_mb", "rss_open_pmd_mapped_mb",
		"rss_first_get_data_arrow_mb", "rss_first_get_index_arrow_mb", "rss_first_get_index_hash_mb", "rss_first_get_pmd_mapped_mb"} {
		rep.Set(k, m[k])
	}
	if m, err = child("open", "--home", home, "--reopen", "20"); err != nil {
		return nil, err
	}
	rep.Set("reopen_ms", m["reopen_ms"]) // median of 20 opens in one process after the first

	// Open, cold: every snapshot file dropped from the page cache first.
	logf("open (cold) x%d", o.coldRuns)
	var still float64
	drop := func() error {
		var err error
		still, err = dropCache(files...)
		return err
	}
	m, vals, err = medianOf(o.coldRuns, "open_ms", drop, "open", "--home", home, "--id", firstID)
	if err != nil {
		return nil, err
	}
	rep.Set("open_cold_ms", m["open_ms"])
	rep.Set("open_cold_runs_ms", roundAll(vals))
	rep.Set("open_cold_first_get_us", m["open_first_get_us"])
	rep.Set("open_cold_major_faults", m["open_major_faults"])
	rep.Set("open_cold_first_get_major_faults", m["first_get_major_faults"])
	rep.Set("open_cold_first_get_minor_faults", m["first_get_minor_faults"])
	rep.Set("cold_still_cached_pct", still)

	// RSS after reading every series once.
	logf("touch every series")
	if err := settle(); err != nil {
		return nil, err
	}
	m, err = child("touch", "--snap", snapDir)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"rss_touched_mb", "rss_touched_anon_mb", "rss_touched_file_mb", "touch_rss_data_arrow_mb", "touch_rss_index_arrow_mb", "touch_rss_index_hash_mb", "touch_s", "touch_points"} {
		rep.Set(k, m[k])
	}

	// Lookups.
	logf("get x%d", a.n)
	if err := settle(); err != nil {
		return nil, err
	}
	m, err = child("get", append([]string{"--home", home, "--snap", snapDir, "--gets", strconv.Itoa(a.n), "--seed", fmt.Sprint(a.seed)}, prof("get")...)...)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"get_p50_us", "get_p99_us", "get_p90_us", "get_p999_us", "get_max_us", "get_mean_untimed_us",
		"get_first_p50_us", "get_first_p99_us", "get_noread_p50_us", "get_noread_p99_us", "get_points_per_query", "get_allocs_per_query", "get_bytes_per_query", "get_touch_all_s", "get_queries"} {
		rep.Set(k, m[k])
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if strings.HasPrefix(k, "get_p50_us_") || strings.HasPrefix(k, "get_p99_us_") || strings.HasPrefix(k, "get_share_") {
			rep.Set(k, m[k])
		}
	}

	// Resident path: warm, then cold. It times as many lookups as the get
	// child (until 2026-12-01 it timed 20,000 against the get child's
	// 200,000: a tenth of the series, whose lines its second pass found
	// in the CPU's caches more often; BENCHMARKS.md "The resident path's
	// lookups").
	logf("resident path x%d", o.residentRuns)
	m, vals, err = medianOf(o.residentRuns, "resident_open_ms", warm, "resident", "--snap", snapDir, "--gets", strconv.Itoa(a.n), "--seed", fmt.Sprint(a.seed))
	if err != nil {
		return nil, err
	}
	rep.Set("resident_open_ms", m["resident_open_ms"])
	rep.Set("resident_open_runs_ms", roundAll(vals))
	for _, k := range []string{"resident_rss_mb", "resident_heap_inuse_mb", "resident_get_p50_us", "resident_get_p99_us"} {
		rep.Set(k, m[k])
	}
	if err := func() error { _, err := dropCache(snapArrow...); return err }(); err != nil {
		return nil, err
	}
	m, err = child("resident", "--snap", snapDir)
	if err != nil {
		return nil, err
	}
	rep.Set("resident_open_cold_ms", m["resident_open_ms"])

	// The store and the resident path in one process, alternating blocks
	// of queries (childPair): the lookup ratio that the machine's load
	// does not move.
	logf("store and resident path in one process")
	if m, err = child("pair", "--home", home, "--snap", snapDir, "--gets", "100000", "--seed", fmt.Sprint(a.seed)); err != nil {
		return nil, err
	}
	for _, k := range []string{"pair_get_p50_us", "pair_get_p99_us", "pair_resident_p50_us", "pair_resident_p99_us", "pair_get_vs_resident_p50_x"} {
		rep.Set(k, m[k])
	}

	// DuckDB queries.
	if !o.noDuck {
		logf("DuckDB queries: %d on the table, %d on Parquet", a.nTable, a.nParq)
		m, err = child("duckq", "--snap", snapDir, "--parquet", parquet, "--seed", fmt.Sprint(a.seed), "--intraday="+strconv.FormatBool(a.intraday),
			"--duck-table-queries", strconv.Itoa(a.nTable), "--duck-parquet-queries", strconv.Itoa(a.nParq))
		if err != nil {
			return nil, err
		}
		delete(m, "child_wall_ms")
		rep.Merge("", m)
	}

	rep.Set("loadavg_end", loadAvg())

	// Derived ratios.
	rep.Set("lookup_vs_duckdb_table_x", rep.F("duckdb_table_p50_us")/rep.F("get_p50_us"))
	rep.Set("lookup_vs_duckdb_parquet_x", rep.F("duckdb_parquet_p50_us")/rep.F("get_p50_us"))
	rep.Set("open_vs_resident_x", rep.F("resident_open_ms")/rep.F("open_warm_ms"))
	rep.Set("open_cold_vs_resident_cold_x", rep.F("resident_open_cold_ms")/rep.F("open_cold_ms"))
	rep.Set("cook_vs_duckdb_ratio", rep.F("cook_s")/rep.F("duckdb_cook_s"))
	var pass, miss []string
	for _, t := range targets {
		v, ok := rep.Get(t.key)
		if !ok {
			continue
		}
		if t.ok(sc, v) {
			pass = append(pass, t.key)
		} else {
			miss = append(miss, t.key)
		}
	}
	rep.Set("targets_met", pass)
	rep.Set("targets_missed", miss)
	return rep, nil
}

func roundAll(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = round(x)
	}
	return out
}
