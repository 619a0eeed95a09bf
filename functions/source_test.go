package functions

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// memSource is an in-memory Source over the real sample data in testdata/.
type memSource struct {
	series map[string]*memSeries
	ids    []string // sorted, the order Search ranks in
}

type memSeries struct {
	info    SeriesInfo
	periods []int64
	values  []float64
}

func (m *memSource) Info(id string) (SeriesInfo, error) {
	s, ok := m.series[id]
	if !ok {
		return SeriesInfo{}, fmt.Errorf("info %q: %w", id, ErrNotFound)
	}
	return s.info, nil
}

func (m *memSource) Get(id string, from, to int64) ([]int64, []float64, error) {
	s, ok := m.series[id]
	if !ok {
		return nil, nil, fmt.Errorf("get %q: %w", id, ErrNotFound)
	}
	lo, _ := slices.BinarySearch(s.periods, from)
	hi, found := slices.BinarySearch(s.periods, to)
	if found {
		hi++
	}
	if hi < lo {
		hi = lo
	}
	return slices.Clone(s.periods[lo:hi]), slices.Clone(s.values[lo:hi]), nil
}

func (m *memSource) Search(query string, limit int) ([]SeriesInfo, error) {
	q := strings.ToLower(query)
	var out []SeriesInfo
	for _, id := range m.ids {
		s := m.series[id]
		if strings.Contains(strings.ToLower(id), q) || strings.Contains(strings.ToLower(s.info.Name), q) {
			out = append(out, s.info)
			if len(out) == limit {
				break
			}
		}
	}
	return out, nil
}

// add appends one point; points must arrive in ascending order per series.
func (m *memSource) add(id string, info SeriesInfo, t int64, v float64) {
	s, ok := m.series[id]
	if !ok {
		info.ID = id
		s = &memSeries{info: info}
		m.series[id] = s
		m.ids = append(m.ids, id)
	}
	s.periods = append(s.periods, t)
	s.values = append(s.values, v)
}

// finish fills the derived fields of every SeriesInfo.
func (m *memSource) finish() {
	sort.Strings(m.ids)
	for _, s := range m.series {
		if !slices.IsSorted(s.periods) {
			panic("testdata not in order: " + s.info.ID)
		}
		s.info.Count = len(s.periods)
		if n := len(s.periods); n > 0 {
			s.info.First, s.info.Last = s.periods[0], s.periods[n-1]
			s.info.LatestValue = s.values[n-1]
		}
	}
}

func readCSV(t testing.TB, name string) [][]string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows[1:] // header
}

func parseFloat(t testing.TB, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// stocksUpdated is the Updated time of every stocks series.
var stocksUpdated = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

// loadSamples builds a memSource from the three sample files:
//   - iowa-electricity.csv: ids "Fossil Fuels", "Nuclear Energy", "Renewables" (annual)
//   - stocks.csv: ids AAPL, AMZN, GOOG, IBM, MSFT (monthly)
//   - seattle-weather-hourly-2010-01-01-07.csv: ids SEA.PRESSURE, SEA.TEMPERATURE,
//     SEA.WIND (hourly)
func loadSamples(t testing.TB) *memSource {
	t.Helper()
	m := &memSource{series: map[string]*memSeries{}}
	for _, r := range readCSV(t, "iowa-electricity.csv") {
		day, err := time.Parse("2006-01-02", r[0])
		if err != nil {
			t.Fatal(err)
		}
		m.add(r[1], SeriesInfo{Dataset: "iowa-electricity", Name: "Iowa net generation: " + r[1],
			Unit: "GWh", Source: "U.S. EIA", Frequency: "A"}, day.Unix(), parseFloat(t, r[2]))
	}
	for _, r := range readCSV(t, "stocks.csv") {
		day, err := time.Parse("Jan 2 2006", r[1])
		if err != nil {
			t.Fatal(err)
		}
		m.add(r[0], SeriesInfo{Dataset: "stocks", Name: r[0] + " monthly price", Unit: "USD",
			Source: "vega-datasets", Frequency: "M", Updated: stocksUpdated}, day.Unix(), parseFloat(t, r[2]))
	}
	for _, r := range readCSV(t, "seattle-weather-hourly-2010-01-01-07.csv") {
		at, err := time.Parse("2006-01-02T15:04:05", r[0])
		if err != nil {
			t.Fatal(err)
		}
		for i, name := range []string{"PRESSURE", "TEMPERATURE", "WIND"} {
			m.add("SEA."+name, SeriesInfo{Dataset: "seattle-weather", Name: "Seattle hourly normal " + strings.ToLower(name),
				Source: "NOAA", Frequency: "H"}, at.Unix(), parseFloat(t, r[i+1]))
		}
	}
	m.finish()
	return m
}

// testNow is the engine's clock in tests: a Monday.
var testNow = time.Date(2010, 3, 15, 12, 0, 0, 0, time.UTC)

func newEngine(t testing.TB) *Engine {
	return &Engine{Src: loadSamples(t), Now: func() time.Time { return testNow }}
}

// serial is the Excel serial of an ISO date, for readable expectations.
func serial(t testing.TB, iso string) float64 {
	t.Helper()
	layout := "2006-01-02"
	if len(iso) > 10 {
		layout = "2006-01-02T15:04"
	}
	at, err := time.Parse(layout, iso)
	if err != nil {
		t.Fatal(err)
	}
	return ExcelSerial(at.Unix())
}

// checkShape asserts the Result invariants every call must keep.
func checkShape(t testing.TB, r Result, maxCells int) {
	t.Helper()
	if (r.Err == nil) == (r.Value == nil) {
		t.Fatalf("want exactly one of Value and Err: %+v", r)
	}
	if r.Err != nil {
		switch r.Err.Code {
		case CodeNA, CodeValue, CodeNum:
		default:
			t.Fatalf("bad error code %q", r.Err.Code)
		}
		if r.Err.Message == "" {
			t.Fatal("error without a message")
		}
		return
	}
	if len(r.Value) == 0 {
		t.Fatal("empty Value")
	}
	g := r.Grid
	if g == nil || len(g.Num) != g.Rows*g.Cols || g.Rows != len(r.Value) || g.Cols != len(r.Value[0]) || (g.Other != nil && len(g.Other) != len(g.Num)) {
		t.Fatalf("Grid does not match Value: %+v", g)
	}
	for _, x := range g.Num {
		if math.IsInf(x, 0) {
			t.Fatal("infinite number in Grid")
		}
	}
	w := len(r.Value[0])
	cells := 0
	for _, row := range r.Value {
		if len(row) != w || w == 0 {
			t.Fatalf("ragged or empty rows: %d vs %d", len(row), w)
		}
		cells += len(row)
		for _, c := range row {
			switch v := c.(type) {
			case nil, string, bool, *CellError:
			case float64:
				if v != v || v > 1e308 || v < -1e308 {
					t.Fatalf("non-finite cell %v", v)
				}
			default:
				t.Fatalf("cell of type %T", c)
			}
		}
	}
	if cells > maxCells {
		t.Fatalf("%d cells > MaxCells %d", cells, maxCells)
	}
}
