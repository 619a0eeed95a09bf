package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/energyscope/localcache/format"
)

// testRow is one ingest row in a format-neutral form; nil means absent
// (CSV: empty cell, JSON: no field or null, Arrow: null).
type testRow struct {
	id     string
	period *string
	value  *float64
	op     *string
}

func sp(s string) *string   { return &s }
func fp(v float64) *float64 { return &v }

func rowsCSV(rows []testRow) []byte {
	var b bytes.Buffer
	b.WriteString("series_id,period,value,op\n")
	for _, r := range rows {
		p, v, o := "", "", ""
		if r.period != nil {
			p = *r.period
		}
		if r.value != nil {
			v = strconv.FormatFloat(*r.value, 'g', -1, 64)
		}
		if r.op != nil {
			o = *r.op
		}
		fmt.Fprintf(&b, "%s,%s,%s,%s\n", csvQuote(r.id), csvQuote(p), v, csvQuote(o))
	}
	return b.Bytes()
}

func csvQuote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func rowsJSON(rows []testRow) []byte {
	var out []map[string]any
	for _, r := range rows {
		m := map[string]any{"series_id": r.id}
		if r.period != nil {
			m["period"] = *r.period
		}
		if r.value != nil {
			if math.IsInf(*r.value, 0) { // JSON has no Inf: the nearest is an overflowing literal
				m["value"] = json.RawMessage("1e999")
			} else {
				m["value"] = *r.value
			}
		}
		if r.op != nil {
			m["op"] = *r.op
		}
		out = append(out, m)
	}
	b, err := json.Marshal(map[string]any{"rows": out})
	if err != nil {
		panic(err)
	}
	return b
}

func rowsArrow(t testing.TB, rows []testRow) []byte {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "series_id", Type: arrow.BinaryTypes.String},
		{Name: "period", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "op", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), sc)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.StringBuilder).Append(r.id)
		if r.period != nil {
			b.Field(1).(*array.StringBuilder).Append(*r.period)
		} else {
			b.Field(1).AppendNull()
		}
		if r.value != nil {
			b.Field(2).(*array.Float64Builder).Append(*r.value)
		} else {
			b.Field(2).AppendNull()
		}
		if r.op != nil {
			b.Field(3).(*array.StringBuilder).Append(*r.op)
		} else {
			b.Field(3).AppendNull()
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(sc))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return buf.Bytes()
}

// parseAll parses the same rows as CSV, JSON and an Arrow stream.
func parseAll(t *testing.T, rows []testRow) map[string]func() ([]format.Record, error) {
	return map[string]func() ([]format.Record, error){
		"csv": func() ([]format.Record, error) {
			return ParseRowsCSV(bytes.NewReader(rowsCSV(rows)), "body", RowColumns{}, false)
		},
		"json":  func() ([]format.Record, error) { return ParseRowsJSON(bytes.NewReader(rowsJSON(rows))) },
		"arrow": func() ([]format.Record, error) { return ParseRowsArrow(bytes.NewReader(rowsArrow(t, rows))) },
	}
}

// TestIngestFormatsAgree feeds the same rows to the three ingest formats:
// they accept the same good rows as the same records and refuse the same
// bad ones with ErrBadInput. Arrow used to store a null period as
// 1970-01-01 and apply an unknown op as an upsert.
func TestIngestFormatsAgree(t *testing.T) {
	good := []testRow{
		{id: "A", period: sp("2024-01-01"), value: fp(1.5)},
		{id: "A", period: sp("2024-01-02"), value: fp(2), op: sp("upsert")},
		{id: "B", period: sp("2024-01-01"), op: sp("delete")},
		{id: "Zürich", period: sp("2024-01-01T05:00:00Z"), value: fp(-3)},
	}
	var want []format.Record
	for name, parse := range parseAll(t, good) {
		recs, err := parse()
		if err != nil {
			t.Fatalf("%s: good rows refused: %v", name, err)
		}
		if want == nil {
			want = recs
			continue
		}
		if fmt.Sprint(recs) != fmt.Sprint(want) {
			t.Fatalf("%s: %v, another format gave %v", name, recs, want)
		}
	}
	bad := []struct {
		name string
		row  testRow
		want string
	}{
		{"null period", testRow{id: "A", value: fp(1)}, "no period"},
		{"unknown op", testRow{id: "A", period: sp("2024-01-01"), value: fp(1), op: sp("merge")}, `op "merge": want upsert or delete`},
		{"upsert without value", testRow{id: "A", period: sp("2024-01-01")}, "no value"},
		{"infinite value", testRow{id: "A", period: sp("2024-01-01"), value: fp(math.Inf(1))}, "not a finite number"},
		{"bad period", testRow{id: "A", period: sp("2024-13-01"), value: fp(1)}, "not a recognised date"},
		{"empty id", testRow{id: "", period: sp("2024-01-01"), value: fp(1)}, "bad series id: empty"},
		{"NUL in id", testRow{id: "A\x00B", period: sp("2024-01-01"), value: fp(1)}, "bad series id: NUL byte"},
		{"id over 1024 bytes", testRow{id: strings.Repeat("x", format.MaxSeriesIDLen+1), period: sp("2024-01-01"), value: fp(1)}, "longer than 1024"},
	}
	for _, tc := range bad {
		rows := append([]testRow{good[0]}, tc.row)
		for name, parse := range parseAll(t, rows) {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				recs, err := parse()
				if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %d records, err %v; want ErrBadInput with %q", len(recs), err, tc.want)
				}
			})
		}
	}
}

