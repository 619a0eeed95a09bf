package functions

import (
	"errors"
	"testing"
	"time"
)

func TestLatestLiveInfo(t *testing.T) {
	e := newEngine(t)
	value := func(msg string) *CellError { return &CellError{Code: CodeValue, Message: msg} }
	nope := na(`series "NOPE" not found`)
	updated := ExcelSerial(stocksUpdated.Unix())
	runCases(t, e, []callCase{
		{name: "latest", fn: "ES.Latest", args: []any{"MSFT"}, want: [][]any{{28.8}}},
		{name: "latest value", fn: "latest", args: []any{"MSFT", "VALUE"}, want: [][]any{{28.8}}},
		{name: "latest date", fn: "ES.LATEST", args: []any{"MSFT", "date"}, want: [][]any{{40238}}},
		{name: "latest both", fn: "ES.Latest", args: []any{"MSFT", "both"}, want: [][]any{{40238, 28.8}}},
		{name: "latest omitted field", fn: "ES.Latest", args: []any{"MSFT", nil}, want: [][]any{{28.8}}},
		{name: "latest hourly", fn: "ES.Latest", args: []any{"SEA.WIND", "both"}, want: [][]any{{40185 + 23.0/24, 4.0}}},
		{name: "latest list is a row", fn: "ES.Latest", args: []any{"MSFT,IBM"}, want: [][]any{{28.8, 125.55}}},
		{name: "latest column range keeps shape", fn: "ES.Latest", args: []any{[][]any{{"MSFT"}, {"NOPE"}, {nil}, {"IBM"}}},
			want: [][]any{{28.8}, {nope}, {nil}, {125.55}}},
		{name: "latest row range", fn: "ES.Latest", args: []any{[][]any{{"MSFT", "IBM"}}, "date"}, want: [][]any{{40238, 40238}}},
		{name: "latest both several", fn: "ES.Latest", args: []any{"MSFT,NOPE", "both"}, want: [][]any{{40238, 28.8}, {nope, nope}}},
		{name: "latest unknown", fn: "ES.Latest", args: []any{"NOPE"}, wantErr: nope},
		{name: "latest all unknown", fn: "ES.Latest", args: []any{"NOPE,NADA"}, wantErr: nope},
		{name: "latest bad field", fn: "ES.Latest", args: []any{"MSFT", "price"}, wantErr: value(`field: want value, date or both, got "price"`)},
		{name: "latest field type", fn: "ES.Latest", args: []any{"MSFT", 3.0}, wantErr: value("field: want text, got 3")},
		{name: "latest too many", fn: "ES.Latest", args: []any{"MSFT", "value", "x"}, wantErr: value("argument 3: ES.Latest takes at most 2 arguments (series, field), got 3")},
		{name: "latest none", fn: "ES.Latest", args: nil, wantErr: value("series: missing; use ES.Latest(series, [field])")},
		{name: "live", fn: "ES.Live", args: []any{"IBM"}, want: [][]any{{125.55}}},
		{name: "live too many", fn: "es.live", args: []any{"IBM", "date"}, wantErr: value("argument 2: ES.Live takes at most 1 argument (series), got 2")},
		{name: "live none", fn: "ES.Live", args: []any{}, wantErr: value("series: missing; use ES.Live(series)")},
		{name: "info name", fn: "ES.Info", args: []any{"MSFT", "name"}, want: [][]any{{"MSFT monthly price"}}},
		{name: "info unit", fn: "ES.Info", args: []any{"Renewables", "Unit"}, want: [][]any{{"GWh"}}},
		{name: "info frequency", fn: "ES.Info", args: []any{"SEA.WIND", "frequency"}, want: [][]any{{"H"}}},
		{name: "info freq alias", fn: "ES.Info", args: []any{"MSFT", "freq"}, want: [][]any{{"M"}}},
		{name: "info source", fn: "ES.Info", args: []any{"Renewables", "source"}, want: [][]any{{"U.S. EIA"}}},
		{name: "info first", fn: "ES.Info", args: []any{"MSFT", "first"}, want: [][]any{{36526}}},
		{name: "info last", fn: "ES.Info", args: []any{"GOOG", "last"}, want: [][]any{{40238}}},
		{name: "info count", fn: "ES.Info", args: []any{"GOOG", "count"}, want: [][]any{{68}}},
		{name: "info updated", fn: "ES.Info", args: []any{"MSFT", "updated"}, want: [][]any{{updated}}},
		{name: "info updated unknown", fn: "ES.Info", args: []any{"Renewables", "updated"}, want: [][]any{{nil}}},
		{name: "info dataset", fn: "ES.Info", args: []any{"Renewables", "dataset"}, want: [][]any{{"iowa-electricity"}}},
		{name: "info id", fn: "ES.Info", args: []any{" MSFT ", "id"}, want: [][]any{{"MSFT"}}},
		{name: "info latest", fn: "ES.Info", args: []any{"MSFT", "latest"}, want: [][]any{{28.8}}},
		{name: "info several", fn: "ES.Info", args: []any{"MSFT,NOPE", "unit"}, want: [][]any{{"USD", nope}}},
		{name: "info table", fn: "ES.Info", args: []any{"MSFT"}, want: [][]any{
			{"id", "MSFT"}, {"dataset", "stocks"}, {"name", "MSFT monthly price"}, {"unit", "USD"},
			{"frequency", "M"}, {"source", "vega-datasets"}, {"first", 36526}, {"last", 40238},
			{"count", 123}, {"latest", 28.8}, {"updated", updated},
		}},
		{name: "info table several", fn: "ES.Info", args: []any{"NOPE,Renewables"}, want: [][]any{
			{"id", nope, "Renewables"}, {"dataset", nope, "iowa-electricity"}, {"name", nope, "Iowa net generation: Renewables"},
			{"unit", nope, "GWh"}, {"frequency", nope, "A"}, {"source", nope, "U.S. EIA"}, {"first", nope, 36892},
			{"last", nope, 42736}, {"count", nope, 17}, {"latest", nope, 21933.0}, {"updated", nope, nil},
		}},
		{name: "info unknown", fn: "ES.Info", args: []any{"NOPE", "name"}, wantErr: nope},
		{name: "info bad field", fn: "ES.Info", args: []any{"MSFT", "colour"},
			wantErr: value(`field: want id, dataset, name, unit, frequency, source, first, last, count, latest or updated, got "colour"`)},
		{name: "info too many", fn: "ES.Info", args: []any{"MSFT", "name", "unit"}, wantErr: value("argument 3: ES.Info takes at most 2 arguments (series, field), got 3")},
	})
}

