package lake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	pq "github.com/parquet-go/parquet-go"
	pqformat "github.com/parquet-go/parquet-go/format"

	"github.com/energyscope/energyscope/localcache/format"
)

// mixedTable: n series of varied lengths (1 to 400 points), daily or
// (intraday) hourly, with metadata drawn from small sets (frequency,
// unit, source) and a name of its own, so that row groups hold several
// series (about 650: dictionaries need two bytes per index), and runs of
// equal metadata span series.
func mixedTable(seed uint64, n int, intraday bool) *format.Table {
	r := rand.New(rand.NewPCG(seed, 7))
	units := []string{"MW", "Thousand Barrels", "USD/MMBtu", ""}
	sources := []string{"EIA", "ENTSO-E"}
	t := &format.Table{}
	start := time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	for s := range n {
		f, step := format.Daily, int64(86400)
		if intraday && s%3 == 0 {
			f, step = format.Hourly, 3600
		}
		t.Series = append(t.Series, format.SeriesMeta{ID: fmt.Sprintf("MIX.%05d.%s", s, f), Frequency: f,
			Unit: units[r.IntN(len(units))], Name: fmt.Sprintf("Mixed series %d ü", s), Source: sources[s/(n/2+1)]})
		k := 1 + r.IntN(400)
		if s%17 == 0 {
			k = 0 // a series without points
		}
		first := start + int64(r.IntN(5000))*step
		for i := range k {
			t.Append(uint32(s), first+int64(i)*step, math.Round(r.NormFloat64()*1e4)/100)
		}
	}
	return t
}

// TestDataFileLayout publishes tables of several row groups (daily and
// intraday, with a cold tier) and reads the data file back three ways:
// iceberg-go's scan and an independent Parquet reader
// (github.com/parquet-go/parquet-go) give exactly the snapshot's rows in
// (series id, period) order, with every column; each row group starts at
// a series boundary and carries series_id and period min/max statistics
// equal to its rows' bounds; the schema is required columns with the
// table's field ids and logical types.
func TestDataFileLayout(t *testing.T) {
	ctx := context.Background()
	l := openLake(t, t.TempDir())
	rule, _ := format.ParseTailRule("fraction=0.3")
	for _, intraday := range []bool{false, true} {
		t.Run(fmt.Sprint("intraday=", intraday), func(t *testing.T) {
			dataset := "mixed"
			if intraday {
				dataset = "mixedh"
			}
			dir := writeSnapshot(t, dataset, mixedTable(3, 2000, intraday), format.WriteOptions{Tail: rule})
			m, _ := format.ReadManifest(dir)
			if m.File(format.TailFile) == nil || m.Rows <= 2*groupRows {
				t.Fatalf("%d rows, tail %v: the test needs several row groups and a cold tier", m.Rows, m.File(format.TailFile) != nil)
			}
			v := mustPublish(t, l, dataset, dir)
			tbl, _ := l.Table(ctx, dataset)
			want := snapshotRows(t, dir)
			slices.SortFunc(want, rowLess)
			got := scanRows(t, tbl, v.IcebergSnapshot)
			if !slices.Equal(got, want) {
				t.Fatalf("iceberg-go's scan differs from the snapshot (%d rows, want %d)", len(got), len(want))
			}
			tasks, err := tbl.Scan().PlanFiles(ctx)
			if err != nil || len(tasks) != 1 {
				t.Fatalf("%d files planned, %v", len(tasks), err)
			}
			b, err := os.ReadFile(localPathOf(tasks[0].File.FilePath()))
			if err != nil {
				t.Fatal(err)
			}
			f, err := pq.OpenFile(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Fatal(err)
			}
			fields := f.Schema().Fields()
			names := []string{"series_id", "period", "value", "frequency", "unit", "name", "source"}
			for i, fl := range fields {
				if fl.Name() != names[i] || fl.Optional() || fl.Repeated() || fl.ID() != i+1 {
					t.Fatalf("field %d: %s (id %d, optional %v)", i, fl.Name(), fl.ID(), fl.Optional())
				}
			}
			wantPeriod := "DATE"
			if intraday {
				wantPeriod = "TIMESTAMP(isAdjustedToUTC=true,unit=MICROS)"
			}
			if lt := fields[1].Type().LogicalType(); lt == nil || lt.String() != wantPeriod {
				t.Fatalf("period logical type %v, want %s", lt, wantPeriod)
			}
			if len(f.RowGroups()) < 3 {
				t.Fatalf("%d row groups", len(f.RowGroups()))
			}
			var all []row
			for g, rg := range f.RowGroups() {
				var rows []row
				rr := rg.Rows()
				buf := make([]pq.Row, 512)
				for {
					n, err := rr.ReadRows(buf)
					for _, pr := range buf[:n] {
						p := int64(pr[1].Int32()) * 86400
						if intraday {
							p = pr[1].Int64() / 1_000_000
						}
						rows = append(rows, row{string(pr[0].ByteArray()), p, pr[2].Double(),
							string(pr[3].ByteArray()), string(pr[4].ByteArray()), string(pr[5].ByteArray()), string(pr[6].ByteArray())})
					}
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				rr.Close()
				if len(all) > 0 && rows[0].Series == all[len(all)-1].Series {
					t.Fatalf("row group %d starts inside series %s", g, rows[0].Series)
				}
				md := f.Metadata().RowGroups[g]
				if enc := md.Columns[1].MetaData.Encoding; len(enc) != 1 || enc[0] != pqformat.DeltaBinaryPacked {
					t.Fatalf("row group %d: period encodings %v, want DELTA_BINARY_PACKED", g, enc)
				}
				id := md.Columns[0].MetaData.Statistics
				if string(id.MinValue) != rows[0].Series || string(id.MaxValue) != rows[len(rows)-1].Series {
					t.Fatalf("row group %d: series_id stats [%s, %s], rows [%s, %s]", g, id.MinValue, id.MaxValue, rows[0].Series, rows[len(rows)-1].Series)
				}
				lo, hi := rows[0].Period, rows[0].Period
				for _, r := range rows {
					lo, hi = min(lo, r.Period), max(hi, r.Period)
				}
				ps := f.Metadata().RowGroups[g].Columns[1].MetaData.Statistics
				dec := func(b []byte) int64 {
					if intraday {
						return int64(uint64(b[0])|uint64(b[1])<<8|uint64(b[2])<<16|uint64(b[3])<<24|uint64(b[4])<<32|uint64(b[5])<<40|uint64(b[6])<<48|uint64(b[7])<<56) / 1_000_000
					}
					return int64(int32(uint32(b[0])|uint32(b[1])<<8|uint32(b[2])<<16|uint32(b[3])<<24)) * 86400
				}
				if dec(ps.MinValue) != lo || dec(ps.MaxValue) != hi {
					t.Fatalf("row group %d: period stats [%d, %d], rows [%d, %d]", g, dec(ps.MinValue), dec(ps.MaxValue), lo, hi)
				}
				all = append(all, rows...)
			}
			if !slices.Equal(all, want) {
				t.Fatalf("parquet-go reads %d rows, different from the snapshot's %d", len(all), len(want))
			}
		})
	}
}