// TestIngestJSONTrailingData: a JSON body is one object; anything after it
// used to be ignored.
func TestIngestJSONTrailingData(t *testing.T) {
	body := `{"rows":[{"series_id":"A","period":"2024-01-01","value":1}]}`
	for _, tail := range []string{"garbage", `{"rows":[]}`, "]", `,{"x":1}`} {
		if _, err := ParseRowsJSON(strings.NewReader(body + tail)); !errors.Is(err, ErrBadInput) {
			t.Errorf("trailing %q: err %v, want ErrBadInput", tail, err)
		}
	}
	if recs, err := ParseRowsJSON(strings.NewReader(body + " \n\t")); err != nil || len(recs) != 1 {
		t.Fatalf("trailing white space: %v", err)
	}
}

// TestIngestTooManyRows: a request over MaxIngestRows is ErrTooLarge, not
// bad input.
func TestIngestTooManyRows(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("series_id,period,value\n")
	for i := range MaxIngestRows + 1 {
		fmt.Fprintf(&b, "A,%s,1\n", time.Unix(int64(1_700_000_000+i*3600), 0).UTC().Format(time.RFC3339))
	}
	_, err := ParseRowsCSV(&b, "body", RowColumns{}, false)
	if !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrBadInput) {
		t.Fatalf("err %v, want ErrTooLarge", err)
	}
}

