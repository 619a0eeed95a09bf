package main

import (
	"fmt"
	"time"

	"github.com/energyscope/energyscope/internal/synth"
)

func runGen(e *env, args []string) error {
	var o synth.Options
	var out string
	fs := newFlags(e, "gen", nil)
	fs.IntVar(&o.Series, "series", 2000, "number of series")
	fs.Int64Var(&o.Rows, "rows", 150_000, "total number of rows")
	fs.Uint64Var(&o.Seed, "seed", 1, "random seed (same seed, same bytes)")
	fs.BoolVar(&o.Intraday, "intraday", false, "include hourly series")
	fs.StringVar(&out, "out", "", "output file, .csv or .parquet (required)")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if out == "" {
		return usagef("--out FILE is required")
	}
	if o.Series <= 0 || o.Rows < int64(o.Series) {
		return usagef("need --series > 0 and --rows >= --series")
	}
	start := time.Now()
	st, err := synth.WriteFile(out, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "wrote %s: %d rows, %d series in %.2fs\n", out, st.Rows, st.Series, time.Since(start).Seconds())
	return nil
}