func TestSearch(t *testing.T) {
	e := newEngine(t)
	value := func(msg string) *CellError { return &CellError{Code: CodeValue, Message: msg} }
	runCases(t, e, []callCase{
		{name: "one", fn: "ES.Search", args: []any{"msf"}, want: [][]any{{"MSFT", "MSFT monthly price"}}},
		{name: "by name", fn: "ES.Search", args: []any{"nuclear"}, want: [][]any{{"Nuclear Energy", "Iowa net generation: Nuclear Energy"}}},
		{name: "limit", fn: "ES.Search", args: []any{"a", 2.0}, want: [][]any{{"AAPL", "AAPL monthly price"}, {"AMZN", "AMZN monthly price"}}},
		{name: "limit text", fn: "search", args: []any{"sea.", "3"}, check: rows(3)},
		{name: "default limit", fn: "ES.Search", args: []any{"e", nil}, check: rows(11)},
		{name: "no match", fn: "ES.Search", args: []any{"zzz"}, wantErr: na(`no series match "zzz"`)},
		{name: "empty", fn: "ES.Search", args: []any{"  "}, wantErr: value("query: empty; want words to search for")},
		{name: "missing", fn: "ES.Search", args: nil, wantErr: value("query: missing; use ES.Search(query, [limit])")},
		{name: "bool query", fn: "ES.Search", args: []any{false}, wantErr: value("query: want text, got FALSE")},
		{name: "limit 0", fn: "ES.Search", args: []any{"a", 0.0}, wantErr: value("limit: want a whole number from 1 to 1000, got 0")},
		{name: "limit 1001", fn: "ES.Search", args: []any{"a", 1001.0}, wantErr: value("limit: want a whole number from 1 to 1000, got 1001")},
		{name: "limit fraction", fn: "ES.Search", args: []any{"a", 2.5}, wantErr: value("limit: want a whole number from 1 to 1000, got 2.5")},
		{name: "limit text bad", fn: "ES.Search", args: []any{"a", "lots"}, wantErr: value(`limit: want a whole number from 1 to 1000, got "lots"`)},
		{name: "too many", fn: "ES.Search", args: []any{"a", 1.0, 2.0}, wantErr: value("argument 3: ES.Search takes at most 2 arguments (query, limit), got 3")},
	})
}

