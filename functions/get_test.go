package functions

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// na and num are shorthands for expected cells.
func na(msg string) *CellError { return &CellError{Code: CodeNA, Message: msg} }

// sameCells compares results cell by cell; floats to 1e-9 relative.
func sameCells(got, want [][]any) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d rows, want %d:\n got %v\nwant %v", len(got), len(want), show(got), show(want))
	}
	for i := range got {
		if len(got[i]) != len(want[i]) {
			return fmt.Errorf("row %d: %d cells, want %d: got %v want %v", i, len(got[i]), len(want[i]), show(got), show(want))
		}
		for j := range got[i] {
			if !sameCell(got[i][j], want[i][j]) {
				return fmt.Errorf("cell [%d][%d] = %s, want %s\n got %v\nwant %v", i, j, showCell(got[i][j]), showCell(want[i][j]), show(got), show(want))
			}
		}
	}
	return nil
}

func sameCell(g, w any) bool {
	switch w := w.(type) {
	case float64:
		g, ok := g.(float64)
		return ok && math.Abs(g-w) <= 1e-9*math.Max(1, math.Abs(w))
	case int:
		g, ok := g.(float64)
		return ok && g == float64(w)
	case *CellError:
		g, ok := g.(*CellError)
		return ok && *g == *w
	}
	return g == w
}

func showCell(c any) string {
	if e, ok := c.(*CellError); ok {
		return fmt.Sprintf("{%s %q}", e.Code, e.Message)
	}
	return fmt.Sprintf("%#v", c)
}

func show(v [][]any) string {
	var b strings.Builder
	for _, row := range v {
		b.WriteString("[")
		for j, c := range row {
			if j > 0 {
				b.WriteString(" ")
			}
			b.WriteString(showCell(c))
		}
		b.WriteString("] ")
	}
	return b.String()
}

type callCase struct {
	name    string
	fn      string
	args    []any
	want    [][]any    // expected Value, or
	wantErr *CellError // expected whole-call error, or
	check   func(t *testing.T, v [][]any)
}

func runCases(t *testing.T, e *Engine, cases []callCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fn := c.fn
			if fn == "" {
				fn = "ES.Get"
			}
			r := e.Call(fn, c.args)
			checkShape(t, r, e.maxCells())
			switch {
			case c.wantErr != nil:
				if r.Err == nil || *r.Err != *c.wantErr {
					t.Fatalf("got %+v %v, want error %+v", r.Err, show(r.Value), c.wantErr)
				}
			case r.Err != nil:
				t.Fatalf("unexpected error %+v", r.Err)
			case c.want != nil:
				if err := sameCells(r.Value, c.want); err != nil {
					t.Fatal(err)
				}
			}
			if c.check != nil && r.Err == nil {
				c.check(t, r.Value)
			}
		})
	}
}

func rows(n int) func(*testing.T, [][]any) {
	return func(t *testing.T, v [][]any) {
		t.Helper()
		if len(v) != n {
			t.Fatalf("%d rows, want %d: %v", len(v), n, show(v))
		}
	}
}

var msftQ1 = [][]any{{36526, 39.81}, {36557, 36.35}, {36586, 43.22}}

