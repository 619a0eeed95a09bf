//go:build !probe

package main

import "github.com/energyscope/energyscope/localcache/format"

func init() {
	heavyModes["cook"] = childCook
	heavyModes["compact"] = childCompact
	heavyModes["duckcook"] = childDuckCook
	heavyModes["duckq"] = childDuckQ
}

func childCook(a childArgs) (map[string]any, error) {
	r, err := cookCSV(a.csv, a.home)
	if err != nil {
		return nil, err
	}
	ps := procStatus()
	return map[string]any{
		"cook_s":           r.Total.Seconds(),
		"cook_read_s":      r.Read.Seconds(),
		"cook_write_s":     r.Write.Seconds(),
		"cook_publish_s":   r.Publish.Seconds(),
		"cook_peak_rss_mb": ps["VmHWM"],
		"rows":             r.Manifest.Rows,
		"series":           r.Manifest.Series,
		"batches":          r.Manifest.Batches,
		"duplicates":       r.Manifest.Duplicates,
		"period_type":      string(r.Manifest.PeriodType),
		"snapshot":         r.SnapDir,
	}, nil
}

func childDuckCook(a childArgs) (map[string]any, error) {
	d, err := duckCook(a.csv, a.out, a.intraday)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"duckdb_cook_s":           d.Seconds(),
		"duckdb_cook_peak_rss_mb": procStatus()["VmHWM"],
		"duckdb_cook_threads":     duckThreads,
	}, nil
}

func childDuckQ(a childArgs) (map[string]any, error) {
	n := max(a.nTable, a.nParq)
	qs, err := queriesFromSnapshot(a.snap, n, a.seed)
	if err != nil {
		return nil, err
	}
	m, err := format.ReadManifest(a.snap)
	if err != nil {
		return nil, err
	}
	return duckQueries(a.parquet, qs, a.nTable, a.nParq, m.PeriodType == format.PeriodTimestamp)
}