// forgedStream is an Arrow IPC stream of one record batch whose header
// claims a 2^40-byte body (cook's testdata).
func forgedStream(t *testing.T) []byte {
	b, err := os.ReadFile("cook/testdata/forged-body-2p40.arrows")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestIngestArrowForgedLength: the 704-byte stream that claims a 2^40-byte
// body is refused with ErrBadInput (it killed es serve with a fatal
// out-of-memory), over HTTP as POST rows and as PUT of an Arrow file, and
// the server keeps serving.
func TestIngestArrowForgedLength(t *testing.T) {
	data := forgedStream(t)
	if _, err := ParseRowsArrow(bytes.NewReader(data)); !errors.Is(err, ErrBadInput) {
		t.Fatalf("ParseRowsArrow: %v, want ErrBadInput", err)
	}
	f := newFixture(t, t.TempDir())
	defer f.close()
	csvBody, _ := os.ReadFile(stocksCSV)
	if code, body := f.do("PUT", "/v1/datasets/stocks?series_col=symbol&period_col=date&value_col=price&frequency=M", f.write, "text/csv", bytes.NewReader(csvBody), ""); code != 200 {
		t.Fatalf("upload: %d %s", code, body)
	}
	if code, body := f.do("POST", "/v1/datasets/stocks/rows", f.write, "application/vnd.apache.arrow.stream", bytes.NewReader(data), ""); code != 400 {
		t.Fatalf("POST forged stream: %d %s", code, body)
	}
	if code, body := f.do("PUT", "/v1/datasets/forged?format=arrow", f.write, "application/vnd.apache.arrow.file", bytes.NewReader(data), ""); code != 400 {
		t.Fatalf("PUT forged stream: %d %s", code, body)
	}
	if code, body := f.do("GET", "/v1/series/MSFT?from=2000-01-01&to=2000-01-31", f.read, "", nil, ""); code != 200 || !strings.Contains(body, "39.81") {
		t.Fatalf("server after forged input: %d %s", code, body)
	}
}

// TestIngestNewHourlySeries: 200,000 hourly rows for a new series without
// a frequency column are stored as 200,000 hourly points (they were folded
// into 8,334 daily ones); irregular daily rows stay daily; a batch whose
// periods would collapse even hourly is refused and stores nothing.
func TestIngestNewHourlySeries(t *testing.T) {
	f := newFixture(t, t.TempDir())
	defer f.close()
	csvBody, _ := os.ReadFile(stocksCSV)
	if code, body := f.do("PUT", "/v1/datasets/stocks?series_col=symbol&period_col=date&value_col=price&frequency=M", f.write, "text/csv", bytes.NewReader(csvBody), ""); code != 200 {
		t.Fatalf("upload: %d %s", code, body)
	}
	const n = 200_000
	var b bytes.Buffer
	b.WriteString("series_id,period,value\n")
	t0 := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		fmt.Fprintf(&b, "HOURLY,%s,%d\n", t0.Add(time.Duration(i)*time.Hour).Format(time.RFC3339), i)
	}
	if code, body := f.do("POST", "/v1/datasets/stocks/rows", f.write, "text/csv", &b, ""); code != 200 {
		t.Fatalf("ingest: %d %s", code, body)
	}
	in, err := f.srv.Store().Info("stocks:HOURLY")
	if err != nil {
		t.Fatal(err)
	}
	if in.Count != n || in.Frequency != format.Hourly {
		t.Fatalf("stored %d points at frequency %q, want %d hourly", in.Count, in.Frequency, n)
	}
	// An existing series keeps its frequency: a monthly series gets no
	// inferred metadata from a batch of daily rows.
	recs := []format.Record{{Op: format.Upsert, SeriesID: "MSFT", Period: t0.Unix(), Value: 1}, {Op: format.Upsert, SeriesID: "MSFT", Period: t0.Unix() + 86400, Value: 2}}
	if n, err := inferNewSeries(recs, func(id string) (bool, error) { return f.srv.Store().Has("stocks", id) }); err != nil || n != 0 || recs[0].Meta != nil {
		t.Fatalf("existing series: %v, meta %+v", err, recs[0].Meta)
	}

	// Irregular daily rows: cook's median spacing says weekly, which
	// would fold Jan 1 and Jan 2 into one week; the delta takes daily.
	var irregular []format.Record
	for _, d := range []int{1, 2, 9, 16, 23, 30, 37, 44} {
		irregular = append(irregular, format.Record{Op: format.Upsert, SeriesID: "IRR", Period: t0.AddDate(0, 0, d).Unix(), Value: 1})
	}
	if got := format.InferFrequency([]int64{irregular[0].Period, irregular[1].Period, irregular[2].Period, irregular[3].Period}); got != format.Weekly {
		t.Fatalf("cook's inference: %q, want weekly (the case this covers)", got)
	}
	if n, err := inferNewSeries(irregular, func(string) (bool, error) { return false, nil }); err != nil || n != 1 || irregular[0].Meta.Frequency != format.Daily {
		t.Fatalf("irregular daily rows: %v, %d, meta %+v", err, n, irregular[0].Meta)
	}

	// Half-hourly periods of a new series collapse even hourly, the
	// finest frequency: refused.
	half := "series_id,period,value\nHALF,2024-01-01T00:00:00Z,1\nHALF,2024-01-01T00:30:00Z,2\nHALF,2024-01-01T01:00:00Z,3\n"
	if code, body := f.do("POST", "/v1/datasets/stocks/rows", f.write, "text/csv", strings.NewReader(half), ""); code != 400 || !strings.Contains(body, "HALF") {
		t.Fatalf("half-hourly new series: %d %s", code, body)
	}
	recs, err = ParseRowsCSV(strings.NewReader(half), "body", RowColumns{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.srv.Ingest("stocks", recs); !errors.Is(err, ErrBadInput) || !errors.Is(err, ErrNoFrequency) {
		t.Fatalf("Ingest: %v, want ErrBadInput and ErrNoFrequency", err)
	}
	if ok, _ := f.srv.Store().Has("stocks", "HALF"); ok {
		t.Fatal("a refused batch created its series")
	}
	// With a frequency column the same rows are accepted (and the delta
	// normalizes them as asked).
	withFreq := "series_id,period,value,frequency\nHALF,2024-01-01T00:00:00Z,1,H\nHALF,2024-01-01T00:30:00Z,2,H\n"
	if code, body := f.do("POST", "/v1/datasets/stocks/rows", f.write, "text/csv", strings.NewReader(withFreq), ""); code != 200 {
		t.Fatalf("with a frequency: %d %s", code, body)
	}
}

// The ingest decoders take bytes from the network: whatever they get they
// must return (no panic, no allocation beyond the input's size), and an
// error must be ErrBadInput or ErrTooLarge.
func checkParsed(t *testing.T, recs []format.Record, err error) {
	if err != nil {
		if !errors.Is(err, ErrBadInput) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("error %v is neither ErrBadInput nor ErrTooLarge", err)
		}
		return
	}
	if len(recs) == 0 {
		t.Fatal("no error and no rows")
	}
	for i := range recs {
		recs[i].Seq = uint64(i) + 1
	}
	if err := format.ValidateRecords(recs); err != nil {
		t.Fatalf("parsed rows fail validation: %v", err)
	}
}

func FuzzParseRowsArrow(f *testing.F) {
	good := []testRow{{id: "A", period: sp("2024-01-01"), value: fp(1)}, {id: "B", period: sp("2024-01-01T01:00:00Z"), op: sp("delete")}}
	f.Add(rowsArrow(f, good))
	f.Add(rowsArrow(f, []testRow{{id: "A", value: fp(1)}}))
	if b, err := os.ReadFile("cook/testdata/forged-body-2p40.arrows"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		recs, err := ParseRowsArrow(bytes.NewReader(in))
		checkParsed(t, recs, err)
	})
}

