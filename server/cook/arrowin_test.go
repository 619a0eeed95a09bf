package cook

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/energyscope/energyscope/localcache/format"
)

type col struct {
	name string
	typ  arrow.DataType
	json string // the column's values as a JSON array
}

var dictString = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}

// batch builds a record batch from JSON columns.
func batch(t *testing.T, cols ...col) arrow.RecordBatch {
	t.Helper()
	var fields []arrow.Field
	var arrs []arrow.Array
	for _, c := range cols {
		a, _, err := array.FromJSON(memory.DefaultAllocator, c.typ, strings.NewReader(c.json))
		if err != nil {
			t.Fatalf("column %s: %v", c.name, err)
		}
		defer a.Release()
		fields = append(fields, arrow.Field{Name: c.name, Type: c.typ, Nullable: true})
		arrs = append(arrs, a)
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, int64(arrs[0].Len()))
}

// writeInput writes batches as path, choosing the writer by extension.
func writeInput(t *testing.T, path string, recs ...arrow.RecordBatch) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := recs[0].Schema()
	type batchWriter interface {
		Write(arrow.RecordBatch) error
		Close() error
	}
	var w batchWriter
	switch filepath.Ext(path) {
	case ".parquet":
		w, err = pqarrow.NewFileWriter(sc, f,
			parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(3)),
			pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	case ".arrows":
		w = ipc.NewWriter(f, ipc.WithSchema(sc))
	default:
		w, err = ipc.NewFileWriter(f, ipc.WithSchema(sc))
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestArrowAndParquetInputs(t *testing.T) {
	d1, d2, d3 := unix(2001, 1, 1, 0, 0, 0), unix(2001, 1, 2, 0, 0, 0), unix(2001, 1, 3, 0, 0, 0)
	h1 := unix(2010, 1, 1, 1, 0, 0)
	tsMs := &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}
	tsNs := &arrow.TimestampType{Unit: arrow.Nanosecond}
	tsS := &arrow.TimestampType{Unit: arrow.Second}
	tsUs := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "America/New_York"}
	tests := []struct {
		name  string
		batch [][]col
		o     InputOptions
		want  []point
		empty int64
	}{
		{"string date32 float64", [][]col{{
			{"series_id", arrow.BinaryTypes.String, `["a","a","b"]`},
			{"period", arrow.FixedWidthTypes.Date32, fmt.Sprintf("[%d,%d,%d]", d1/86400, d2/86400, d1/86400)},
			{"value", arrow.PrimitiveTypes.Float64, `[1.5,null,3]`},
		}}, InputOptions{}, []point{{"a", d1, 1.5}, {"b", d1, 3}}, 1},
		{"dictionary ids, timestamp ms, float32, two batches", [][]col{{
			{"id", dictString, `["x","y","x"]`},
			{"t", tsMs, fmt.Sprintf("[%d,%d,%d]", d1*1000, d2*1000+999, h1*1000)},
			{"v", arrow.PrimitiveTypes.Float32, `[0.5,2,-4]`},
		}, {
			{"id", dictString, `["x","y"]`}, // same dictionary: the IPC file format allows no replacement
			{"t", tsMs, fmt.Sprintf("[%d,%d]", d3*1000, -1)},
			{"v", arrow.PrimitiveTypes.Float32, `[8,null]`},
		}}, InputOptions{SeriesCol: "id", PeriodCol: "t", ValueCol: "v"},
			[]point{{"x", d1, 0.5}, {"y", d2, 2}, {"x", h1, -4}, {"x", d3, 8}}, 1},
		{"large_string, date64, int64, meta", [][]col{{
			{"series_id", arrow.BinaryTypes.LargeString, `["a","b"]`},
			{"period", arrow.FixedWidthTypes.Date64, fmt.Sprintf("[%d,%d]", d1*1000, d2*1000)},
			{"value", arrow.PrimitiveTypes.Int64, `[7,-9]`},
			{"unit", arrow.BinaryTypes.String, `["USD",null]`},
			{"frequency", arrow.BinaryTypes.String, `["D","daily"]`},
		}}, InputOptions{}, []point{{"a", d1, 7}, {"b", d2, -9}}, 0},
		{"string periods, uint32 values, prefix", [][]col{{
			{"series_id", arrow.BinaryTypes.String, `["a","b"]`},
			{"period", arrow.BinaryTypes.String, `["2001-01-01","Jan 2 2001"]`},
			{"value", arrow.PrimitiveTypes.Uint32, `[1,4000000000]`},
		}}, InputOptions{Prefix: "P."}, []point{{"P.a", d1, 1}, {"P.b", d2, 4e9}}, 0},
		{"int year periods, int8/uint64 values", [][]col{{
			{"series_id", arrow.BinaryTypes.String, `["a","a"]`},
			{"period", arrow.PrimitiveTypes.Int32, `[2001,200101]`},
			{"value", arrow.PrimitiveTypes.Int8, `[-1,2]`},
		}}, InputOptions{}, []point{{"a", d1, -1}, {"a", d1, 2}}, 0},
		{"timestamp ns, s, us", [][]col{{
			{"series_id", arrow.BinaryTypes.String, `["a"]`},
			{"period", tsNs, fmt.Sprintf("[%d]", h1*1e9+5)},
			{"value", arrow.PrimitiveTypes.Uint64, `[3]`},
		}}, InputOptions{}, []point{{"a", h1, 3}}, 0},
		{"shuffled columns, unused unsupported column", [][]col{{
			{"junk", arrow.FixedWidthTypes.Boolean, `[true,false]`},
			{"Value", arrow.PrimitiveTypes.Float64, `[1,2]`},
			{"extra", arrow.BinaryTypes.String, `["p","q"]`},
			{"Series_ID", arrow.BinaryTypes.String, `["a","b"]`},
			{"period", arrow.FixedWidthTypes.Date32, fmt.Sprintf("[%d,%d]", d2/86400, d3/86400)},
		}}, InputOptions{}, []point{{"a", d2, 1}, {"b", d3, 2}}, 0},
		{"wide timestamp s", [][]col{{
			{"date", tsS, fmt.Sprintf("[%d,%d]", h1, h1+3600)},
			{"temp", arrow.PrimitiveTypes.Float64, `[1,null]`},
			{"wind", arrow.PrimitiveTypes.Int16, `[null,4]`},
		}, {
			{"date", tsS, fmt.Sprintf("[%d]", h1+7200)},
			{"temp", arrow.PrimitiveTypes.Float64, `[5]`},
			{"wind", arrow.PrimitiveTypes.Int16, `[6]`},
		}}, InputOptions{Wide: true, PeriodCol: "date", Prefix: "W."},
			[]point{{"W.temp", h1, 1}, {"W.wind", h1 + 3600, 4}, {"W.temp", h1 + 7200, 5}, {"W.wind", h1 + 7200, 6}}, 2},
		{"wide timestamp us with zone", [][]col{{
			{"when", tsUs, fmt.Sprintf("[%d]", h1*1e6)},
			{"a", arrow.PrimitiveTypes.Float64, `[1]`},
		}}, InputOptions{Wide: true, PeriodCol: "when"}, []point{{"a", h1, 1}}, 0},
	}
	for _, tt := range tests {
		for _, ext := range []string{".parquet", ".arrow", ".arrows", ".feather"} {
			t.Run(tt.name+ext, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "in"+ext)
				var recs []arrow.RecordBatch
				for _, cols := range tt.batch {
					r := batch(t, cols...)
					defer r.Release()
					recs = append(recs, r)
				}
				writeInput(t, path, recs...)
				b := NewBuilder()
				var progress int64
				tt.o.Progress = func(done, total int64) { progress = done }
				st, err := b.AddFile(path, tt.o)
				if err != nil {
					t.Fatal(err)
				}
				got := points(b.Table())
				if fmt.Sprint(got) != fmt.Sprint(tt.want) {
					t.Fatalf("got %v\nwant %v", got, tt.want)
				}
				if st.Rows != int64(len(tt.want)) || st.Empty != tt.empty {
					t.Fatalf("stats %+v", st)
				}
				if fi, _ := os.Stat(path); progress != fi.Size() {
					t.Errorf("progress ended at %d of %d", progress, fi.Size())
				}
			})
		}
	}
}

