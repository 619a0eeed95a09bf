package functions

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// transformSource is a small hand-made store for the transform and calendar tests:
//
//	P  daily prices on weekdays: Mon 2024-01-01 100, Tue 110, Wed 99, Thu 99, Fri 120, Mon 01-08 150
//	S  weekly storage dated Mondays: 2023-12-25 1000, 2024-01-01 1010, 2024-01-08 1030
//	M  monthly 2022-01 .. 2024-03, the value the month's number from 1; 2023-02 missing
//	N  daily 2024-01-01.. 04: 1, NaN, 3, 6
//	Z  daily 2024-01-01.. 03: 0, 5, -5
//	W  one point on Saturday 2024-01-06: 5
func transformSource() *memSource {
	m := &memSource{series: map[string]*memSeries{}}
	day := func(y int, mo time.Month, d int) int64 { return unix(y, mo, d, 0, 0, 0) }
	for i, v := range []float64{100, 110, 99, 99, 120} {
		m.add("P", SeriesInfo{Name: "Price", Unit: "USD/bbl", Frequency: "D"}, day(2024, 1, 1+i), v)
	}
	m.add("P", SeriesInfo{}, day(2024, 1, 8), 150)
	for i, v := range []float64{1000, 1010, 1030} {
		m.add("S", SeriesInfo{Name: "Storage", Unit: "Bcf", Frequency: "W"}, day(2023, 12, 25+7*i), v)
	}
	for k := 0; k < 27; k++ {
		if k == 13 { // 2023-02
			continue
		}
		m.add("M", SeriesInfo{Name: "Monthly", Unit: "GWh", Frequency: "M"}, day(2022+k/12, time.Month(k%12+1), 1), float64(k+1))
	}
	for i, v := range []float64{1, math.NaN(), 3, 6} {
		m.add("N", SeriesInfo{Frequency: "D"}, day(2024, 1, 1+i), v)
	}
	for i, v := range []float64{0, 5, -5} {
		m.add("Z", SeriesInfo{Frequency: "D"}, day(2024, 1, 1+i), v)
	}
	m.add("W", SeriesInfo{Frequency: "D"}, day(2024, 1, 6), 5)
	m.finish()
	return m
}