func FuzzParseRowsJSON(f *testing.F) {
	f.Add(rowsJSON([]testRow{{id: "A", period: sp("2024-01-01"), value: fp(1)}, {id: "B", period: sp("2024-01-01"), op: sp("delete")}}))
	f.Add([]byte(`{"rows":[{"series_id":"A","period":1700000000,"value":1e308,"frequency":"H"}]} `))
	f.Add([]byte(`{"rows":[{"series_id":"A","period":"2024-01-01","value":1}]}garbage`))
	f.Add([]byte(`{"rows":[{"series_id":"A","period":null,"value":"1"}]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		recs, err := ParseRowsJSON(bytes.NewReader(in))
		checkParsed(t, recs, err)
	})
}

func FuzzParseRowsCSV(f *testing.F) {
	f.Add(rowsCSV([]testRow{{id: "A", period: sp("2024-01-01"), value: fp(1)}, {id: "B", period: sp("2024-01-01"), op: sp("delete")}}), false)
	f.Add([]byte("series_id,period,value,unit,frequency\nA,2024-01,1,USD,M\n"), false)
	f.Add([]byte("series_id,period\nA,2024-01-01\n"), true)
	f.Add([]byte("series_id,period,value,value\nA,2024-01-01,1,2\n"), false)
	f.Fuzz(func(t *testing.T, in []byte, del bool) {
		recs, err := ParseRowsCSV(bytes.NewReader(in), "fuzz", RowColumns{}, del)
		checkParsed(t, recs, err)
	})
}

// TestIngestArrowNullDatePeriod: a null in a date32 or timestamp period
// column used to be read as its zero, 1970-01-01, and stored.
func TestIngestArrowNullDatePeriod(t *testing.T) {
	for _, typ := range []arrow.DataType{arrow.FixedWidthTypes.Date32, &arrow.TimestampType{Unit: arrow.Second, TimeZone: "UTC"}} {
		sc := arrow.NewSchema([]arrow.Field{
			{Name: "series_id", Type: arrow.BinaryTypes.String},
			{Name: "period", Type: typ, Nullable: true},
			{Name: "value", Type: arrow.PrimitiveTypes.Float64},
		}, nil)
		b := array.NewRecordBuilder(memory.NewGoAllocator(), sc)
		b.Field(0).(*array.StringBuilder).AppendValues([]string{"A", "A"}, nil)
		switch pb := b.Field(1).(type) {
		case *array.Date32Builder:
			pb.Append(arrow.Date32FromTime(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)))
		case *array.TimestampBuilder:
			pb.Append(arrow.Timestamp(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Unix()))
		}
		b.Field(1).AppendNull()
		b.Field(2).(*array.Float64Builder).AppendValues([]float64{1, 2}, nil)
		rec := b.NewRecordBatch()
		var buf bytes.Buffer
		w := ipc.NewWriter(&buf, ipc.WithSchema(sc))
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		w.Close()
		rec.Release()
		b.Release()
		recs, err := ParseRowsArrow(&buf)
		if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "arrow row 1: no period") {
			t.Fatalf("%s: %d records (%v), err %v; want the null period refused", typ, len(recs), recs, err)
		}
	}
}
