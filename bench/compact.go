//go:build !probe

package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// compactPct is the share of series the compaction benchmark updates.
const compactPct = 1

// childCompact measures the liveness issue's compaction figure on the
// snapshot the cook just wrote: a copy of the bench home (hard links: the
// snapshot files are immutable) gets two revisions in 1% of its series
// (every 100th: the latest point and the first), applied through the
// store's write-ahead log, then Store.Compact folds them into a new
// snapshot. The parent sets its time beside the fresh cook's (cook_s) of
// the same rows, measured in the same run.
func childCompact(a childArgs) (map[string]any, error) {
	home := a.out
	if err := os.RemoveAll(home); err != nil {
		return nil, err
	}
	if err := linkTree(filepath.Join(a.home, localcache.DatasetsDir), filepath.Join(home, localcache.DatasetsDir)); err != nil {
		return nil, err
	}
	defer os.RemoveAll(home)

	sn, err := snapshot.Open(a.snap)
	if err != nil {
		return nil, err
	}
	var recs []format.Record
	var seq uint64
	for row := uint32(0); row < uint32(sn.NumSeries()); row += 100 / compactPct {
		in := sn.Info(row)
		if in.Count == 0 {
			continue
		}
		seq++
		recs = append(recs, format.Record{Seq: seq, Op: format.Upsert, SeriesID: in.ID, Period: in.Last, Value: in.LatestValue + 1})
		seq++
		recs = append(recs, format.Record{Seq: seq, Op: format.Upsert, SeriesID: in.ID, Period: in.First, Value: -1})
	}
	updated := len(recs) / 2
	sn.Close()

	st, err := localcache.Open(home, &localcache.Options{CompactRows: -1, CompactBytes: -1})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	for len(recs) > 0 {
		n := min(len(recs), 1000)
		if _, err := st.Apply(benchDataset, recs[:n]); err != nil {
			return nil, err
		}
		recs = recs[n:]
	}
	var ru0, ru1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	t0 := time.Now()
	m, err := st.Compact(benchDataset)
	if err != nil {
		return nil, err
	}
	wall := time.Since(t0)
	unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	return map[string]any{
		"compact_s":              wall.Seconds(),
		"compact_cpu_s":          cpu.Seconds(),
		"compact_series_updated": updated,
		"compact_rows":           m.Rows,
		"compact_peak_rss_mb":    procStatus()["VmHWM"],
	}, nil
}

// linkTree recreates the directory tree src at dst with every regular file
// hard-linked.
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		return os.Link(p, to)
	})
}
