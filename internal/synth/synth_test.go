package synth

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

func writeCSV(t testing.TB, o Options) ([]byte, Stats) {
	t.Helper()
	var buf bytes.Buffer
	st, err := WriteCSV(&buf, o)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), st
}

func readCSV(t testing.TB, b []byte) [][]string {
	t.Helper()
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(recs[0], ","); got != strings.Join(Columns, ",") {
		t.Fatalf("header = %q", got)
	}
	return recs[1:]
}

func TestDeterministic(t *testing.T) {
	for _, intraday := range []bool{false, true} {
		o := Options{Series: 2000, Rows: 150_000, Seed: 42, Intraday: intraday}
		a, _ := writeCSV(t, o)
		b, _ := writeCSV(t, o)
		if !bytes.Equal(a, b) {
			t.Fatalf("intraday=%v: two runs differ", intraday)
		}
		o.Seed = 43
		c, _ := writeCSV(t, o)
		if bytes.Equal(a, c) {
			t.Fatalf("intraday=%v: seeds 42 and 43 gave the same output", intraday)
		}
		if !slices.EqualFunc(Catalogue(o), Catalogue(o), func(x, y SeriesSpec) bool { return x == y }) {
			t.Fatal("Catalogue not deterministic")
		}
	}
}

func TestCSVIndependentOfParallelism(t *testing.T) {
	o := Options{Series: 3000, Rows: 400_000, Seed: 8, Intraday: true}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	one, _ := writeCSV(t, o)
	runtime.GOMAXPROCS(7)
	seven, _ := writeCSV(t, o)
	if !bytes.Equal(one, seven) {
		t.Fatal("output depends on GOMAXPROCS")
	}
}

