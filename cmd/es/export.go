package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/energyscope/energyscope/functions"
	"github.com/energyscope/energyscope/functions/xlsx"
	"github.com/energyscope/energyscope/internal/wiring"
	"github.com/energyscope/energyscope/localcache"
)

func runExport(e *env, args []string) error {
	var home string
	var req xlsx.Request
	fs := newFlags(e, "export", &home)
	out := fs.String("out", "", "workbook to write, FILE.xlsx (required; replaced atomically)")
	fs.StringVar(&req.From, "from", "", "first date, any ES.Get form: 2020, 2020-03, 2020-03-15, 2020-Q1, -1Y, ytd (default: the first point)")
	fs.StringVar(&req.To, "to", "", "last date, inclusive; a year, month or day covers all of it (default: the last point)")
	fs.StringVar(&req.Per, "per", "", "re-sample to D, W, M, Q or A (default: as stored)")
	fs.StringVar(&req.Agg, "agg", "", "how a re-sampled period becomes one value: last, first, avg, sum, min or max (with --per; default last)")
	fs.StringVar(&req.Fill, "fill", "", "a date without a value: none (empty cell), prev (the previous value, from before --from if need be), na (#N/A) or zero (default none)")
	fs.BoolVar(&req.Formulas, "formulas", false, "write a live =ES.Get formula (needs the EnergyScope add-in in Excel) instead of a table of values")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	req.Series = pos
	if *out == "" {
		return usagef("--out FILE.xlsx is required")
	}
	if len(pos) == 0 {
		return usagef("want at least one SERIES")
	}
	// The dates as es get and ES.Get read them: a bad one is a usage error, a
	// reversed range a failure (exit 1).
	if _, _, err := parseRange(e, req.From, req.To, "from", "to"); err != nil {
		return err
	}
	req.Now = e.clock
	st, err := openStore(home)
	if err != nil {
		return err
	}
	defer st.Close()
	// Ids as es get reads them: one that differs only by case is that series;
	// the unknown ones are named in one message, each with the ids near it.
	var unknown []string
	for i, id := range req.Series {
		if _, err := st.Info(id); !errors.Is(err, localcache.ErrNotFound) {
			continue
		}
		ref, near := functions.Resolve(wiring.Source{Store: st}, id)
		if ref == "" {
			u := fmt.Sprintf("%q", id)
			if len(near) > 0 {
				u += " (did you mean " + strings.Join(near, ", ") + "?)"
			}
			unknown = append(unknown, u)
			continue
		}
		req.Series[i] = ref
	}
	if len(unknown) > 0 {
		return fmt.Errorf("unknown series %s", strings.Join(unknown, ", "))
	}
	req.Provenance = func(id string) (string, uint64) {
		in, err := st.Info(id)
		if err != nil {
			return "", 0
		}
		return in.SnapshotID, in.Seq
	}

	start := time.Now()
	var bar *progress
	sum, err := xlsx.ExportFile(*out, wiring.Source{Store: st}, req, func(done, total int) {
		if bar == nil {
			bar = newProgress(e.stderr, "export", int64(total))
		}
		bar.set(int64(done))
	})
	if bar != nil {
		bar.finish()
	}
	if errors.Is(err, xlsx.ErrRequest) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	layout := "2006-01-02"
	if sum.First%86400 != 0 || sum.Last%86400 != 0 {
		layout = "2006-01-02 15:04"
	}
	mode := "values"
	if req.Formulas {
		mode = "formulas"
	}
	fmt.Fprintf(e.stdout, "exported %d series x %d dates (%s .. %s, %s) to %s: %d bytes in %.2fs\n",
		sum.Series, sum.Rows, time.Unix(sum.First, 0).UTC().Format(layout), time.Unix(sum.Last, 0).UTC().Format(layout),
		mode, sum.Path, sum.Bytes, time.Since(start).Seconds())
	return nil
}