func TestGetTransforms(t *testing.T) {
	now := time.Date(2024, 6, 3, 12, 0, 0, 0, time.UTC)
	e := &Engine{Src: transformSource(), Now: func() time.Time { return now }}
	d := func(iso string) float64 { return serial(t, iso) }
	runCases(t, e, []callCase{
		// Changes look back before the start: the first row has a value.
		{name: "chg=diff", args: []any{"P", "2024-01-02", "2024-01-05", "chg=diff"}, want: [][]any{
			{d("2024-01-02"), 10.0}, {d("2024-01-03"), -11.0}, {d("2024-01-04"), 0.0}, {d("2024-01-05"), 21.0}}},
		{name: "chg=pct", args: []any{"P", "2024-01-02", "2024-01-05", "chg=pct"}, want: [][]any{
			{d("2024-01-02"), 10.0}, {d("2024-01-03"), -10.0}, {d("2024-01-04"), 0.0}, {d("2024-01-05"), (120.0/99 - 1) * 100}}},
		{name: "chg=log", args: []any{"P", "2024-01-02", "2024-01-03", "chg=log"}, want: [][]any{
			{d("2024-01-02"), math.Log(1.1)}, {d("2024-01-03"), math.Log(0.9)}}},
		{name: "chg at the first point", args: []any{"P", "", "2024-01-02", "chg=diff"}, want: [][]any{
			{d("2024-01-01"), nil}, {d("2024-01-02"), 10.0}}},
		{name: "ma=3 looks back", args: []any{"P", "2024-01-03", "2024-01-05", "ma=3"}, want: [][]any{
			{d("2024-01-03"), 103.0}, {d("2024-01-04"), 308.0 / 3}, {d("2024-01-05"), 106.0}}},
		{name: "ma=3 from the first point", args: []any{"P", "", "2024-01-03", "ma=3"}, want: [][]any{
			{d("2024-01-01"), nil}, {d("2024-01-02"), nil}, {d("2024-01-03"), 103.0}}},
		{name: "rebase", args: []any{"P", "2024-01-02", "2024-01-05", "rebase=100"}, want: [][]any{
			{d("2024-01-02"), 100.0}, {d("2024-01-03"), 90.0}, {d("2024-01-04"), 90.0}, {d("2024-01-05"), 1200.0 / 11}}},
		{name: "scale", args: []any{"P", "2024-01-01", "2024-01-02", "scale=0.001"}, want: [][]any{
			{d("2024-01-01"), 0.1}, {d("2024-01-02"), 0.11}}},
		{name: "rebase then scale", args: []any{"P", "2024-01-02", "2024-01-03", "scale=2;rebase=100"}, want: [][]any{
			{d("2024-01-02"), 200.0}, {d("2024-01-03"), 180.0}}},
		{name: "chg then ma", args: []any{"P", "2024-01-04", "2024-01-05", "chg=diff", "ma=2"}, want: [][]any{
			{d("2024-01-04"), -5.5}, {d("2024-01-05"), 10.5}}},
		// yoy: the same month a year before; 2023-02 is missing, so 2024-02 is empty.
		{name: "yoy=diff", args: []any{"M", "2024-01", "2024-03", "yoy=diff"}, want: [][]any{
			{d("2024-01-01"), 12.0}, {d("2024-02-01"), nil}, {d("2024-03-01"), 12.0}}},
		{name: "yoy=pct", args: []any{"M", "2023-03", "2023-03", "yoy=pct"}, want: [][]any{
			{d("2023-03-01"), (15.0/3 - 1) * 100}}},
		{name: "yoy without a year before", args: []any{"M", "2022-12", "2023-01", "yoy=diff"}, want: [][]any{
			{d("2022-12-01"), nil}, {d("2023-01-01"), 12.0}}},
		{name: "yoy of re-sampled quarters", args: []any{"M", "2023Q4", "2023Q4", "per=Q", "agg=sum", "yoy=diff"}, want: [][]any{
			{d("2023-10-01"), 36.0}}}, // (22+23+24) - (10+11+12)
		// NaN is not a point: chg skips it.
		{name: "NaN skipped", args: []any{"N", "chg=diff"}, want: [][]any{
			{d("2024-01-01"), nil}, {d("2024-01-02"), nil}, {d("2024-01-03"), 2.0}, {d("2024-01-04"), 3.0}}},
		// A change from 0, a log of a negative: empty, not an error or infinity.
		{name: "pct from zero", args: []any{"Z", "chg=pct"}, want: [][]any{
			{d("2024-01-01"), nil}, {d("2024-01-02"), nil}, {d("2024-01-03"), -200.0}}},
		{name: "log of negative", args: []any{"Z", "chg=log"}, want: [][]any{
			{d("2024-01-01"), nil}, {d("2024-01-02"), nil}, {d("2024-01-03"), nil}}},
		{name: "rebase on zero", args: []any{"Z", "rebase=100"}, want: [][]any{
			{d("2024-01-01"), nil}, {d("2024-01-02"), nil}, {d("2024-01-03"), nil}}},
		{name: "empty range", args: []any{"P", "2024-02-01", "2024-02-28", "chg=diff"}, wantErr: na("no data for P between 2024-02-01 and 2024-02-28")},
		{name: "transform then last", args: []any{"P", "chg=diff", "last=2", "order=desc"}, want: [][]any{
			{d("2024-01-08"), 30.0}, {d("2024-01-05"), 21.0}}},

		// Calendars: daily prices and weekly storage on one business-day column.
		{name: "weekdays fill=prev", args: []any{"P,S", "2024-01-03", "2024-01-08", "days=weekdays", "fill=prev"}, want: [][]any{
			{d("2024-01-03"), 99.0, 1010.0}, // storage carried from Monday, before the start
			{d("2024-01-04"), 99.0, 1010.0},
			{d("2024-01-05"), 120.0, 1010.0},
			{d("2024-01-08"), 150.0, 1030.0}}},
		{name: "weekdays fill=prev chg", args: []any{"P,S", "2024-01-03", "2024-01-08", "per=D;days=weekdays;fill=prev;chg=diff"}, want: [][]any{
			{d("2024-01-03"), -11.0, 0.0}, {d("2024-01-04"), 0.0, 0.0}, {d("2024-01-05"), 21.0, 0.0}, {d("2024-01-08"), 30.0, 20.0}}},
		{name: "all days fill=prev", args: []any{"P", "2024-01-05", "2024-01-08", "days=all", "fill=prev"}, want: [][]any{
			{d("2024-01-05"), 120.0}, {d("2024-01-06"), 120.0}, {d("2024-01-07"), 120.0}, {d("2024-01-08"), 150.0}}},
		{name: "all days without fill", args: []any{"S", "2024-01-01", "2024-01-03", "days=all"}, want: [][]any{
			{d("2024-01-01"), 1010.0}, {d("2024-01-02"), nil}, {d("2024-01-03"), nil}}},
		{name: "weekly calendar of monthly data", args: []any{"M", "2024-01-01", "2024-01-31", "per=W;days=all;fill=prev"}, want: [][]any{
			{d("2024-01-01"), 25.0}, {d("2024-01-08"), 25.0}, {d("2024-01-15"), 25.0}, {d("2024-01-22"), 25.0}, {d("2024-01-29"), 25.0}}},
		{name: "weekend point on Monday", args: []any{"W,P", "2024-01-05", "2024-01-08", "days=weekdays"}, want: [][]any{
			{d("2024-01-05"), nil, 120.0}, {d("2024-01-08"), 5.0, 150.0}}},
		{name: "calendar ma over filled days", args: []any{"S", "2024-01-02", "2024-01-03", "days=weekdays;fill=prev;ma=2"}, want: [][]any{
			{d("2024-01-02"), 1010.0}, {d("2024-01-03"), 1010.0}}},
		{name: "calendar from the first point", args: []any{"P", "0001-01-01", "2024-01-31", "days=weekdays"}, check: rows(23)},
		{name: "calendar to the end, not past today", args: []any{"S", "2024-01-08", "2030", "days=weekdays;fill=prev"}, check: func(t *testing.T, v [][]any) {
			last := v[len(v)-1] // today, Monday 2024-06-03
			if v[0][0] != d("2024-01-08") || last[0] != d("2024-06-03") || last[1] != 1030.0 || len(v) != 106 {
				t.Fatalf("%v", show(v))
			}
		}},
		{name: "fill=zero", args: []any{"P,S", "2024-01-01", "2024-01-03", "fill=zero"}, want: [][]any{
			{d("2024-01-01"), 100.0, 1010.0}, {d("2024-01-02"), 110.0, 0.0}, {d("2024-01-03"), 99.0, 0.0}}},
		{name: "fill=zero keeps a failed column's error", args: []any{"P,NOPE", "2024-01-01", "2024-01-01", "fill=zero"}, want: [][]any{
			{d("2024-01-01"), 100.0, na(`series "NOPE" not found`)}}},
		{name: "fill=prev looks back", args: []any{"S,P", "2024-01-02", "2024-01-02", "fill=prev"}, want: [][]any{
			{d("2024-01-02"), 1010.0, 110.0}}},

		// Headers.
		{name: "headers=all", args: []any{"P,S", "2024-01-01", "2024-01-01", "headers=all"}, want: [][]any{
			{"Date", "P", "S"}, {nil, "Price", "Storage"}, {nil, "USD/bbl", "Bcf"}, {d("2024-01-01"), 100.0, 1010.0}}},
		{name: "headers=unit transposed", args: []any{"P,S", "2024-01-01", "2024-01-01", "headers=unit;transpose=y"}, want: [][]any{
			{"Date", d("2024-01-01")}, {"USD/bbl", 100.0}, {"Bcf", 1010.0}}},
		{name: "headers=name+id no dates", args: []any{"P", "2024-01-01", "2024-01-01", "headers=name+id;dates=n"}, want: [][]any{
			{"P"}, {"Price"}, {100.0}}},
		{name: "headers=n", args: []any{"P", "2024-01-01", "2024-01-01", "headers=n"}, want: [][]any{{d("2024-01-01"), 100.0}}},

		{name: "bad chg", args: []any{"P", "chg=ratio"}, wantErr: &CellError{Code: CodeValue, Message: "option chg=ratio: want diff, pct or log"}},
		{name: "bad ma", args: []any{"P", "ma=-3"}, wantErr: &CellError{Code: CodeValue, Message: "option ma=-3: want a whole number from 1 to 10000"}},
	})
}

