package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// Child modes: the parent re-executes this binary with --child MODE so that
// open times and RSS are those of a fresh process. A child prints one JSON
// object on stdout; progress goes to stderr.

// heavyModes are the children that need the cook or DuckDB; they are
// registered by child_heavy.go, which the probe build leaves out.
var heavyModes = map[string]func(childArgs) (map[string]any, error){}

// childFlags declares the (hidden) flags of the child modes.
func childFlags(fs *flag.FlagSet, a *childArgs) {
	fs.StringVar(&a.mode, "child", "", "")
	fs.StringVar(&a.home, "home", "", "")
	fs.StringVar(&a.snap, "snap", "", "")
	fs.StringVar(&a.home2, "home2", "", "")
	fs.StringVar(&a.snap2, "snap2", "", "")
	fs.StringVar(&a.csv, "csv", "", "")
	fs.StringVar(&a.out, "out", "", "")
	fs.StringVar(&a.parquet, "parquet", "", "")
	fs.StringVar(&a.id, "id", "", "")
	fs.StringVar(&a.profile, "cpuprofile", "", "")
	fs.IntVar(&a.reopen, "reopen", 0, "")
	fs.IntVar(&a.nice, "nice", 0, "niceness of the measuring children (open, touch, get, resident), e.g. -10 on a shared machine (needs root)")
	fs.Uint64Var(&a.seed, "seed", 1, "seed of the synthetic data and of the queries")
	fs.BoolVar(&a.intraday, "intraday", false, "generate with hourly series (5%); the snapshot then stores timestamp periods")
	fs.BoolVar(&a.mapped, "mapped-index", false, "children get, open and touch: keep lookups on index.hash's mapping (localcache.Options.MappedIndex)")
	fs.BoolVar(&a.warm, "warm", false, "children get, open and touch: open snapshots with the page-cache warm-up (localcache.Options.WarmSnapshots)")
	fs.IntVar(&a.n, "gets", 200_000, "random lookups timed for get_p50/p99")
	fs.IntVar(&a.nTable, "duck-table-queries", 2000, "queries timed against the DuckDB table")
	fs.IntVar(&a.nParq, "duck-parquet-queries", 200, "queries timed against DuckDB over Parquet")
	fs.StringVar(&a.engine, "engine", "store", "")
	fs.IntVar(&a.cgPasses, "cg-passes", 1, "")
}

type childArgs struct {
	mode     string
	home     string // bench home (localcache root)
	snap     string // snapshot directory
	home2    string // child ab: the second home
	snap2    string // child ab: its snapshot directory
	csv      string
	out      string
	parquet  string
	id       string // a series id for the first lookup after open
	n        int
	nTable   int
	nParq    int
	seed     uint64
	profile  string // write a CPU profile here
	intraday bool
	warm     bool // children get, open, touch: snapshots opened with the page-cache warm-up
	mapped   bool // children get, open, touch: no copy of index.hash (localcache.Options.MappedIndex)
	reopen   int
	nice     int
	engine   string // child cg: store or resident
	cgPasses int
}

