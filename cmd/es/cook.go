package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	_ "github.com/energyscope/energyscope/localcache/format/tailwrite" // format.Write can write a cold tier (tail.parquet)
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/cook"
	"github.com/energyscope/energyscope/server/lake"
)

func runCook(e *env, args []string) error {
	var home, dataset string
	var ins multiFlag
	var o cook.InputOptions
	fs := newFlags(e, "cook", &home)
	fs.StringVar(&dataset, "dataset", "", "dataset name (required)")
	fs.Var(&ins, "in", "input file: .csv, .parquet or .arrow (repeatable)")
	fs.StringVar(&o.SeriesCol, "series-col", "series_id", "column holding the series id (long form)")
	fs.StringVar(&o.PeriodCol, "period-col", "period", "column holding the period")
	fs.StringVar(&o.ValueCol, "value-col", "value", "column holding the value (long form)")
	fs.BoolVar(&o.Wide, "wide", false, "wide form: one series per column other than --period-col")
	fs.StringVar(&o.Prefix, "prefix", "", "wide form: prefix for the series ids")
	fs.BoolVar(&o.SkipBad, "skip-bad", false, "skip malformed rows (counted) instead of failing")
	fs.StringVar(&o.Frequency, "frequency", "", "frequency of every series (H, D, W, M, Q, A); default: column or inferred")
	fs.StringVar(&o.Unit, "unit", "", "unit for series without one")
	fs.StringVar(&o.Source, "source", "", "source for series without one")
	batchRows := fs.Int("batch-rows", 1<<20, "target rows per record batch of data.arrow")
	tailRule := fs.String("tail", "", "put series in the cold tier (tail.parquet): before=DATE (last period before it), list=FILE (ids, one per line) or fraction=F (the F least recently updated)")
	fromLake := fs.Bool("from-lake", false, "cook the dataset's lake table as it is now (its head, also another engine's commit) instead of --in files, and publish the result")
	var lf lakeFlags
	lf.add(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	ins = append(ins, pos...)
	if dataset == "" {
		return usagef("--dataset is required")
	}
	if err := format.ValidDatasetName(dataset); err != nil {
		return usageError{err}
	}
	// A server home (es serve made HOME/lake) publishes every cook to its
	// lake first, as the server does; so does any home given a lake flag.
	var lk *lake.Lake
	if *fromLake || lf.set() || hasLake(home) {
		if lk, err = lf.open(home, nil); err != nil {
			return err
		}
		defer lk.Close()
	}
	if *fromLake {
		if len(ins) > 0 {
			return usagef("--from-lake takes no --in files")
		}
		tmp, err := os.MkdirTemp(home, ".from-lake-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		in, rows, err := scanLake(lk, dataset, tmp)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "read %d rows of table %s.%s (iceberg-go scan of its head)\n", rows, lake.Namespace, dataset)
		ins = []string{in}
	}
	if len(ins) == 0 {
		return usagef("at least one --in FILE (or --from-lake) is required")
	}
	var tail *format.TailRule
	if *tailRule != "" {
		if tail, err = format.ParseTailRule(*tailRule); err != nil {
			return usageError{err}
		}
	}
	res, err := cookDatasetTail(e, home, lk, dataset, ins, o, *batchRows, tail)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "cooked %s: %d rows, %d series, %d duplicates (last one won), %d bad rows skipped, %d empty values dropped, snapshot %s, %.2fs\n",
		dataset, res.manifest.Rows, res.manifest.Series, res.stats.Duplicates, res.skipped, res.empty, res.manifest.SnapshotID, res.elapsed.Seconds())
	if cold := res.manifest.Series - res.manifest.HotSeries; cold > 0 {
		fmt.Fprintf(e.stdout, "cold tier: %d series in %s (%d bytes)\n", cold, format.TailFile, res.manifest.File(format.TailFile).Size)
	}
	return nil
}

// cookIntoDirectory cooks t into a staging directory of dataset and
// installs it (Install moves it into place, moves CURRENT and drops the
// log the new epoch covers).
func cookIntoDirectory(st *localcache.Store, dataset string, t *format.Table, wo format.WriteOptions) (*format.Manifest, format.WriteStats, error) {
	tmp, err := format.TempSnapshotDir(st.DatasetDir(dataset))
	if err != nil {
		return nil, format.WriteStats{}, err
	}
	m, wst, err := format.Write(tmp, t, wo)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, wst, err
	}
	if _, err := st.Install(dataset, tmp); err != nil {
		os.RemoveAll(tmp)
		return nil, wst, err
	}
	return m, wst, nil
}

type cookResult struct {
	manifest *format.Manifest
	stats    format.WriteStats
	skipped  int64 // bad rows skipped (--skip-bad)
	empty    int64 // empty value cells and nulls: no point, not an error
	elapsed  time.Duration
}

// cookDataset reads the inputs and publishes a new snapshot of dataset
// under home, every series hot. A full cook starts a new epoch.
func cookDataset(e *env, home, dataset string, ins []string, o cook.InputOptions, batchRows int) (*cookResult, error) {
	return cookDatasetTail(e, home, nil, dataset, ins, o, batchRows, nil)
}