// TestGetCalendarBounded: a calendar longer than the cell limit is refused before it is
// built, unless last= keeps only its end.
func TestGetCalendarBounded(t *testing.T) {
	m := &memSource{series: map[string]*memSeries{}}
	m.add("OLD", SeriesInfo{}, unix(1, 1, 1, 0, 0, 0), 1)
	m.add("OLD", SeriesInfo{}, unix(9999, 12, 31, 0, 0, 0), 2)
	m.finish()
	e := &Engine{Src: m, MaxCells: 1000}
	r := e.Call("ES.Get", []any{"OLD", "days=all;fill=prev"})
	if r.Err == nil || r.Err.Code != CodeNum {
		t.Fatalf("a calendar of 3.6M days: %+v", r.Err)
	}
	r = e.Call("ES.Get", []any{"OLD", "days=all;fill=prev;last=3"})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if err := sameCells(r.Value, [][]any{{serial(t, "9999-12-29"), 1.0}, {serial(t, "9999-12-30"), 1.0}, {serial(t, "9999-12-31"), 2.0}}); err != nil {
		t.Fatal(err)
	}
}

// randomSeries is n daily points from 2020-01-01 with values in [1, 101).
func randomSeries(rng *rand.Rand, n int) *memSource {
	m := &memSource{series: map[string]*memSeries{}}
	for i := range n {
		m.add("R", SeriesInfo{}, unix(2020, 1, 1+i, 0, 0, 0), 1+100*rng.Float64())
	}
	m.add("C", SeriesInfo{}, unix(2020, 1, 1, 0, 0, 0), 7.3)
	for i := 1; i < n; i++ {
		m.add("C", SeriesInfo{}, unix(2020, 1, 1+i, 0, 0, 0), 7.3)
	}
	m.finish()
	return m
}