func TestGetDates(t *testing.T) {
	e := newEngine(t)
	runCases(t, e, []callCase{
		{name: "iso", args: []any{"MSFT", "2000-01-01", "2000-03-31"}, want: msftQ1},
		{name: "fn case", fn: "es.get", args: []any{"MSFT", "2000-01-01", "2000-03-31"}, want: msftQ1},
		{name: "no prefix", fn: "GET", args: []any{"MSFT", "2000-01-01", "2000-03-31"}, want: msftQ1},
		{name: "year-months", args: []any{"MSFT", "2000-01", "2000-03"}, want: msftQ1},
		{name: "quarter", args: []any{"MSFT", "2000-Q1", "2000q1"}, want: msftQ1},
		{name: "serials", args: []any{"MSFT", 36526.0, 36586.0}, want: msftQ1},
		{name: "yyyymmdd numbers", args: []any{"MSFT", 20000101.0, 20000301.0}, want: msftQ1},
		{name: "yyyymmdd text", args: []any{"MSFT", "20000101", "20000331"}, want: msftQ1},
		{name: "textual", args: []any{"MSFT", "Jan 1 2000", "31-Mar-2000"}, want: msftQ1},
		{name: "one-cell ranges", args: []any{[][]any{{"MSFT"}}, [][]any{{36526.0}}, [][]any{{"2000-03"}}}, want: msftQ1},
		{name: "json arrays", args: []any{[]any{[]any{"MSFT"}}, "2000-01-01", []any{"2000-03-31"}}, want: msftQ1},
		{name: "ints", args: []any{"MSFT", 36526, int64(36586)}, want: msftQ1},
		{name: "year numbers", args: []any{"MSFT", 2000.0, 2000.0}, check: func(t *testing.T, v [][]any) {
			rows(12)(t, v)
			if err := sameCells(v[11:], [][]any{{36861, 17.65}}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "year text end only", args: []any{"Renewables", nil, "2002"}, want: [][]any{{36892, 1437.0}, {37257, 1963.0}}},
		{name: "empty start", args: []any{"Renewables", "", "2002"}, want: [][]any{{36892, 1437.0}, {37257, 1963.0}}},
		{name: "zero start is omitted", args: []any{"Renewables", 0.0, 2002.0}, want: [][]any{{36892, 1437.0}, {37257, 1963.0}}},
		// testNow is Monday 2010-03-15; the last stock point is 2010-03-01.
		{name: "-6M", args: []any{"MSFT", "-6M"}, check: rows(6)},
		{name: "-6m today", args: []any{"MSFT", "-6m", "today"}, check: rows(6)},
		{name: "ytd", args: []any{"MSFT", "ytd"}, check: func(t *testing.T, v [][]any) {
			if err := sameCells(v, [][]any{{40179, 28.05}, {40210, 28.67}, {40238, 28.8}}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "-10W", args: []any{"MSFT", "-10W"}, check: rows(2)},                 // from 2010-01-04
		{name: "-30D", args: []any{"MSFT", "-30D"}, check: rows(1)},                 // from 2010-02-13
		{name: "-1Y to -1Q", args: []any{"MSFT", "-1Y", "-1Q"}, check: rows(9)},     // 2009-03-15 .. 2009-12-15
		{name: "+1Y end", args: []any{"MSFT", "2010-02-01", "+1Y"}, check: rows(2)}, // future end
		{name: "intraday start", args: []any{"SEA.TEMPERATURE", "2010-01-07T22:00", nil}, want: [][]any{{serial(t, "2010-01-07T22:00"), 5.1}, {serial(t, "2010-01-07T23:00"), 4.9}}},
		{name: "intraday zone", args: []any{"SEA.TEMPERATURE", "2010-01-08T00:00+02:00"}, want: [][]any{{serial(t, "2010-01-07T22:00"), 5.1}, {serial(t, "2010-01-07T23:00"), 4.9}}},
		{name: "fractional serial", args: []any{"SEA.TEMPERATURE", serial(t, "2010-01-07T22:00")}, check: rows(2)},
		{name: "end day covers intraday", args: []any{"SEA.TEMPERATURE", "2010-01-07", "2010-01-07"}, check: rows(24)},
		{name: "whole serial end covers day", args: []any{"SEA.TEMPERATURE", 40185.0, 40185.0}, check: rows(24)},
		{name: "fractional serial end is an instant", args: []any{"SEA.TEMPERATURE", 40185.0, 40185.5}, check: rows(13)},
	})
}

func TestGetOptions(t *testing.T) {
	e := newEngine(t)
	msft2000 := []float64{39.81, 36.35, 43.22, 28.37, 25.45, 32.54, 28.4, 28.4, 24.53, 28.02, 23.34, 17.65}
	sum := 0.0
	for _, v := range msft2000 {
		sum += v
	}
	runCases(t, e, []callCase{
		{name: "per=A default last", args: []any{"MSFT", "2000", "2001", "per=A"}, want: [][]any{{36526, 17.65}, {36892, 26.95}}},
		{name: "per=A agg=avg", args: []any{"MSFT", "2000", "2000", "per=A", "agg=avg"}, want: [][]any{{36526, sum / 12}}},
		{name: "per=A agg=sum", args: []any{"MSFT", "2000", "2000", "per=a;agg=SUM"}, want: [][]any{{36526, sum}}},
		{name: "per=A agg=min", args: []any{"MSFT", "2000", "2000", "per=A agg=min"}, want: [][]any{{36526, 17.65}}},
		{name: "per=A agg=max", args: []any{"MSFT", "2000", "2000", "PER = A, AGG = MAX"}, want: [][]any{{36526, 43.22}}},
		{name: "per=A agg=first", args: []any{"MSFT", "2000", "2000", [][]any{{"per=A"}, {"agg=first"}}}, want: [][]any{{36526, 39.81}}},
		{name: "per=Q", args: []any{"MSFT", "2000", "2000-06", "per=Q"}, want: [][]any{{36526, 43.22}, {serial(t, "2000-04-01"), 32.54}}},
		{name: "per=M identity", args: []any{"MSFT", "2000-01", "2000-03", "per=M"}, want: msftQ1},
		{name: "per=D coarser data unchanged", args: []any{"MSFT", "2000-01", "2000-03", "per=D"}, want: msftQ1},
		{name: "per=A on annual", args: []any{"Nuclear Energy", "2016", nil, "per=A"}, want: [][]any{{42370, 4703.0}, {42736, 5214.0}}},
		{name: "order=desc", args: []any{"MSFT", "2000-01", "2000-03", "order=desc"}, want: [][]any{{36586, 43.22}, {36557, 36.35}, {36526, 39.81}}},
		{name: "headers", args: []any{"MSFT", "2000-01", "2000-03", "headers=y"}, want: append([][]any{{"Date", "MSFT"}}, msftQ1...)},
		{name: "dates=n", args: []any{"MSFT", "2000-01", "2000-03", "dates=n"}, want: [][]any{{39.81}, {36.35}, {43.22}}},
		{name: "dates=n headers", args: []any{"MSFT", "2000-01", "2000-03", "dates=no headers=yes"}, want: [][]any{{"MSFT"}, {39.81}, {36.35}, {43.22}}},
		{name: "transpose", args: []any{"MSFT", "2000-01", "2000-03", "transpose=y"}, want: [][]any{{36526, 36557, 36586}, {39.81, 36.35, 43.22}}},
		{name: "transpose headers desc", args: []any{"MSFT", "2000-01", "2000-03", "transpose=true", "headers=true", "order=descending"},
			want: [][]any{{"Date", 36586, 36557, 36526}, {"MSFT", 43.22, 36.35, 39.81}}},
		{name: "last", args: []any{"MSFT", "last=2"}, want: [][]any{{40210, 28.67}, {40238, 28.8}}},
		{name: "last skips dates", args: []any{"MSFT", nil, nil, "last=2"}, want: [][]any{{40210, 28.67}, {40238, 28.8}}},
		{name: "last desc", args: []any{"MSFT", "last=2", "order=desc"}, want: [][]any{{40238, 28.8}, {40210, 28.67}}},
		{name: "last after per", args: []any{"MSFT", "per=A;agg=max;last=1"}, want: [][]any{{40179, 28.8}}},
		{name: "last huge", args: []any{"Renewables", "last=1000000000"}, check: rows(17)},
		{name: "later option wins", args: []any{"MSFT", "2000-01", "2000-03", "order=desc", "order=asc"}, want: msftQ1},
		{name: "options range", args: []any{"MSFT", "2000-01", "2000-03", [][]any{{"headers=y", nil}, {"", "dates=n"}}}, want: [][]any{{"MSFT"}, {39.81}, {36.35}, {43.22}}},
		{name: "options range as start", args: []any{"MSFT", [][]any{{"last=1", "dates=n"}}}, want: [][]any{{28.8}}},
	})
}

func TestGetIntradayResample(t *testing.T) {
	e := newEngine(t)
	// Expected values straight from the CSV.
	temps := map[string][]float64{} // day -> hourly values
	var days []string
	for _, r := range readCSV(t, "seattle-weather-hourly-2010-01-01-07.csv") {
		d := r[0][:10]
		if _, ok := temps[d]; !ok {
			days = append(days, d)
		}
		temps[d] = append(temps[d], parseFloat(t, r[2]))
	}
	var avg, mx [][]any
	for _, d := range days {
		s, m := 0.0, math.Inf(-1)
		for _, v := range temps[d] {
			s += v
			m = math.Max(m, v)
		}
		avg = append(avg, []any{serial(t, d), s / float64(len(temps[d]))})
		mx = append(mx, []any{serial(t, d), m})
	}
	// Weeks start Monday: 2010-01-01 is a Friday, so the first week is 2009-12-28.
	week := func(from, to string) float64 {
		m := math.Inf(1)
		for _, d := range days {
			if d >= from && d <= to {
				for _, v := range temps[d] {
					m = math.Min(m, v)
				}
			}
		}
		return m
	}
	runCases(t, e, []callCase{
		{name: "per=D avg", args: []any{"SEA.TEMPERATURE", "per=D", "agg=avg"}, want: avg},
		{name: "per=D max", args: []any{"SEA.TEMPERATURE", "per=D", "agg=max"}, want: mx},
		{name: "per=W min", args: []any{"SEA.TEMPERATURE", "per=W", "agg=min"}, want: [][]any{
			{serial(t, "2009-12-28"), week("2010-01-01", "2010-01-03")},
			{serial(t, "2010-01-04"), week("2010-01-04", "2010-01-10")},
		}},
		{name: "per=M count of days", args: []any{"SEA.WIND", "per=M", "agg=first"}, want: [][]any{{40179, 3.8}}},
		{name: "fractional serials", args: []any{"SEA.PRESSURE", "last=1"}, want: [][]any{{40185 + 23.0/24, 1017.6}}},
	})
}

func TestGetMultiSeries(t *testing.T) {
	e := newEngine(t)
	notFoundNOPE := na(`series "NOPE" not found`)
	runCases(t, e, []callCase{
		{name: "union of dates", args: []any{"MSFT,GOOG", "2004-06", "2004-09"}, want: [][]any{
			{38139, 23.44, nil},
			{38169, 23.38, nil},
			{38200, 22.47, 102.37},
			{38231, 22.76, 129.6},
		}},
		{name: "range of ids with headers", args: []any{[][]any{{"MSFT"}, {"GOOG"}}, "2004-07", "2004-08", "headers=y"}, want: [][]any{
			{"Date", "MSFT", "GOOG"},
			{38169, 23.38, nil},
			{38200, 22.47, 102.37},
		}},
		{name: "fill=na", args: []any{"MSFT, GOOG", "2004-07", "2004-08", "fill=na"}, want: [][]any{
			{38169, 23.38, na("no value for GOOG on this date")},
			{38200, 22.47, 102.37},
		}},
		{name: "bad column", args: []any{"MSFT,NOPE,IBM", "2004-07", "2004-08", "headers=y"}, want: [][]any{
			{"Date", "MSFT", "NOPE", "IBM"},
			{38169, 23.38, notFoundNOPE, 80.19},
			{38200, 22.47, notFoundNOPE, 78.17},
		}},
		{name: "bad column transposed", args: []any{"NOPE,IBM", "2004-07", "2004-08", "transpose=y"}, want: [][]any{
			{38169, 38200},
			{notFoundNOPE, notFoundNOPE},
			{80.19, 78.17},
		}},
		// fill=prev looks back before the start: Renewables' 2007 value fills 2007-11 and -12.
		{name: "annual with monthly fill=prev", args: []any{"IBM,Renewables", "2007-11", "2008-03", "fill=prev"}, want: [][]any{
			{serial(t, "2007-11-01"), 100.9, 3870.0},
			{serial(t, "2007-12-01"), 103.7, 3870.0},
			{serial(t, "2008-01-01"), 102.75, 5070.0},
			{serial(t, "2008-02-01"), 109.64, 5070.0},
			{serial(t, "2008-03-01"), 110.87, 5070.0},
		}},
		{name: "fill=prev before last cut", args: []any{"IBM,Renewables", "2007-11", "2008-03", "fill=prev", "last=1"}, want: [][]any{
			{serial(t, "2008-03-01"), 110.87, 5070.0},
		}},
		{name: "desc with gaps", args: []any{"MSFT,GOOG", "2004-07", "2004-08", "order=desc"}, want: [][]any{
			{38200, 22.47, 102.37},
			{38169, 23.38, nil},
		}},
		{name: "series with no data in range is empty", args: []any{"MSFT,GOOG", "2004-06", "2004-07"}, want: [][]any{
			{38139, 23.44, nil},
			{38169, 23.38, nil},
		}},
		{name: "per=A of several", args: []any{"MSFT,IBM,Renewables", "2008", "2009", "per=A", "agg=avg", "headers=y"}, check: func(t *testing.T, v [][]any) {
			if len(v) != 3 || len(v[0]) != 4 || v[1][3] != 5070.0 || v[2][3] != 8560.0 {
				t.Fatal(show(v))
			}
		}},
		{name: "many series sort path", args: []any{"MSFT,IBM,AAPL,AMZN,GOOG,Renewables,Nuclear Energy,Fossil Fuels,SEA.WIND,MSFT", "2004-07", "2004-08"}, check: func(t *testing.T, v [][]any) {
			if len(v) != 2 || len(v[0]) != 11 || v[0][1] != 23.38 || v[0][10] != 23.38 || v[1][5] != 102.37 || v[0][5] != nil {
				t.Fatal(show(v))
			}
		}},
	})
}

func TestGetErrors(t *testing.T) {
	e := newEngine(t)
	value := func(msg string) *CellError { return &CellError{Code: CodeValue, Message: msg} }
	runCases(t, e, []callCase{
		{name: "unknown series", args: []any{"XYZ"}, wantErr: na(`series "XYZ" not found`)},
		{name: "all series unknown", args: []any{"XYZ,ABC"}, wantErr: na(`series "XYZ" not found`)},
		{name: "no data", args: []any{"MSFT", "2020-01-01", "2020-02-01"}, wantErr: na("no data for MSFT between 2020-01-01 and 2020-02-01")},
		{name: "no data open start", args: []any{"MSFT", nil, "1999-12-31"}, wantErr: na("no data for MSFT on or before 1999-12-31")},
		{name: "no data open end", args: []any{"MSFT,IBM", "2011"}, wantErr: na("no data for MSFT,IBM on or after 2011-01-01")},
		{name: "no data and unknown", args: []any{"MSFT,XYZ", "2011"}, wantErr: na("no data for MSFT on or after 2011-01-01")},
		{name: "bad date", args: []any{"MSFT", "2020-13-45"}, wantErr: value(`start: cannot read date "2020-13-45"`)},
		{name: "bad end", args: []any{"MSFT", nil, "yesterday-ish"}, wantErr: value(`end: cannot read date "yesterday-ish"`)},
		{name: "year 99999", args: []any{"MSFT", "99999-01-01"}, wantErr: value(`start: date "99999-01-01" out of range: years 1 to 9999`)},
		{name: "serial too big", args: []any{"MSFT", 1e12}, wantErr: value(`start: date "1000000000000" out of range: years 1 to 9999`)},
		{name: "negative serial", args: []any{"MSFT", -5.0}, wantErr: value(`start: date "-5" out of range: years 1 to 9999`)},
		{name: "relative too far", args: []any{"MSFT", "-100000Y"}, wantErr: value(`start: date "-100000Y" out of range: years 1 to 9999`)},
		{name: "start after end", args: []any{"MSFT", "2001", "2000"}, wantErr: value("start 2001-01-01 is after end 2000-12-31")},
		{name: "bool start", args: []any{"MSFT", true}, wantErr: value("start: want a date, got TRUE")},
		{name: "range start", args: []any{"MSFT", [][]any{{1.0, 2.0}}}, wantErr: value("start: want a date, got a 1x2 range")},
		{name: "bad per", args: []any{"MSFT", "per=X"}, wantErr: value("option per=X: want D, W, M, Q or A")},
		{name: "bad agg", args: []any{"MSFT", "per=M", "agg=median"}, wantErr: value("option agg=median: want last, first, avg, sum, min or max")},
		{name: "agg without per", args: []any{"MSFT", "agg=sum"}, wantErr: value("option agg=sum: needs per=D, W, M, Q or A")},
		{name: "bad fill", args: []any{"MSFT", "fill=one"}, wantErr: value("option fill=one: want none, prev, na or zero")},
		{name: "bad order", args: []any{"MSFT", "order=up"}, wantErr: value("option order=up: want asc or desc")},
		{name: "bad headers", args: []any{"MSFT", "headers=maybe"}, wantErr: value("option headers=maybe: want id, name, unit, all (or several joined by +), y or n")},
		{name: "bad last", args: []any{"MSFT", "last=0"}, wantErr: value("option last=0: want a whole number from 1 to 1000000000")},
		{name: "huge last", args: []any{"MSFT", "last=99999999999999999999"}, wantErr: value("option last=99999999999999999999: want a whole number from 1 to 1000000000")},
		{name: "unknown option", args: []any{"MSFT", "foo=1"}, wantErr: value("option foo: unknown; want per, agg, days, fill, chg, yoy, ma, rebase, scale, order, headers, dates, transpose, last or asof")},
		{name: "third positional", args: []any{"MSFT", "2000", "2001", "desc"}, wantErr: value(`option "desc": want key=value, e.g. per=M`)},
		{name: "number option", args: []any{"MSFT", "2000", "2001", 5.0}, wantErr: value("option 5: want key=value text")},
		{name: "no args", args: nil, wantErr: value("series: missing; use ES.Get(series, [start], [end], [options...])")},
		{name: "nil series", args: []any{nil, "2000"}, wantErr: value("series: missing")},
		{name: "empty series", args: []any{""}, wantErr: value("series: empty; want a series id")},
		{name: "only commas", args: []any{" , ,"}, wantErr: value("series: empty; want a series id")},
		{name: "bool series", args: []any{true}, wantErr: value("series: want a series id or a range of ids, got TRUE")},
		{name: "mixed range", args: []any{[][]any{{"MSFT", true}}}, wantErr: value("series: want ids, got TRUE in row 1, column 2")},
		{name: "empty range", args: []any{[][]any{{nil, ""}}}, wantErr: value("series: empty; want a series id")},
		{name: "mixed json array", args: []any{[]any{"MSFT", []any{"IBM"}}}, wantErr: value("series: want a series id or a range of ids, got an array mixing rows and values")},
		{name: "unknown function", fn: "ES.Gett", args: []any{"MSFT"}, wantErr: value(`unknown function "ES.Gett"; want ES.Get, ES.Latest, ES.Info, ES.Search, ES.Live or ES.Revisions`)},
		{name: "number id", args: []any{1234.0}, wantErr: na(`series "1234" not found`)},
		{name: "number id in range", args: []any{[][]any{{1234.0, "MSFT"}}, "2000-01", "2000-01"}, want: [][]any{{36526, na(`series "1234" not found`), 39.81}}},
		{name: "too many ids", args: []any{strings.Repeat("A,", MaxSeries+1)}, wantErr: value("series: too many ids; at most 1000")},
		{name: "too many ids in range", args: []any{manyIDs(MaxSeries + 1)}, wantErr: value("series: too many ids; at most 1000")},
		{name: "empty cells only", args: []any{[][]any{make([]any, 5)}}, wantErr: value("series: empty; want a series id")},
		{name: "unsupported type", args: []any{map[string]any{}}, wantErr: value("series: want a series id or a range of ids, got a value of type map[string]interface {}")},
	})
}

// manyIDs is a column range of n ids.
func manyIDs(n int) [][]any {
	v := make([][]any, n)
	for i := range v {
		v[i] = []any{fmt.Sprint("ID", i)}
	}
	return v
}

func TestGetMaxCells(t *testing.T) {
	e := newEngine(t)
	e.MaxCells = 10
	runCases(t, e, []callCase{
		{name: "too large", args: []any{"MSFT"}, wantErr: &CellError{Code: CodeNum, Message: "result too large (246 cells); narrow the range or use last="}},
		{name: "last fits", args: []any{"MSFT", "last=5"}, check: rows(5)},
		{name: "range too large", args: []any{[][]any{{"MSFT", nil, nil, nil}, {nil, nil, nil, nil}, {nil, nil, nil, nil}}}, wantErr: &CellError{Code: CodeValue, Message: "series: range too large (12 cells)"}},
		{name: "headers count", args: []any{"MSFT", "last=5", "headers=y"}, wantErr: &CellError{Code: CodeNum, Message: "result too large (12 cells); narrow the range or use last="}},
	})
}

// TestGetMatchesCSV holds every series against its source file: all points, in order.
func TestGetMatchesCSV(t *testing.T) {
	e := newEngine(t)
	want := map[string][][]any{}
	for _, r := range readCSV(t, "stocks.csv") {
		d, _ := time.Parse("Jan 2 2006", r[1])
		want[r[0]] = append(want[r[0]], []any{float64(d.Unix()/86400 + 25569), parseFloat(t, r[2])})
	}
	for _, r := range readCSV(t, "iowa-electricity.csv") {
		d, _ := time.Parse("2006-01-02", r[0])
		want[r[1]] = append(want[r[1]], []any{float64(d.Unix()/86400 + 25569), parseFloat(t, r[2])})
	}
	for id, w := range want {
		r := e.Call("ES.Get", []any{id})
		if r.Err != nil {
			t.Fatalf("%s: %v", id, r.Err)
		}
		if err := sameCells(r.Value, w); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
}

// TestGetDoesNotModifyArgs: the bridge may log or retry a request.
func TestGetDoesNotModifyArgs(t *testing.T) {
	e := newEngine(t)
	args := []any{[]any{[]any{"MSFT"}}, 36526, nil}
	e.Call("ES.Get", args)
	if _, ok := args[0].([]any); !ok || args[1] != 36526 || len(args) != 3 {
		t.Fatalf("args changed: %#v", args)
	}
}