// cookDatasetTail is cookDataset with a cold-tier rule (nil: none),
// published to lk first when it is not nil (one Iceberg commit before
// CURRENT moves; a failed publish changes nothing).
func cookDatasetTail(e *env, home string, lk *lake.Lake, dataset string, ins []string, o cook.InputOptions, batchRows int, tail *format.TailRule) (*cookResult, error) {
	start := time.Now()
	var total int64
	for _, in := range ins {
		st, err := os.Stat(in)
		if err != nil {
			return nil, err
		}
		total += st.Size()
	}
	bar := newProgress(e.stderr, "read", total)
	b := cook.NewBuilder()
	var done, skipped, empty int64
	for _, in := range ins {
		oo := o
		base := done
		oo.Progress = func(d, _ int64) { bar.set(base + d) }
		fst, err := b.AddFile(in, oo)
		if err != nil {
			bar.finish()
			return nil, err
		}
		skipped += fst.Skipped
		empty += fst.Empty
		st, _ := os.Stat(in)
		done += st.Size()
	}
	bar.finish()

	// The store's writer lock: a cook never races a running server (or
	// companion) on its home; the server takes new epochs by PUT.
	lo := &localcache.Options{CompactRows: -1, CompactBytes: -1}
	if lk != nil {
		lo = withLake(home, lo, lk, e.stderr)
	}
	st, err := localcache.Open(home, lo)
	if errors.Is(err, localcache.ErrHomeLocked) {
		return nil, fmt.Errorf("home %s is in use by a running es serve (or companion): upload to the server with PUT /v1/datasets/%s instead, or stop it first: %w", home, dataset, err)
	} else if err != nil {
		return nil, err
	}
	defer st.Close()
	if err := server.CheckNameFree(home, dataset); err != nil {
		return nil, err
	}
	// A new epoch covers every seq the dataset's logs hold: no record of
	// the epoch before is replayed over the new input.
	epoch, covers := server.NextEpoch(st, dataset)
	if serverHome(home) {
		// Seqs the server's delta log handed out belong to the epoch
		// being replaced.
		head, err := server.EmbeddedLogHead(context.Background(), home, dataset)
		if err != nil {
			return nil, fmt.Errorf("the server's delta log: %w", err)
		}
		covers = max(covers, head)
	}
	t := b.Table()
	wbar := newProgress(e.stderr, "cook", int64(t.Len()))
	wo := format.WriteOptions{
		Dataset:          dataset,
		Epoch:            epoch,
		CoversThroughSeq: covers,
		BatchRows:        batchRows,
		Progress:         func(_ string, d, _ int64) { wbar.set(d) },
		Tail:             tail,
	}
	// With a lake, the snapshot is cooked straight into the vintage's
	// Puffin file (InstallCooked); else (or over a damaged dataset) into
	// a staging directory that Install moves into place.
	var wst format.WriteStats
	m, err := st.InstallCooked(dataset, func(c *format.Container) (*format.Manifest, error) {
		m, s, err := format.WriteInto(c, t, wo)
		wst = s
		return m, err
	})
	if errors.Is(err, localcache.ErrCookNeedsDirectory) {
		m, wst, err = cookIntoDirectory(st, dataset, t, wo)
	}
	wbar.finish()
	if err != nil {
		return nil, err
	}
	return &cookResult{manifest: m, stats: wst, skipped: skipped, empty: empty, elapsed: time.Since(start)}, nil
}

// scanLake reads the head of dataset's table with iceberg-go's own scan
// (whatever engine wrote it) into an Arrow IPC file in dir that cook
// reads like any input (columns series_id, period, value and the
// metadata columns by name), and returns its path and row count.
func scanLake(lk *lake.Lake, dataset, dir string) (string, int64, error) {
	ctx := context.Background()
	tbl, err := lk.Table(ctx, dataset)
	if err != nil {
		return "", 0, err
	}
	if tbl.CurrentSnapshot() == nil {
		return "", 0, fmt.Errorf("table %s.%s has no snapshot: nothing to cook", lake.Namespace, dataset)
	}
	sc, recs, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		return "", 0, fmt.Errorf("scan table %s.%s: %w", lake.Namespace, dataset, err)
	}
	// Strings as plain utf8 (the scan may give large or view strings).
	fields := make([]arrow.Field, len(sc.Fields()))
	for i, f := range sc.Fields() {
		fields[i] = arrow.Field{Name: f.Name, Type: f.Type, Nullable: true}
		switch f.Type.ID() {
		case arrow.LARGE_STRING, arrow.STRING_VIEW:
			fields[i].Type = arrow.BinaryTypes.String
		}
	}
	out := arrow.NewSchema(fields, nil)
	path := filepath.Join(dir, "lake.arrow")
	f, err := os.Create(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(out))
	if err != nil {
		return "", 0, err
	}
	var rows int64
	for rec, err := range recs {
		if err != nil {
			w.Close()
			return "", 0, fmt.Errorf("scan table %s.%s: %w", lake.Namespace, dataset, err)
		}
		cols := make([]arrow.Array, rec.NumCols())
		for i := range cols {
			cols[i] = plainStrings(rec.Column(i), fields[i].Type)
		}
		r := array.NewRecordBatch(out, cols, rec.NumRows())
		err := w.Write(r)
		r.Release()
		for _, c := range cols {
			c.Release()
		}
		rows += rec.NumRows()
		rec.Release()
		if err != nil {
			w.Close()
			return "", 0, err
		}
	}
	if err := w.Close(); err != nil {
		return "", 0, err
	}
	return path, rows, f.Close()
}

// plainStrings returns a (a new reference), as utf8 when want is utf8 and
// a holds large or view strings.
func plainStrings(a arrow.Array, want arrow.DataType) arrow.Array {
	type stringer interface {
		Value(int) string
		IsNull(int) bool
		Len() int
	}
	s, ok := a.(stringer)
	if !ok || arrow.TypeEqual(a.DataType(), want) {
		a.Retain()
		return a
	}
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	for i := range s.Len() {
		if s.IsNull(i) {
			b.AppendNull()
		} else {
			b.Append(s.Value(i))
		}
	}
	return b.NewArray()
}