func TestArrowMeta(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.parquet")
	r := batch(t,
		col{"series_id", arrow.BinaryTypes.String, `["a","b","a"]`},
		col{"period", arrow.BinaryTypes.String, `["2001","2001","2002"]`},
		col{"value", arrow.PrimitiveTypes.Float64, `[1,2,3]`},
		col{"unit", dictString, `[null,"kg","USD"]`},
		col{"name", arrow.BinaryTypes.String, `["Alpha","",null]`},
		col{"frequency", arrow.BinaryTypes.String, `["A",null,"M"]`},
	)
	defer r.Release()
	writeInput(t, path, r)
	b := NewBuilder()
	if _, err := b.AddFile(path, InputOptions{Source: "src"}); err != nil {
		t.Fatal(err)
	}
	want := []format.SeriesMeta{
		{ID: "a", Unit: "USD", Name: "Alpha", Source: "src", Frequency: format.Annual},
		{ID: "b", Unit: "kg", Source: "src"},
	}
	if got := b.Table().Series; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestArrowBad(t *testing.T) {
	base := func(vals col) []col {
		return []col{
			{"series_id", arrow.BinaryTypes.String, `["a","b","c","d"]`},
			{"period", arrow.BinaryTypes.String, `["2001","2002","2003","2004"]`},
			vals,
		}
	}
	tests := []struct {
		name    string
		cols    []col
		o       InputOptions
		want    string
		is      error
		skipped int64 // -1: fails even with SkipBad
	}{
		{"NaN", base(col{"value", arrow.PrimitiveTypes.Float64, `[1,2,"NaN",4]`}), InputOptions{}, "row 3: value NaN: not a finite number", ErrNotFinite, 1},
		{"bad period", []col{
			{"series_id", arrow.BinaryTypes.String, `["a","b"]`},
			{"period", arrow.BinaryTypes.String, `["2001","Foo 2"]`},
			{"value", arrow.PrimitiveTypes.Float64, `[1,2]`},
		}, InputOptions{}, `row 2: period "Foo 2": not a recognised date`, ErrBadPeriod, 1},
		{"null period", []col{
			{"series_id", arrow.BinaryTypes.String, `["a","b"]`},
			{"period", arrow.FixedWidthTypes.Date32, `[null,1]`},
			{"value", arrow.PrimitiveTypes.Float64, `[1,2]`},
		}, InputOptions{}, `row 1: period is null`, ErrBadPeriod, 1},
		{"null id", []col{
			{"series_id", arrow.BinaryTypes.String, `["a",null]`},
			{"period", arrow.FixedWidthTypes.Date32, `[1,1]`},
			{"value", arrow.PrimitiveTypes.Float64, `[1,2]`},
		}, InputOptions{}, `row 2: empty series id`, ErrEmptyID, 1},
		{"wide NaN", []col{
			{"date", arrow.FixedWidthTypes.Date32, `[1,2]`},
			{"x", arrow.PrimitiveTypes.Float64, `["Inf",2]`},
		}, InputOptions{Wide: true, PeriodCol: "date"}, `row 1: column "x": value +Inf: not a finite number`, ErrNotFinite, 1},
		{"bool values", base(col{"value", arrow.FixedWidthTypes.Boolean, `[true,false,true,false]`}), InputOptions{},
			`unsupported input: value column "value" has type bool`, ErrUnsupported, -1},
		{"float period", []col{
			{"series_id", arrow.BinaryTypes.String, `["a"]`},
			{"period", arrow.PrimitiveTypes.Float64, `[1]`},
			{"value", arrow.PrimitiveTypes.Float64, `[1]`},
		}, InputOptions{}, `unsupported input: period column "period" has type float64`, ErrUnsupported, -1},
		{"missing value column", base(col{"price", arrow.PrimitiveTypes.Float64, `[1,2,3,4]`}), InputOptions{},
			`missing column: no value column "value" (columns: "series_id", "period", "price")`, ErrMissingColumn, -1},
		{"zero rows", []col{
			{"series_id", arrow.BinaryTypes.String, `[]`},
			{"period", arrow.FixedWidthTypes.Date32, `[]`},
			{"value", arrow.PrimitiveTypes.Float64, `[]`},
		}, InputOptions{}, "no rows", ErrEmpty, -1},
		{"NUL in id", []col{
			{"series_id", arrow.BinaryTypes.String, `["a","b\u0000c"]`},
			{"period", arrow.FixedWidthTypes.Date32, `[1,1]`},
			{"value", arrow.PrimitiveTypes.Float64, `[1,2]`},
		}, InputOptions{}, `row 2: bad series id: NUL byte at byte 1`, ErrBadID, 1},
		{"duplicated value column", []col{
			{"series_id", arrow.BinaryTypes.String, `["a"]`},
			{"period", arrow.FixedWidthTypes.Date32, `[1]`},
			{"value", arrow.PrimitiveTypes.Float64, `[1]`},
			{"value", arrow.PrimitiveTypes.Float64, `[2]`},
		}, InputOptions{}, `duplicate column: column "value" appears twice (columns 3 and 4)`, ErrDuplicateColumn, -1},
		{"all null", base(col{"value", arrow.PrimitiveTypes.Float64, `[null,null,null,null]`}), InputOptions{}, "no rows", ErrEmpty, -1},
	}
	for _, tt := range tests {
		for _, ext := range []string{".parquet", ".arrow", ".arrows"} {
			t.Run(tt.name+ext, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "bad"+ext)
				r := batch(t, tt.cols...)
				defer r.Release()
				writeInput(t, path, r)
				b := NewBuilder()
				_, err := b.AddFile(path, tt.o)
				if err == nil || !strings.Contains(err.Error(), path+": "+tt.want) || !errors.Is(err, tt.is) {
					t.Fatalf("error %v, want %q wrapping %v", err, tt.want, tt.is)
				}
				if b.Table().Len() != 0 {
					t.Fatalf("failed file left %d rows", b.Table().Len())
				}
				o := tt.o
				o.SkipBad = true
				st, err := b.AddFile(path, o)
				if tt.skipped < 0 {
					if err == nil {
						t.Fatalf("SkipBad: no error")
					}
					return
				}
				if err != nil || st.Skipped != tt.skipped || st.Rows != r.NumRows()-tt.skipped {
					t.Fatalf("SkipBad: %+v, %v", st, err)
				}
			})
		}
	}
}

func TestArrowNotArrow(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"v1.feather":   "FEA1xxxxxxxx",
		"junk.arrow":   "this is not arrow",
		"junk.parquet": "PAR1 nope",
		"empty.arrows": "",
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o644)
		if _, err := NewBuilder().AddFile(p, InputOptions{}); err == nil || !strings.Contains(err.Error(), p+": ") {
			t.Errorf("%s: error %v", name, err)
		}
	}
}