// badSource misbehaves in the ways a store adapter might.
type badSource struct{ *memSource }

var errDisk = errors.New("disk on fire")

func (b badSource) Get(id string, from, to int64) ([]int64, []float64, error) {
	switch id {
	case "FIRE":
		return nil, nil, errDisk
	case "SHORT":
		return []int64{1, 2}, []float64{1}, nil
	case "UNSORTED":
		return []int64{2, 1}, []float64{1, 2}, nil
	case "DUPS":
		return []int64{0, 0, 86400}, []float64{1, 2, 3}, nil
	case "NAN":
		return []int64{0, 86400, 2 * 86400}, []float64{1, nan(), 3}, nil
	}
	return b.memSource.Get(id, from, to)
}

func (b badSource) Info(id string) (SeriesInfo, error) {
	switch id {
	case "FIRE":
		return SeriesInfo{}, errDisk
	case "EMPTY":
		return SeriesInfo{ID: id, Frequency: "D"}, nil
	case "NAN":
		return SeriesInfo{ID: id, Count: 3, Last: 2 * 86400, LatestValue: nan()}, nil
	}
	return b.memSource.Info(id)
}

// Search ignores the limit.
func (b badSource) Search(q string, limit int) ([]SeriesInfo, error) {
	if q == "fire" {
		return nil, errDisk
	}
	return b.memSource.Search(q, 1000)
}

func nan() float64 { var z float64; return z / z }

func TestMisbehavingSource(t *testing.T) {
	e := newEngine(t)
	e.Src = badSource{e.Src.(*memSource)}
	runCases(t, e, []callCase{
		{name: "source error", args: []any{"FIRE"}, wantErr: na("FIRE: disk on fire")},
		{name: "mismatched", args: []any{"SHORT"}, wantErr: na("SHORT: source returned 2 dates and 1 values")},
		{name: "unsorted column", args: []any{"MSFT,UNSORTED", "2010-03"}, want: [][]any{{40238, 28.8, na("UNSORTED: source returned dates out of order")}}},
		{name: "duplicates", args: []any{"DUPS"}, want: [][]any{{25569, 1.0}, {25570, 3.0}}},
		{name: "duplicates multi", args: []any{"DUPS,NAN"}, want: [][]any{{25569, 1.0, 1.0}, {25570, 3.0, nil}, {25571, nil, 3.0}}},
		{name: "nan is empty", args: []any{"NAN"}, want: [][]any{{25569, 1.0}, {25570, nil}, {25571, 3.0}}},
		{name: "nan fill prev", args: []any{"NAN", "fill=prev"}, want: [][]any{{25569, 1.0}, {25570, 1.0}, {25571, 3.0}}},
		{name: "nan fill na", args: []any{"NAN", "fill=na"}, want: [][]any{{25569, 1.0}, {25570, na("no value for NAN on this date")}, {25571, 3.0}}},
		{name: "nan skipped by agg", args: []any{"NAN", "per=A", "agg=avg"}, want: [][]any{{25569, 2.0}}},
		{name: "info error", fn: "ES.Info", args: []any{"FIRE"}, wantErr: na("FIRE: disk on fire")},
		{name: "latest without points", fn: "ES.Latest", args: []any{"EMPTY"}, wantErr: na("no data for EMPTY")},
		{name: "info without points", fn: "ES.Info", args: []any{"EMPTY", "first"}, want: [][]any{{nil}}},
		{name: "latest nan", fn: "ES.Latest", args: []any{"NAN", "both"}, want: [][]any{{25571, nil}}},
		{name: "search truncates", fn: "ES.Search", args: []any{"a", 1.0}, check: rows(1)},
		{name: "search error", fn: "ES.Search", args: []any{"fire"}, wantErr: na(`search "fire": disk on fire`)},
	})
	// updated is shown in the user's time zone (Engine.Now's location).
	e.Now = func() time.Time { return testNow.In(time.FixedZone("CET", 3600)) }
	if r := e.Call("ES.Info", []any{"MSFT", "updated"}); r.Err != nil || r.Value[0][0] != ExcelSerial(stocksUpdated.Unix()+3600) {
		t.Fatalf("updated in CET: %+v", r)
	}
	if got := na("x").Error(); got != "#N/A x" {
		t.Fatalf("Error() = %q", got)
	}
	if r := (&Engine{}).Call("ES.Get", []any{"MSFT"}); r.Err == nil || r.Err.Message != "no data source" {
		t.Fatalf("nil Src: %+v", r)
	}
}
