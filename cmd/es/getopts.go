package main

import (
	"bufio"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/energyscope/energyscope/functions"
	"github.com/energyscope/energyscope/internal/wiring"
	"github.com/energyscope/energyscope/localcache"
)

// splitOptionArgs separates ES.Get's key=value options from the positional
// arguments of es get, as ES.Get does: an argument holding '=' is options.
func splitOptionArgs(pos []string) (plain, opts []string) {
	for _, a := range pos {
		if strings.Contains(a, "=") {
			opts = append(opts, a)
		} else {
			plain = append(plain, a)
		}
	}
	return plain, opts
}

// getFrame is es get with ES.Get's options, or with several series
// ("MSFT,IBM"): the rows ES.Get would give, through the same code
// (functions.Engine.Frame), as CSV: period, then a column per series
// ("value" for one). Of the layout options only order= applies; the CSV
// always has its header row and period column.
func getFrame(e *env, st *localcache.Store, series, dataset string, from, to int64, optArgs []string) error {
	args := make([]any, len(optArgs))
	for i, a := range optArgs {
		args[i] = a
	}
	opts, err := functions.ParseOptions(args)
	if err != nil {
		return usageError{err}
	}
	var ids []string
	for id := range strings.SplitSeq(series, ",") {
		if id = strings.TrimSpace(id); id != "" {
			if dataset != "" {
				id = dataset + ":" + id
			}
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return usagef("want SERIES")
	}
	eng := &functions.Engine{Src: wiring.Source{Store: st}, Now: e.clock}
	f, err := eng.Frame(ids, from, to, opts)
	if err != nil {
		return err
	}
	intraday := slices.ContainsFunc(f.Dates, func(t int64) bool { return t%86400 != 0 })
	var lines [][]byte
	err = f.Rows(func(_ int, date int64, row []float64) error {
		b := append([]byte(nil), formatPeriod(date, intraday)...)
		for _, x := range row {
			b = append(b, ',')
			if !math.IsNaN(x) && !math.IsInf(x, 0) {
				b = strconv.AppendFloat(b, x, 'g', -1, 64)
			}
		}
		lines = append(lines, append(b, '\n'))
		return nil
	})
	if err != nil {
		return err
	}
	if opts.Desc {
		slices.Reverse(lines)
	}
	w := bufio.NewWriterSize(e.stdout, 64<<10)
	w.WriteString("period")
	if len(ids) == 1 {
		w.WriteString(",value")
	} else {
		for _, id := range ids {
			w.WriteString("," + csvField(id))
		}
	}
	w.WriteString("\n")
	for _, l := range lines {
		w.Write(l)
	}
	return w.Flush()
}

// csvField quotes s for CSV if it needs it.
func csvField(s string) string {
	if !strings.ContainsAny(s, ",\"\n\r") {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