func runChild(a childArgs) error {
	var out map[string]any
	var err error
	if a.nice != 0 {
		if err := unix.Setpriority(unix.PRIO_PROCESS, 0, a.nice); err != nil {
			return fmt.Errorf("setpriority %d: %w", a.nice, err)
		}
	}
	stopProf := func() {}
	if a.profile != "" {
		f, err := os.Create(a.profile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		stopProf = func() { pprof.StopCPUProfile(); f.Close() }
	}
	switch a.mode {
	case "open":
		out, err = childOpen(a)
	case "touch":
		out, err = childTouch(a)
	case "get":
		out, err = childGet(a)
	case "resident":
		out, err = childResident(a)
	case "cg":
		out, err = childCG(a)
	case "pair":
		out, err = childPair(a)
	case "ab":
		out, err = childAB(a)
	default:
		if f := heavyModes[a.mode]; f != nil {
			out, err = f(a)
		} else {
			err = fmt.Errorf("child mode %q is not in this build", a.mode)
		}
	}
	stopProf()
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// childOpen: localcache.Open of the home (read-only, as a second process on
// a home would), RSS right after, then the first lookup, then re-opens in
// the same process.
func childOpen(a childArgs) (map[string]any, error) {
	var r localcache.Result
	defer r.Release()
	base := procStatus()
	var ru0, ru1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	t0 := time.Now()
	st, err := localcache.Open(a.home, &localcache.Options{ReadOnly: true, WarmSnapshots: a.warm, MappedIndex: a.mapped})
	open := time.Since(t0)
	if err != nil {
		return nil, err
	}
	unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	ps := procStatus()
	maps := mappedRSS()
	out := map[string]any{
		"open_ms":           ms(open),
		"rss_baseline_mb":   base["VmRSS"],
		"rss_open_mb":       ps["VmRSS"],
		"rss_open_anon_mb":  ps["RssAnon"],
		"rss_open_file_mb":  ps["RssFile"],
		"open_minor_faults": ru1.Minflt - ru0.Minflt,
		"open_major_faults": ru1.Majflt - ru0.Majflt,
		// Resident bytes of each snapshot file's mapping, and how much of
		// all file mappings is mapped by 2 MiB page-table entries (whole
		// large folios of the page cache).
		"rss_open_data_arrow_mb":  maps[format.DataFile],
		"rss_open_index_arrow_mb": maps[format.IndexFile],
		"rss_open_index_hash_mb":  maps[format.HashFile],
		"rss_open_pmd_mapped_mb":  maps[pmdMapped],
	}
	if a.id != "" {
		unix.Getrusage(unix.RUSAGE_SELF, &ru0)
		t1 := time.Now()
		err := st.GetInto(a.id, snapshot.MinTime, snapshot.MaxTime, &r)
		if err != nil {
			return nil, err
		}
		s := sumValues(r.Points.Values)
		r.Release()
		out["open_first_get_us"] = us(time.Since(t1))
		unix.Getrusage(unix.RUSAGE_SELF, &ru1)
		out["rss_first_get_mb"] = rssMB()
		// The page faults of the first lookup: a major fault is a read
		// from the disk the lookup waits for (cold open), a minor one a
		// page-cache page mapped in.
		out["first_get_minor_faults"] = ru1.Minflt - ru0.Minflt
		out["first_get_major_faults"] = ru1.Majflt - ru0.Majflt
		maps := mappedRSS()
		out["rss_first_get_data_arrow_mb"] = maps[format.DataFile]
		out["rss_first_get_index_arrow_mb"] = maps[format.IndexFile]
		out["rss_first_get_index_hash_mb"] = maps[format.HashFile]
		out["rss_first_get_pmd_mapped_mb"] = maps[pmdMapped]
		_ = s
	}
	// How long after open lookups move to index.hash's copy (a large
	// index.hash; none under 64 MiB or with --mapped-index), polled.
	for deadline := t0.Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		ds, err := st.Status()
		if err != nil || len(ds) == 0 || ds[0].Index == snapshot.IndexMapped {
			break
		}
		if ds[0].Index == snapshot.IndexCopied {
			out["open_index_copied_ms"] = ms(time.Since(t0))
			out["rss_index_copied_mb"] = rssMB()
			break
		}
	}
	st.Close()
	var re []float64
	for range a.reopen {
		t := time.Now()
		st, err := localcache.Open(a.home, &localcache.Options{ReadOnly: true, MappedIndex: a.mapped})
		d := time.Since(t)
		if err != nil {
			return nil, err
		}
		st.Close()
		re = append(re, ms(d))
	}
	if len(re) > 0 {
		out["reopen_ms"] = median(re)
	}
	return out, nil
}

// childTouch: open the snapshot and read every series' full value range
// once (hash lookup of its id, slice, sum of the values), then RSS, in
// total and per mapped file.
func childTouch(a childArgs) (map[string]any, error) {
	base := rssMB()
	s, err := snapshot.OpenOptions(a.snap, snapshot.Options{Warm: a.warm, HugeIndex: !a.mapped})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	open := rssMB()
	t0 := time.Now()
	var sum float64
	var points int64
	for row := range uint32(s.NumSeries()) {
		r, ok := s.Lookup(s.SeriesID(row))
		if !ok || r != row {
			return nil, fmt.Errorf("series row %d does not resolve", row)
		}
		p, err := s.Get(r, snapshot.MinTime, snapshot.MaxTime)
		if err != nil {
			return nil, err
		}
		sum += sumValues(p.Values)
		points += int64(p.Len())
	}
	el := time.Since(t0)
	ps := procStatus()
	maps := mappedRSS()
	return map[string]any{
		"touch_rss_baseline_mb":    base,
		"touch_rss_open_mb":        open,
		"rss_touched_mb":           ps["VmRSS"],
		"rss_touched_anon_mb":      ps["RssAnon"],
		"rss_touched_file_mb":      ps["RssFile"],
		"touch_s":                  el.Seconds(),
		"touch_points":             points,
		"touch_checksum":           sum,
		"touch_rss_data_arrow_mb":  maps[format.DataFile],
		"touch_rss_index_arrow_mb": maps[format.IndexFile],
		"touch_rss_index_hash_mb":  maps[format.HashFile],
	}, nil
}

func sumPeriods(p snapshot.Points) float64 {
	var s int64
	for _, d := range p.Days {
		s += int64(d)
	}
	for _, d := range p.Secs {
		s += d
	}
	return float64(s)
}

// timeGets times each Store.Get + reading every point + Release
// individually with time.Now.
func timeGets(st *localcache.Store, qs []query, lat []time.Duration) (points int64, sum float64, err error) {
	// One Result for every lookup: GetInto writes it in place (BENCHMARKS.md
	// "Returning the Result").
	var r localcache.Result
	defer r.Release()
	for i := range qs {
		q := &qs[i]
		t0 := time.Now()
		err := st.GetInto(q.ID, q.From, q.To, &r)
		if err != nil {
			return 0, 0, err
		}
		sum += sumValues(r.Points.Values) + sumPeriods(r.Points)
		points += int64(r.Points.Len())
		r.Release()
		lat[i] = time.Since(t0)
	}
	return points, sum, nil
}

// untimedGets runs the queries back to back and returns the mean per call.
func untimedGets(st *localcache.Store, qs []query) (time.Duration, float64) {
	var r localcache.Result
	defer r.Release()
	var sum float64
	t0 := time.Now()
	for i := range qs {
		q := &qs[i]
		err := st.GetInto(q.ID, q.From, q.To, &r)
		if err != nil {
			continue
		}
		sum += sumValues(r.Points.Values) + sumPeriods(r.Points)
		r.Release()
	}
	return time.Since(t0) / time.Duration(len(qs)), sum
}

func latStats(out map[string]any, prefix string, lat []time.Duration) {
	s := slices.Clone(lat)
	slices.Sort(s)
	out[prefix+"p50_us"] = us(pct(s, 50))
	out[prefix+"p90_us"] = us(pct(s, 90))
	out[prefix+"p99_us"] = us(pct(s, 99))
	out[prefix+"p999_us"] = us(pct(s, 99.9))
	out[prefix+"max_us"] = us(s[len(s)-1])
}

// childGet: n random series + 1-year range lookups through localcache.Store
// (the server's and the bridge's path). Pass "first" runs in the fresh
// process (page cache warm, the process's mapping not yet faulted in);
// then every series is read once through the store and the same queries
// run again: the steady state of a server that has been up a while.
func childGet(a childArgs) (map[string]any, error) {
	var r localcache.Result
	defer r.Release()
	qs, err := queriesFromSnapshot(a.snap, a.n, a.seed)
	if err != nil {
		return nil, err
	}
	if len(qs) == 0 {
		return nil, fmt.Errorf("no queries")
	}
	// All ids, for the touch between the passes.
	s, err := snapshot.Open(a.snap)
	if err != nil {
		return nil, err
	}
	ids := make([]string, s.NumSeries())
	for r := range ids {
		ids[r] = string([]byte(s.SeriesID(uint32(r))))
	}
	s.Close()
	runtime.GC()

	st, err := localcache.Open(a.home, &localcache.Options{ReadOnly: true, WarmSnapshots: a.warm, MappedIndex: a.mapped})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	out := map[string]any{"get_queries": len(qs)}
	lat := make([]time.Duration, len(qs))

	points, _, err := timeGets(st, qs, lat)
	if err != nil {
		return nil, err
	}
	latStats(out, "get_first_", lat)
	out["get_points_per_query"] = float64(points) / float64(len(qs))

	t0 := time.Now()
	for _, id := range ids {
		err := st.GetInto(id, snapshot.MinTime, snapshot.MaxTime, &r)
		if err != nil {
			return nil, err
		}
		sumValues(r.Points.Values)
		r.Release()
	}
	out["get_touch_all_s"] = time.Since(t0).Seconds()
	// Whether the timed pass reads index.hash's copy in huge pages (the
	// store's default for a large one) or its mapping.
	if ds, err := st.Status(); err == nil && len(ds) > 0 {
		out["get_index"] = ds[0].Index.String()
	}

	var m0, m1 runtime.MemStats
	var ru0, ru1 unix.Rusage
	runtime.ReadMemStats(&m0)
	unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	if _, _, err := timeGets(st, qs, lat); err != nil {
		return nil, err
	}
	unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	runtime.ReadMemStats(&m1)
	// The timed pass's page faults: a major one is a disk read a lookup
	// waited for, a minor one a page-cache page mapped in.
	out["get_major_faults"] = ru1.Majflt - ru0.Majflt
	out["get_minor_faults"] = ru1.Minflt - ru0.Minflt
	out["get_anon_huge_mb"] = smapsRollup()["AnonHugePages"]
	out["get_allocs_per_query"] = float64(m1.Mallocs-m0.Mallocs) / float64(len(qs))
	out["get_bytes_per_query"] = float64(m1.TotalAlloc-m0.TotalAlloc) / float64(len(qs))
	latStats(out, "get_", lat)
	mean, _ := untimedGets(st, qs)
	out["get_mean_untimed_us"] = us(mean)

	// Per frequency: long (hourly) ranges cost more to read.
	byFreq := map[string][]time.Duration{}
	for i, q := range qs {
		byFreq[string(q.Freq)] = append(byFreq[string(q.Freq)], lat[i])
	}
	for f, l := range byFreq {
		slices.Sort(l)
		out["get_p50_us_"+f] = us(pct(l, 50))
		out["get_p99_us_"+f] = us(pct(l, 99))
		out["get_share_"+f] = float64(len(l)) / float64(len(qs))
	}

	// The same lookups without reading the points: hash + slice only.
	for i := range qs {
		q := &qs[i]
		t0 := time.Now()
		err := st.GetInto(q.ID, q.From, q.To, &r)
		if err != nil {
			return nil, err
		}
		r.Release()
		lat[i] = time.Since(t0)
	}
	latStats(out, "get_noread_", lat)
	return out, nil
}

// childResident: the copying read of data.arrow + index.arrow into a Go
// map, timed to ready, RSS after; then the same queries as childGet
// against it.
func childResident(a childArgs) (map[string]any, error) {
	base := rssMB()
	t0 := time.Now()
	res, err := loadResident(a.snap)
	if err != nil {
		return nil, err
	}
	ready := time.Since(t0)
	ps := procStatus()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	out := map[string]any{
		"resident_open_ms":         ms(ready),
		"resident_rss_baseline_mb": base,
		"resident_rss_mb":          ps["VmRSS"],
		"resident_heap_inuse_mb":   float64(m.HeapInuse) / (1 << 20),
		"resident_series":          len(res.idx),
	}
	if a.n > 0 {
		qs, err := queriesFromSnapshot(a.snap, a.n, a.seed)
		if err != nil {
			return nil, err
		}
		lat := make([]time.Duration, len(qs))
		var sum float64
		for pass := 0; pass < 2; pass++ {
			if pass == 1 {
				// Every series read once between the passes, as the get
				// child does (its touch of every id): until 2026-12-01 the
				// resident path's timed pass came right after a pass over
				// the same queries, the store's after a read of everything
				// (BENCHMARKS.md "The resident path's lookups").
				sum += res.readEvery()
			}
			for i := range qs {
				t := time.Now()
				s, _ := res.get(&qs[i])
				sum += s
				lat[i] = time.Since(t)
			}
		}
		latStats(out, "resident_get_", lat)
	}
	res.release()
	return out, nil
}