type failWriter struct{ left int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.left -= len(p); f.left < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

func TestWriteErrors(t *testing.T) {
	o := Options{Series: 3000, Rows: 400_000, Seed: 8}
	if _, err := WriteCSV(&failWriter{left: 3 << 20}, o); err == nil || err.Error() != "disk full" {
		t.Fatalf("WriteCSV: %v", err)
	}
	if _, err := WriteParquet(&failWriter{left: 1 << 20}, Options{Series: 3000, Rows: 2_400_000, Seed: 8}); err == nil {
		t.Fatal("WriteParquet: want error")
	}
}

func TestExactRowCount(t *testing.T) {
	cases := []Options{
		{Series: 1, Rows: 1},
		{Series: 7, Rows: 7},
		{Series: 10, Rows: 11, Intraday: true},
		{Series: 100, Rows: 7919},
		{Series: 1000, Rows: 75_013, Intraday: true},
		{Series: 3, Rows: 500_000}, // beyond realistic history: falls back to year-1 caps
		{Series: 5000, Rows: 240_001, Seed: 9},
	}
	for _, o := range cases {
		b, st := writeCSV(t, o)
		lines := int64(bytes.Count(b, []byte{'\n'})) - 1
		var sum int64
		cat := Catalogue(o)
		for _, s := range cat {
			sum += int64(s.Length)
		}
		if st.Rows != o.Rows || lines != o.Rows || sum != o.Rows || st.Series != o.Series || len(cat) != o.Series {
			t.Errorf("%+v: stats %+v, %d lines, catalogue %d series / %d rows", o, st, lines, len(cat), sum)
		}
	}
	b, st := writeCSV(t, Options{})
	if string(b) != csvHeader || st != (Stats{}) {
		t.Errorf("empty dataset: %q %+v", b, st)
	}
}

func TestValidate(t *testing.T) {
	bad := []Options{
		{Series: 10, Rows: 9},
		{Series: -1},
		{Series: 0, Rows: 5},
		{Series: 1, Rows: 1, End: time.Date(200, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	for _, o := range bad {
		if o.Validate() == nil {
			t.Errorf("%+v: want error", o)
		}
		if _, err := WriteCSV(io.Discard, o); err == nil {
			t.Errorf("%+v: WriteCSV: want error", o)
		}
		if Catalogue(o) != nil {
			t.Errorf("%+v: Catalogue: want nil", o)
		}
	}
	if _, err := WriteCSV(io.Discard, Options{Series: 1, Rows: 5_000_000}); err == nil {
		t.Error("5M rows in one monthly series: want capacity error")
	}
}

func TestUniqueIDsAndMix(t *testing.T) {
	scales := []Options{
		{Series: 20_000, Rows: 1_500_000, Seed: 1},
		{Series: 20_000, Rows: 1_500_000, Seed: 2, Intraday: true},
	}
	if !testing.Short() {
		scales = append(scales, Options{Series: 175_000, Rows: 13_800_000, Seed: 3, Intraday: true})
	}
	for _, o := range scales {
		cat := Catalogue(o)
		ids := make(map[string]bool, len(cat))
		freq := map[string]int{}
		sources := map[string]int{}
		var disamb int
		sorted := true
		for i, s := range cat {
			if ids[s.ID] {
				t.Fatalf("%+v: duplicate id %s", o, s.ID)
			}
			ids[s.ID] = true
			freq[s.Frequency]++
			sources[s.Source]++
			if !strings.HasSuffix(s.ID, "."+s.Frequency) || !strings.Contains(s.Name, ", "+freqWordOf(s.Frequency)) {
				t.Fatalf("id/name do not carry frequency %s: %s / %s", s.Frequency, s.ID, s.Name)
			}
			if strings.ContainsAny(s.ID, ", \"") {
				t.Fatalf("bad id %q", s.ID)
			}
			if strings.Contains(s.Name, ", "+freqWordOf(s.Frequency)+" (") {
				disamb++
			}
			if i > 0 && cat[i-1].ID > s.ID {
				sorted = false
			}
		}
		if sorted {
			t.Errorf("%+v: series are emitted in id order", o)
		}
		want := map[string]float64{"D": 0.15, "W": 0.25, "M": 0.45, "A": 0.15}
		if o.Intraday {
			want["D"], want["H"] = 0.10, 0.05
		}
		for f, q := range want {
			got := float64(freq[f]) / float64(len(cat))
			if math.Abs(got-q) > 0.01 {
				t.Errorf("%+v: frequency %s share %.4f, want %.2f", o, f, got, q)
			}
		}
		if len(freq) != len(want) {
			t.Errorf("%+v: frequencies %v", o, freq)
		}
		if float64(disamb) > 0.01*float64(len(cat)) {
			t.Errorf("%+v: %d ids needed a numeric disambiguator", o, disamb)
		}
		t.Logf("%d series: freq %v sources %v disambiguated %d", len(cat), freq, sources, disamb)
	}
}

func freqWordOf(code string) string {
	for f, c := range freqCode {
		if c == code {
			return freqWord[f]
		}
	}
	return "?"
}

// TestPeriodsAndSeries checks every row: periods aligned to their frequency
// and consecutive, each series one contiguous block with constant metadata
// matching the catalogue, values positive with two decimals.
func TestPeriodsAndSeries(t *testing.T) {
	for _, o := range []Options{
		{Series: 3000, Rows: 250_000, Seed: 5, Intraday: true},
		{Series: 500, Rows: 40_000, Seed: 6, End: time.Date(2024, 2, 29, 17, 0, 0, 0, time.Local)},
	} {
		b, _ := writeCSV(t, o)
		rows := readCSV(t, b)
		cat := Catalogue(o)
		end := o.End
		if end.IsZero() {
			end = DefaultEnd
		}
		end = end.UTC()
		seen := map[string]bool{}
		r := 0
		freshest := time.Time{}
		for _, s := range cat {
			if seen[s.ID] {
				t.Fatalf("series %s emitted twice", s.ID)
			}
			seen[s.ID] = true
			var prev time.Time
			for j := 0; j < s.Length; j++ {
				row := rows[r]
				r++
				if row[0] != s.ID || row[3] != s.Unit || row[4] != s.Name || row[5] != s.Source || row[6] != s.Frequency {
					t.Fatalf("row %d %q does not match series %+v", r, row, s)
				}
				layout := time.DateOnly
				if s.Frequency == "H" {
					layout = "2006-01-02T15:04:05"
				}
				p, err := time.Parse(layout, row[1])
				if err != nil {
					t.Fatalf("row %d: period %q: %v", r, row[1], err)
				}
				switch s.Frequency {
				case "W":
					if p.Weekday() != time.Monday {
						t.Fatalf("weekly period %s is a %s", row[1], p.Weekday())
					}
				case "M":
					if p.Day() != 1 {
						t.Fatalf("monthly period %s not on day 1", row[1])
					}
				case "A":
					if p.Day() != 1 || p.Month() != 1 {
						t.Fatalf("annual period %s not on Jan 1", row[1])
					}
				}
				if j == 0 && !p.Equal(s.Start) {
					t.Fatalf("%s: first period %s, catalogue start %s", s.ID, p, s.Start)
				}
				if j > 0 {
					var want time.Time
					switch s.Frequency {
					case "H":
						want = prev.Add(time.Hour)
					case "D":
						want = prev.AddDate(0, 0, 1)
					case "W":
						want = prev.AddDate(0, 0, 7)
					case "M":
						want = prev.AddDate(0, 1, 0)
					case "A":
						want = prev.AddDate(1, 0, 0)
					}
					if !p.Equal(want) {
						t.Fatalf("%s: period %s follows %s", s.ID, p, prev)
					}
				}
				prev = p
				v, err := strconv.ParseFloat(row[2], 64)
				dot := strings.IndexByte(row[2], '.')
				if err != nil || v <= 0 || dot != len(row[2])-3 {
					t.Fatalf("bad value %q", row[2])
				}
			}
			if !prev.Equal(s.End) {
				t.Fatalf("%s: last period %s, catalogue end %s", s.ID, prev, s.End)
			}
			if prev.After(end) {
				t.Fatalf("%s: last period %s after End %s", s.ID, prev, end)
			}
			if prev.After(freshest) {
				freshest = prev
			}
		}
		if r != len(rows) {
			t.Fatalf("catalogue covers %d rows, CSV has %d", r, len(rows))
		}
		wantFresh := time.Date(end.Year(), end.Month(), end.Day(), 0, 0, 0, 0, time.UTC)
		if o.Intraday {
			wantFresh = end.Truncate(time.Hour)
		}
		if !freshest.Equal(wantFresh) {
			t.Errorf("freshest period %s, want End %s", freshest, wantFresh)
		}
	}
}

func TestParquetRoundTrip(t *testing.T) {
	defer func(n int) { parquetRowGroupRows = n }(parquetRowGroupRows)
	parquetRowGroupRows = 30_000 // many groups, series split across groups
	o := Options{Series: 1500, Rows: 200_000, Seed: 11, Intraday: true}
	c, _ := writeCSV(t, o)
	want := readCSV(t, c)

	var pq bytes.Buffer
	st, err := WriteParquet(&pq, o)
	if err != nil {
		t.Fatal(err)
	}
	if st.Rows != o.Rows || st.Series != o.Series {
		t.Fatalf("stats %+v", st)
	}
	rdr, err := file.NewParquetReader(bytes.NewReader(pq.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	md := rdr.MetaData()
	if md.NumRows != o.Rows || md.NumRowGroups() != 7 {
		t.Fatalf("parquet has %d rows in %d row groups", md.NumRows, md.NumRowGroups())
	}
	for g := 0; g < md.NumRowGroups(); g++ {
		for i, name := range Columns {
			cc, _ := md.RowGroup(g).ColumnChunk(i)
			if cc.Compression() != parquetCompression {
				t.Errorf("column %s compression %v", name, cc.Compression())
			}
			if name == "value" {
				continue
			}
			if !cc.HasDictionaryPage() {
				t.Errorf("row group %d column %s has no dictionary", g, name)
			}
			for _, es := range cc.EncodingStats() {
				const dictionaryPage = 2 // format.PageType_DICTIONARY_PAGE
				if int(es.PageType) != dictionaryPage && es.Encoding != parquet.Encodings.RLEDict {
					t.Errorf("row group %d column %s: a data page is %v (dictionary fallback)", g, name, es.Encoding)
				}
			}
		}
	}
	rdr.Close()

	tbl, err := pqarrow.ReadTable(context.Background(), bytes.NewReader(pq.Bytes()), nil, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	if got := tbl.Schema(); !slices.EqualFunc(got.Fields(), ParquetSchema.Fields(), func(a, b arrow.Field) bool {
		return a.Name == b.Name && arrow.TypeEqual(a.Type, b.Type) && a.Nullable == b.Nullable
	}) {
		t.Fatalf("schema %v", tbl.Schema())
	}
	tr := array.NewTableReader(tbl, 50_000)
	defer tr.Release()
	r := 0
	var vb []byte
	for tr.Next() {
		rec := tr.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			got := make([]string, len(Columns))
			for c := range Columns {
				switch col := rec.Column(c).(type) {
				case *array.String:
					got[c] = col.Value(i)
				case *array.Float64:
					vb = strconv.AppendFloat(vb[:0], col.Value(i), 'f', 2, 64)
					got[c] = string(vb)
				default:
					t.Fatalf("column %d has type %T", c, col)
				}
			}
			if !slices.Equal(got, want[r]) {
				t.Fatalf("row %d: parquet %q, csv %q", r, got, want[r])
			}
			r++
		}
	}
	if err := tr.Err(); err != nil {
		t.Fatal(err)
	}
	if r != len(want) {
		t.Fatalf("parquet %d rows, csv %d", r, len(want))
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	o := Options{Series: 50, Rows: 2000, Seed: 3}
	for _, name := range []string{"a.csv", "b.parquet", "C.CSV"} {
		path := filepath.Join(dir, name)
		st, err := WriteFile(path, o)
		if err != nil || st.Rows != o.Rows {
			t.Fatalf("%s: %+v %v", name, st, err)
		}
		if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
			t.Fatalf("%s: tmp file left behind", name)
		}
	}
	csvBytes, _ := os.ReadFile(filepath.Join(dir, "a.csv"))
	want, _ := writeCSV(t, o)
	if !bytes.Equal(csvBytes, want) {
		t.Fatal("WriteFile csv differs from WriteCSV")
	}
	if _, err := WriteFile(filepath.Join(dir, "x.json"), o); err == nil {
		t.Fatal("want error for .json")
	}
	if _, err := WriteFile(filepath.Join(dir, "bad.csv"), Options{Series: 2, Rows: 1}); err == nil {
		t.Fatal("want error for invalid options")
	}
	if _, err := os.Stat(filepath.Join(dir, "bad.csv")); !os.IsNotExist(err) {
		t.Fatal("invalid options left a file")
	}
}

func TestAppendCentsMatchesAppendFloat(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(c int64) {
		got := string(appendCents(nil, c))
		want := strconv.FormatFloat(float64(c)/100, 'f', 2, 64)
		if got != want {
			t.Fatalf("cents %d: %s, want %s", c, got, want)
		}
	}
	for _, c := range []int64{1, 9, 10, 99, 100, 101, 999, 1000, 9999, 10000, 123456789, maxCents - 1, maxCents} {
		check(c)
	}
	for i := 0; i < 200_000; i++ {
		check(1 + r.Int64N(int64(math.Pow(10, float64(1+r.IntN(14))))))
	}
}

func TestCalendar(t *testing.T) {
	if d := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Weekday(); d != time.Monday {
		t.Fatalf("0001-01-01 is a %s", d)
	}
	for day := daysFromCivil(1, 1, 1); day < daysFromCivil(9999, 12, 31); day += 13 {
		y, m, d := civilFromDays(day)
		tm := time.Unix(day*86400, 0).UTC()
		if tm.Year() != y || int(tm.Month()) != m || tm.Day() != d {
			t.Fatalf("day %d: %d-%d-%d, time says %s", day, y, m, d, tm)
		}
		if daysFromCivil(y, m, d) != day {
			t.Fatalf("round trip %d", day)
		}
	}
	for f := 0; f < numFreq; f++ {
		for _, tm := range []time.Time{DefaultEnd, time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC)} {
			b := lastBucket(f, tm)
			if bt := bucketTime(f, b); bt.After(tm) || !bucketTime(f, b+1).After(tm) {
				t.Errorf("freq %s: bucket of %s starts %s", freqCode[f], tm, bt)
			}
			c := newCursor(f, b)
			for i := 0; i < 400; i++ {
				want := bucketTime(f, b+int64(i))
				if got := string(c.appendPeriod(nil)); got[:10] != want.Format(time.DateOnly) {
					t.Fatalf("freq %s: cursor %s, want %s", freqCode[f], got, want)
				}
				c.next()
			}
		}
	}
}

func BenchmarkWriteCSV(b *testing.B) {
	o := Options{Series: 20_000, Rows: 1_500_000, Seed: 1, Intraday: true}
	var bytesOut countWriter
	for b.Loop() {
		if _, err := WriteCSV(&bytesOut, o); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(o.Rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.SetBytes(int64(bytesOut) / int64(b.N))
}

func BenchmarkWriteParquet(b *testing.B) {
	o := Options{Series: 20_000, Rows: 1_500_000, Seed: 1, Intraday: true}
	var bytesOut countWriter
	for b.Loop() {
		if _, err := WriteParquet(&bytesOut, o); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(o.Rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.SetBytes(int64(bytesOut) / int64(b.N))
}

func BenchmarkCatalogue(b *testing.B) {
	o := Options{Series: 175_000, Rows: 13_800_000, Seed: 1, Intraday: true}
	for b.Loop() {
		if len(Catalogue(o)) != o.Series {
			b.Fatal("short catalogue")
		}
	}
	b.ReportMetric(float64(o.Series)*float64(b.N)/b.Elapsed().Seconds(), "series/s")
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

func TestDisambiguation(t *testing.T) {
	defer func(n int) { maxRedraws = n }(maxRedraws)
	maxRedraws = 0 // every collision gets a numeric suffix
	o := Options{Series: 20_000, Rows: 100_000, Seed: 4, Intraday: true}
	p, err := newPlan(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.disamb) == 0 {
		t.Fatal("no collisions to disambiguate")
	}
	cat := Catalogue(o)
	ids := map[string]bool{}
	suffixed := 0
	for _, s := range cat {
		if ids[s.ID] {
			t.Fatalf("duplicate id %s", s.ID)
		}
		ids[s.ID] = true
		if strings.HasSuffix(s.Name, ")") && strings.Contains(s.Name, ", "+freqWordOf(s.Frequency)+" (") {
			suffixed++
			if !strings.Contains(s.ID, "-") || !strings.HasSuffix(s.ID, "."+s.Frequency) {
				t.Fatalf("disambiguated id %s", s.ID)
			}
		}
	}
	if suffixed != len(p.disamb) {
		t.Fatalf("%d suffixed names, %d disambiguated ids", suffixed, len(p.disamb))
	}
	// rows agree with the catalogue
	b, _ := writeCSV(t, o)
	rows := readCSV(t, b)
	r := 0
	for _, s := range cat {
		for range s.Length {
			if rows[r][0] != s.ID || rows[r][4] != s.Name {
				t.Fatalf("row %d: %q vs %s", r, rows[r], s.ID)
			}
			r++
		}
	}
	t.Logf("%d of %d ids disambiguated, e.g. %v", len(p.disamb), len(cat), func() string {
		for _, s := range cat {
			if strings.Contains(s.Name, ", "+freqWordOf(s.Frequency)+" (") {
				return s.ID + " / " + s.Name
			}
		}
		return ""
	}())
}
