package main

import (
	"fmt"
	"io"
	"os"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/server"
)

func openWritable(home string, keep int) (*localcache.Store, error) {
	if _, err := os.Stat(home); err != nil {
		return nil, fmt.Errorf("home %s: %w", home, err)
	}
	return localcache.Open(home, withLake(home, &localcache.Options{Keep: keep, CompactRows: -1, CompactBytes: -1}, nil, os.Stderr))
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
	batch, err := server.ParseRowsCSV(r, name, server.RowColumns{Series: seriesCol, Period: periodCol, Value: valueCol}, del)
	if err != nil {
		return err
	}
	for i := range batch {
		batch[i].Seq = last + uint64(i) + 1
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
