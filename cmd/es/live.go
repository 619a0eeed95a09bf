package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/lake"
)

// serverHome reports whether es serve ran in home: its delta log's
// embedded node lives in HOME/nats, and the home's live records are in
// that log, not in the store's write-ahead log.
func serverHome(home string) bool {
	_, err := os.Stat(filepath.Join(home, server.NatsDir))
	return err == nil
}

// openServer opens a server home for a command-line write as es serve
// does (the store, the lake if the home has one, the embedded delta log's
// node in HOME/nats), without listening. close releases it all.
func openServer(home string, keep int) (srv *server.Server, close func(), err error) {
	o := server.Options{Home: home, Keep: keep, CompactRows: -1, CompactBytes: -1}
	var lk *lake.Lake
	if hasLake(home) {
		if lk, err = lake.Open(context.Background(), lake.DefaultOptions(home)); err != nil {
			return nil, nil, err
		}
		o.Lake = lk
	}
	srv, err = server.New(o)
	if errors.Is(err, localcache.ErrHomeLocked) {
		err = fmt.Errorf("home %s is in use by a running es serve: send rows with POST /v1/datasets/NAME/rows instead, or stop it first: %w", home, err)
	}
	if err != nil {
		if lk != nil {
			lk.Close()
		}
		return nil, nil, err
	}
	return srv, func() {
		srv.Close()
		if lk != nil {
			lk.Close()
		}
	}, nil
}

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
	op := "upserted"
	if del {
		op = "deleted"
	}
	if serverHome(home) {
		// The rows go through the delta log, as an ingest of es serve.
		batch, err := server.ParseRowsCSV(r, name, server.RowColumns{Series: seriesCol, Period: periodCol, Value: valueCol}, del)
		if err != nil {
			return err
		}
		srv, closeSrv, err := openServer(home, 0)
		if err != nil {
			return err
		}
		defer closeSrv()
		first, last, err := srv.Ingest(dataset, batch)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s %d rows in %s, seq %d..%d (durable)\n", op, len(batch), dataset, first, last)
		return nil
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
	if serverHome(home) {
		// Through the server: it trims the delta log after each compaction.
		srv, closeSrv, err := openServer(home, *keep)
		if err != nil {
			return err
		}
		defer closeSrv()
		names := srv.Store().DatasetNames()
		if dataset != "" {
			names = []string{dataset}
		}
		for _, n := range names {
			m, err := srv.Compact(n)
			if err != nil {
				return err
			}
			if m == nil {
				continue // a compaction of it was running (none in this process)
			}
			fmt.Fprintf(e.stdout, "%s: snapshot %s covers seq %d (%d rows, %d series)\n", n, m.SnapshotID, m.CoversThroughSeq, m.Rows, m.Series)
		}
		return nil
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