func column1(t *testing.T, e *Engine, args ...any) []float64 {
	t.Helper()
	r := e.Call("ES.Get", args)
	if r.Err != nil {
		t.Fatalf("%v: %v", args, r.Err)
	}
	out := make([]float64, len(r.Value))
	for i, row := range r.Value {
		out[i] = math.NaN()
		if f, ok := row[len(row)-1].(float64); ok {
			out[i] = f
		}
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestTransformProperties holds the transforms to identities on random series.
func TestTransformProperties(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := 2 + rng.IntN(300)
		src := randomSeries(rng, n)
		e := &Engine{Src: src}
		x := column1(t, e, "R")
		// chg=diff summed from the first point gives the series back.
		diff := column1(t, e, "R", "chg=diff")
		sum := x[0]
		for i := 1; i < n; i++ {
			sum += diff[i]
			if !near(sum, x[i]) {
				t.Fatalf("seed %d: cumulative chg=diff at %d = %v, want %v", seed, i, sum, x[i])
			}
		}
		// chg=log sums to the log of the whole change.
		lg := column1(t, e, "R", "chg=log")
		var ls float64
		for i := 1; i < n; i++ {
			ls += lg[i]
		}
		if !near(ls, math.Log(x[n-1]/x[0])) {
			t.Fatalf("seed %d: sum of chg=log %v, want %v", seed, ls, math.Log(x[n-1]/x[0]))
		}
		// rebase then scale: the first value is rebase*scale, ratios are kept.
		rs := column1(t, e, "R", "rebase=100;scale=0.5")
		for i := range x {
			if !near(rs[i], 50*x[i]/x[0]) {
				t.Fatalf("seed %d: rebase;scale at %d = %v, want %v", seed, i, rs[i], 50*x[i]/x[0])
			}
		}
		// ma over a constant series is the constant once the window is full.
		k := 1 + rng.IntN(n)
		ma := column1(t, e, "C", "ma="+itoa(k))
		for i := range ma {
			if i < k-1 && !math.IsNaN(ma[i]) || i >= k-1 && !near(ma[i], 7.3) {
				t.Fatalf("seed %d: ma=%d of a constant at %d = %v", seed, k, i, ma[i])
			}
		}
		// A window of k, looked back over, is the same wherever the range starts.
		if n > k+1 {
			start := k + rng.IntN(n-k)
			part := column1(t, e, "R", formatDay(unix(2020, 1, 1+start, 0, 0, 0)), "ma="+itoa(k))
			whole := column1(t, e, "R", "ma="+itoa(k))
			for i := range part {
				if !near(part[i], whole[start+i]) {
					t.Fatalf("seed %d: ma=%d from %d: %v, whole %v", seed, k, start, part[i], whole[start+i])
				}
			}
		}
	}
}

func itoa(n int) string { return formatNumber(float64(n)) }

func formatDay(t int64) string { return time.Unix(t, 0).UTC().Format("2006-01-02") }

// TestFrameTransforms: Frame (the workbook export) goes through the same steps.
func TestFrameTransforms(t *testing.T) {
	e := &Engine{Src: transformSource()}
	opts, err := ParseOptions([]any{"days=weekdays;fill=prev;chg=diff"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := e.Frame([]string{"P", "S"}, unix(2024, 1, 3, 0, 0, 0), unix(2024, 1, 8, 23, 59, 59), opts)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	f.Rows(func(i int, date int64, row []float64) error {
		got = append(got, formatDay(date)+" "+formatNumber(row[0])+" "+formatNumber(row[1]))
		return nil
	})
	want := "2024-01-03 -11 0|2024-01-04 0 0|2024-01-05 21 0|2024-01-08 30 20"
	if strings.Join(got, "|") != want {
		t.Fatalf("frame rows %q, want %q", strings.Join(got, "|"), want)
	}
}

// TestDocExamples: the examples of the new options in docs/functions.md, as printed
// there (numbers rounded to 6 decimals), against the sample data.
func TestDocExamples(t *testing.T) {
	e := newEngine(t)
	for _, c := range []struct {
		args []any
		want [][]any
	}{
		{[]any{"MSFT", "2000-02", "2000-04", "chg=diff"}, [][]any{{36557, -3.46}, {36586, 6.87}, {36617, -14.85}}},
		{[]any{"MSFT", "2000-02", "2000-04", "chg=pct"}, [][]any{{36557, -8.691284}, {36586, 18.899587}, {36617, -34.359093}}},
		{[]any{"MSFT", "2000-02", "2000-03", "chg=log"}, [][]any{{36557, -0.090924}, {36586, 0.173109}}},
		{[]any{"MSFT", "2001-01", "2001-03", "yoy=diff"}, [][]any{{36892, -14.97}, {36923, -12.35}, {36951, -20.97}}},
		{[]any{"Renewables", "2008", "2010", "yoy=pct"}, [][]any{{39448, 31.007752}, {39814, 68.836292}, {40179, 20.420561}}},
		{[]any{"MSFT", "2000-03", "2000-05", "ma=3"}, [][]any{{36586, 39.793333}, {36617, 35.98}, {36647, 32.346667}}},
		{[]any{"MSFT,IBM", "2000-01", "2000-03", "rebase=100"}, [][]any{{36526, 100, 100}, {36557, 91.308716, 91.633506}, {36586, 108.565687, 105.561082}}},
		{[]any{"Renewables", "2016", "2017", "scale=0.001"}, [][]any{{42370, 21.241}, {42736, 21.933}}},
		{[]any{"IBM,Renewables", "2007-11", "2008-03", "fill=prev"}, [][]any{
			{39387, 100.9, 3870}, {39417, 103.7, 3870}, {39448, 102.75, 5070}, {39479, 109.64, 5070}, {39508, 110.87, 5070}}},
		{[]any{"MSFT,GOOG", "2004-06", "2004-09", "fill=zero"}, [][]any{{38139, 23.44, 0}, {38169, 23.38, 0}, {38200, 22.47, 102.37}, {38231, 22.76, 129.6}}},
		{[]any{"MSFT", "2000-01-31", "2000-02-04", "days=weekdays", "fill=prev"}, [][]any{{36556, 39.81}, {36557, 36.35}, {36558, 36.35}, {36559, 36.35}, {36560, 36.35}}},
		{[]any{"MSFT,Renewables", "2010-01-04", "2010-01-08", "days=weekdays", "fill=prev"}, [][]any{
			{40182, 28.05, 10308}, {40183, 28.05, 10308}, {40184, 28.05, 10308}, {40185, 28.05, 10308}, {40186, 28.05, 10308}}},
		{[]any{"MSFT,Renewables", "2010-01", "2010-01", "headers=all"}, [][]any{
			{"Date", "MSFT", "Renewables"}, {nil, "MSFT monthly price", "Iowa net generation: Renewables"}, {nil, "USD", "GWh"}, {40179, 28.05, 10308}}},
	} {
		r := e.Call("ES.Get", c.args)
		if r.Err != nil {
			t.Fatalf("%v: %v", c.args, r.Err)
		}
		ok := len(r.Value) == len(c.want)
		for i := 0; ok && i < len(c.want); i++ {
			ok = len(r.Value[i]) == len(c.want[i])
			for j := 0; ok && j < len(c.want[i]); j++ {
				switch w := c.want[i][j].(type) {
				case int:
					ok = r.Value[i][j] == float64(w)
				case float64:
					g, isNum := r.Value[i][j].(float64)
					ok = isNum && math.Round(g*1e6)/1e6 == w
				default:
					ok = r.Value[i][j] == w
				}
			}
		}
		if !ok {
			t.Errorf("%v = %v, docs say %v", c.args, show(r.Value), c.want)
		}
	}
}
