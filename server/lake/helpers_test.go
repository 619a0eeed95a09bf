package lake

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
	"github.com/energyscope/energyscope/server/cook"
	"github.com/energyscope/energyscope/server/cook/samples"
)

// row is one point with its series metadata, as both the serving reader
// and the lake's Parquet files carry it.
type row struct {
	Series                        string
	Period                        int64 // unix seconds
	Value                         float64
	Frequency, Unit, Name, Source string
}

func (r row) String() string {
	return fmt.Sprintf("%s@%d=%v[%s|%s|%s|%s]", r.Series, r.Period, r.Value, r.Frequency, r.Unit, r.Name, r.Source)
}

// sampleTable cooks one sample set (server/cook/samples) into a table.
func sampleTable(tb testing.TB, dataset string) *format.Table {
	tb.Helper()
	for _, s := range samples.Sets {
		if s.Dataset != dataset {
			continue
		}
		b, err := samples.FS.ReadFile(s.File)
		if err != nil {
			tb.Fatal(err)
		}
		p := filepath.Join(tb.TempDir(), s.File)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			tb.Fatal(err)
		}
		cb := cook.NewBuilder()
		if _, err := cb.AddFile(p, s.Opts); err != nil {
			tb.Fatalf("cook %s: %v", p, err)
		}
		return cb.Table()
	}
	tb.Fatalf("no sample %s", dataset)
	return nil
}

// writeSnapshot writes t as a snapshot directory of dataset.
func writeSnapshot(tb testing.TB, dataset string, t *format.Table, o format.WriteOptions) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "snap")
	o.Dataset = dataset
	if o.Epoch == 0 {
		o.Epoch = 1
	}
	if o.Created.IsZero() {
		o.Created = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	}
	if _, _, err := format.Write(dir, t, o); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// cookSample cooks a sample set into a snapshot directory.
func cookSample(tb testing.TB, dataset string, o format.WriteOptions) string {
	return writeSnapshot(tb, dataset, sampleTable(tb, dataset), o)
}

// scaled returns a copy of t with every value multiplied by f (a revised
// vintage of the same series).
func scaled(t *format.Table, f float64) *format.Table {
	c := *t
	c.Value = slices.Clone(t.Value)
	for i := range c.Value {
		c.Value[i] *= f
	}
	return &c
}

// snapshotRows reads a snapshot directory through the serving reader
// (localcache/snapshot), the oracle the lake is compared with.
func snapshotRows(tb testing.TB, dir string) []row {
	tb.Helper()
	s, err := snapshot.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	var out []row
	for r := uint32(0); r < uint32(s.NumSeries()); r++ {
		info := s.Info(r)
		p, err := s.Get(r, snapshot.MinTime, snapshot.MaxTime)
		if err != nil {
			tb.Fatal(err)
		}
		for i := range p.Len() {
			out = append(out, row{info.ID, p.Unix(i), p.Values[i], string(info.Frequency), info.Unit, info.Name, info.Source})
		}
	}
	return out
}

// scanRows reads one Iceberg snapshot of a table with iceberg-go's own
// scan (not the project's reader), in file order.
func scanRows(tb testing.TB, tbl *table.Table, snapshotID int64) []row {
	tb.Helper()
	at, err := tbl.Scan(table.WithSnapshotID(snapshotID)).ToArrowTable(context.Background())
	if err != nil {
		tb.Fatalf("iceberg scan of snapshot %d: %v", snapshotID, err)
	}
	defer at.Release()
	tr := array.NewTableReader(at, 1<<16)
	defer tr.Release()
	var out []row
	col := func(rec arrow.RecordBatch, name string) arrow.Array {
		idx := rec.Schema().FieldIndices(name)
		if len(idx) != 1 {
			tb.Fatalf("scan has no column %q: %v", name, rec.Schema())
		}
		return rec.Column(idx[0])
	}
	str := func(a arrow.Array, i int) string {
		switch a := a.(type) {
		case *array.String:
			return a.Value(i)
		case *array.LargeString:
			return a.Value(i)
		case *array.StringView:
			return a.Value(i)
		}
		tb.Fatalf("unexpected string column type %s", a.DataType())
		return ""
	}
	for tr.Next() {
		rec := tr.RecordBatch()
		ids, per, val := col(rec, "series_id"), col(rec, "period"), col(rec, "value").(*array.Float64)
		fr, un, nm, so := col(rec, "frequency"), col(rec, "unit"), col(rec, "name"), col(rec, "source")
		for i := range int(rec.NumRows()) {
			var p int64
			switch per := per.(type) {
			case *array.Date32:
				p = int64(per.Value(i)) * 86400
			case *array.Timestamp:
				unit := per.DataType().(*arrow.TimestampType).Unit
				p = int64(per.Value(i)) / int64(time.Second/unit.Multiplier())
			default:
				tb.Fatalf("unexpected period type %s", per.DataType())
			}
			out = append(out, row{str(ids, i), p, val.Value(i), str(fr, i), str(un, i), str(nm, i), str(so, i)})
		}
	}
	return out
}

func rowLess(a, b row) int {
	if c := strings.Compare(a.Series, b.Series); c != 0 {
		return c
	}
	if a.Period < b.Period {
		return -1
	}
	if a.Period > b.Period {
		return 1
	}
	return 0
}

// sameRows fails unless got and want hold the same rows (any order).
func sameRows(tb testing.TB, what string, got, want []row) {
	tb.Helper()
	got, want = slices.Clone(got), slices.Clone(want)
	slices.SortFunc(got, rowLess)
	slices.SortFunc(want, rowLess)
	if len(got) != len(want) {
		tb.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			tb.Fatalf("%s: row %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

// openLake opens the embedded default lake under home.
func openLake(tb testing.TB, home string) *Lake {
	tb.Helper()
	l, err := Open(context.Background(), Options{Home: home})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return l
}

func mustPublish(tb testing.TB, l *Lake, dataset, dir string) Vintage {
	tb.Helper()
	v, err := l.Publish(context.Background(), dataset, dir)
	if err != nil {
		tb.Fatalf("publish %s: %v", dataset, err)
	}
	return v
}
