// Command fullcook cooks the full-scale synthetic dataset (2.82M series,
// 136M rows, seed 1: the bench's "full" scale) straight from
// internal/synth into HOME/datasets/bench, without the ~19 GB CSV, for the
// probe children (BENCHMARKS.md, "The id in the record"):
//
//	cd bench && go run ./fullcook HOME [VERSION [pet]]
//
// VERSION is the format version to write (default or 0: the current one);
// "pet" cooks the pet scale instead (175K series, 13.8M rows, seed 1: the
// rows of the pet bench's CSV, without it).
// Needs ~8 GB of memory and ~3 GB of disk (36-60 s on the 2-core machine).
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/energyscope/energyscope/internal/synth"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fullcook:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) < 2 || len(os.Args) > 4 || (len(os.Args) == 4 && os.Args[3] != "pet") {
		return fmt.Errorf("usage: fullcook HOME [VERSION [pet]]")
	}
	home, version := os.Args[1], 0
	if len(os.Args) >= 3 {
		v, err := strconv.Atoi(os.Args[2])
		if err != nil {
			return err
		}
		version = v
	}
	series, rows := 2_820_000, int64(136_000_000)
	if len(os.Args) == 4 {
		series, rows = 175_000, 13_800_000
	}
	t0 := time.Now()
	tb := &format.Table{SeriesIdx: make([]uint32, 0, rows), Period: make([]int64, 0, rows), Value: make([]float64, 0, rows)}
	_, err := synth.Each(synth.Options{Series: series, Rows: rows, Seed: 1}, func(s synth.SeriesSpec, p []int64, vals []float64) error {
		i := uint32(len(tb.Series))
		tb.Series = append(tb.Series, format.SeriesMeta{ID: s.ID, Name: s.Name, Unit: s.Unit, Source: s.Source, Frequency: format.Frequency(s.Frequency)})
		for j := range p {
			tb.Append(i, p[j], vals[j])
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "generated %d rows in %v\n", tb.Len(), time.Since(t0).Round(time.Millisecond))
	ds := filepath.Join(home, localcache.DatasetsDir, "bench")
	tmp, err := format.TempSnapshotDir(ds)
	if err != nil {
		return err
	}
	m, _, err := format.Write(tmp, tb, format.WriteOptions{Dataset: "bench", Epoch: 1, Version: version, Created: time.Unix(1, 0)})
	if err != nil {
		return err
	}
	if _, err := format.Publish(ds, tmp, m); err != nil {
		return err
	}
	fmt.Printf("%s\n", filepath.Join(ds, format.SnapshotsDir, m.SnapshotID))
	fmt.Fprintf(os.Stderr, "cooked %s (format version %d) in %v\n", m.SnapshotID, m.Version, time.Since(t0).Round(time.Millisecond))
	return nil
}
