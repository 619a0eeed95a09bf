package format

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	pq "github.com/parquet-go/parquet-go"
)

// TestTailThirdPartyReader reads tail.parquet with another Parquet
// implementation (github.com/parquet-go/parquet-go, which shares no code
// with arrow-go's writer) and checks the schema it sees and every row
// against the index: the cold tier is an open format, not our private one.
func TestTailThirdPartyReader(t *testing.T) {
	for _, intraday := range []bool{false, true} {
		t.Run(fmt.Sprint("intraday=", intraday), func(t *testing.T) {
			tb := mixedTable(21, 300, 60_000, intraday)
			rule, _ := ParseTailRule("fraction=0.7")
			dir, m := writeSnap(t, tb, WriteOptions{Tail: rule})
			want, tiers := readBackTiered(t, dir, m)
			x, err := OpenIndex(aligned(readFile(t, dir, IndexFile)), m.PeriodType, m.Series)
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()

			b := readFile(t, dir, TailFile)
			f, err := pq.OpenFile(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Fatal(err)
			}
			if v, _ := f.Lookup("energyscope.file"); v != "tail" {
				t.Errorf("key/value metadata energyscope.file = %q", v)
			}
			// The schema as the other library understands it.
			fields := f.Schema().Fields()
			if len(fields) != 3 || fields[0].Name() != "series" || fields[1].Name() != "period" || fields[2].Name() != "value" {
				t.Fatalf("schema %v", f.Schema())
			}
			for _, fl := range fields {
				if fl.Optional() || fl.Repeated() {
					t.Errorf("%s is not required", fl.Name())
				}
			}
			logical := func(i int) string {
				if lt := fields[i].Type().LogicalType(); lt != nil {
					return lt.String()
				}
				return ""
			}
			if lt := logical(0); lt != "INT(32,false)" {
				t.Errorf("series logical type %q, want uint32", lt)
			}
			wantPeriod := "DATE"
			if intraday {
				wantPeriod = "TIMESTAMP(isAdjustedToUTC=true,unit=MILLIS)"
			}
			if lt := logical(1); lt != wantPeriod {
				t.Errorf("period logical type %q, want %q", lt, wantPeriod)
			}
			if k := fields[2].Type().Kind(); k != pq.Double {
				t.Errorf("value kind %v", k)
			}
			if !strings.HasPrefix(f.Metadata().CreatedBy, "energyscope") {
				t.Errorf("created_by %q", f.Metadata().CreatedBy)
			}

			// Every row, row group by row group, as the index routes it.
			got := map[string]cookedSeries{}
			rgs := f.RowGroups()
			var total int64
			for g, rg := range rgs {
				rows := rg.Rows()
				buf := make([]pq.Row, 1000)
				k := 0
				for {
					n, err := rows.ReadRows(buf)
					for _, row := range buf[:n] {
						if len(row) != 3 {
							t.Fatalf("row of %d values", len(row))
						}
						r := row[0].Uint32()
						if Tier(x.Tier[r]) != Cold || int(x.Batch[r]) != g || uint32(k) < x.Offset[r] || uint32(k) >= x.Offset[r]+x.Length[r] {
							t.Fatalf("row %d of row group %d is series %d (tier %d, batch %d, offset %d, length %d)", k, g, r, x.Tier[r], x.Batch[r], x.Offset[r], x.Length[r])
						}
						id := x.ID(r)
						cs := got[id]
						if intraday {
							ms := row[1].Int64()
							if ms%1000 != 0 {
								t.Fatalf("timestamp %d ms is not whole seconds", ms)
							}
							cs.periods = append(cs.periods, ms/1000)
						} else {
							cs.periods = append(cs.periods, int64(row[1].Int32())*86400)
						}
						cs.values = append(cs.values, row[2].Double())
						got[id] = cs
						k++
					}
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				rows.Close()
				if int64(k) != rg.NumRows() {
					t.Fatalf("row group %d: read %d rows of %d", g, k, rg.NumRows())
				}
				total += int64(k)
			}
			var coldRows int64
			for id, tr := range tiers {
				if tr != Cold {
					continue
				}
				w := want[id]
				coldRows += int64(len(w.values))
				g := got[id]
				if len(g.values) != len(w.values) {
					t.Fatalf("%s: %d rows, want %d", id, len(g.values), len(w.values))
				}
				for i := range w.values {
					if g.periods[i] != w.periods[i] || math.Float64bits(g.values[i]) != math.Float64bits(w.values[i]) {
						t.Fatalf("%s row %d: (%d, %v), want (%d, %v)", id, i, g.periods[i], g.values[i], w.periods[i], w.values[i])
					}
				}
			}
			if total != coldRows || total == 0 || len(rgs) < 2 {
				t.Fatalf("%d rows in %d row groups, want %d", total, len(rgs), coldRows)
			}
		})
	}
}
