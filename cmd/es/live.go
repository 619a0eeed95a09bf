package main

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server/cook"
)

func openWritable(home string, keep int) (*localcache.Store, error) {
	if _, err := os.Stat(home); err != nil {
		return nil, fmt.Errorf("home %s: %w", home, err)
	}
	return localcache.Open(home, &localcache.Options{Keep: keep, CompactRows: -1, CompactBytes: -1})
}

func runPut(e *env, args []string) error {
	var home, dataset, seriesCol, periodCol, valueCol string
	var del bool
	fs := newFlags(e, "put", &home)
	fs.StringVar(&dataset, "dataset", "", "dataset to update (required)")
	fs.BoolVar(&del, "delete", false, "delete the (series, period) points listed in FILE instead of upserting")
	fs.StringVar(&seriesCol, "series-col", "series_id", "column holding the series id")
	fs.StringVar(&periodCol, "period-col", "period", "column holding the period")
	fs.StringVar(&valueCol, "value-col", "value", "column holding the value (not needed with --delete)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if dataset == "" || len(pos) != 1 {
		return usagef("want --dataset NAME and one FILE (- for stdin)")
	}
	var r io.Reader = os.Stdin
	name := "stdin"
	if pos[0] != "-" {
		f, err := os.Open(pos[0])
		if err != nil {
			return err
		}
		defer f.Close()
		r, name = f, pos[0]
	}
	st, err := openWritable(home, 0)
	if err != nil {
		return err
	}
	defer st.Close()
	last, err := st.LastSeq(dataset)
	if err != nil {
		return err
	}
	batch, err := readPutCSV(r, name, seriesCol, periodCol, valueCol, del, last)
	if err != nil {
		return err
	}
	n, err := st.Apply(dataset, batch)
	if err != nil {
		return err
	}
	op := "upserted"
	if del {
		op = "deleted"
	}
	fmt.Fprintf(e.stdout, "%s %d rows in %s, seq %d..%d (durable)\n", op, n, dataset, last+1, last+uint64(n))
	return nil
}

// readPutCSV reads update rows; seqs continue after last. Any bad line
// fails the whole file (nothing is applied).
func readPutCSV(r io.Reader, name, seriesCol, periodCol, valueCol string, del bool, last uint64) ([]delta.Record, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: no header: %w", name, err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[strings.TrimPrefix(strings.TrimSpace(h), "\ufeff")] = i
	}
	need := func(c string) (int, error) {
		i, ok := col[c]
		if !ok {
			return 0, fmt.Errorf("%s: no column %q (have %s)", name, c, strings.Join(head, ", "))
		}
		return i, nil
	}
	si, err := need(seriesCol)
	if err != nil {
		return nil, err
	}
	pi, err := need(periodCol)
	if err != nil {
		return nil, err
	}
	vi := -1
	if !del {
		if vi, err = need(valueCol); err != nil {
			return nil, err
		}
	}
	metaCol := func(c string) int {
		if i, ok := col[c]; ok {
			return i
		}
		return -1
	}
	ui, ni, sri, fi := metaCol("unit"), metaCol("name"), metaCol("source"), metaCol("frequency")
	cell := func(rec []string, i int) string {
		if i < 0 || i >= len(rec) {
			return ""
		}
		return strings.TrimSpace(rec[i])
	}
	var out []delta.Record
	seen := map[string]bool{}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line, _ := cr.FieldPos(0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%s:%d: %s", name, line, fmt.Sprintf(format, args...))
		}
		id := cell(rec, si)
		if id == "" {
			return nil, bad("empty series id")
		}
		p, err := cook.ParsePeriod(cell(rec, pi))
		if err != nil {
			return nil, bad("period: %v", err)
		}
		r := delta.Record{Seq: last + uint64(len(out)) + 1, Op: delta.Upsert, SeriesID: id, Period: p}
		if del {
			r.Op = delta.Delete
		} else {
			v, err := strconv.ParseFloat(cell(rec, vi), 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, bad("value %q is not a finite number", cell(rec, vi))
			}
			r.Value = v
		}
		if !seen[id] {
			seen[id] = true
			m := delta.Meta{Unit: cell(rec, ui), Name: cell(rec, ni), Source: cell(rec, sri)}
			if f := cell(rec, fi); f != "" {
				ff, err := format.ParseFrequency(f)
				if err != nil {
					return nil, bad("%v", err)
				}
				m.Frequency = ff
			}
			if m != (delta.Meta{}) {
				r.Meta = &m
			}
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no rows", name)
	}
	return out, nil
}

func runCompact(e *env, args []string) error {
	var home, dataset string
	fs := newFlags(e, "compact", &home)
	fs.StringVar(&dataset, "dataset", "", "compact only this dataset (default: all)")
	keep := fs.Int("keep", 2, "snapshots to keep per dataset, the one in service included")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	st, err := openWritable(home, *keep)
	if err != nil {
		return err
	}
	defer st.Close()
	names := st.DatasetNames()
	if dataset != "" {
		names = []string{dataset}
	}
	for _, n := range names {
		before, _ := st.LastSeq(n)
		m, err := st.Compact(n)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s: snapshot %s covers seq %d (%d rows, %d series)\n", n, m.SnapshotID, before, m.Rows, m.Series)
	}
	return nil
}
