package xlsx_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/energyscope/energyscope/functions"
	"github.com/energyscope/energyscope/internal/testhome"
	"github.com/energyscope/energyscope/internal/wiring"
	"github.com/energyscope/energyscope/localcache"
)

// sampleStore cooks the real samples into a fresh home and opens it read-only, as
// es export does.
func sampleStore(t testing.TB) *localcache.Store {
	t.Helper()
	home := t.TempDir()
	testhome.CookSamples(t, home)
	st, err := localcache.Open(home, &localcache.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func sampleSource(t testing.TB) (wiring.Source, *localcache.Store) {
	st := sampleStore(t)
	return wiring.Source{Store: st}, st
}

// memSource is an in-memory functions.Source for synthetic data (benchmarks, limits).
type memSource struct {
	series map[string]*memSeries
}

type memSeries struct {
	info    functions.SeriesInfo
	periods []int64
	values  []float64
}

func newMemSource() *memSource { return &memSource{series: map[string]*memSeries{}} }

// add sets series id to the points; info's derived fields are filled in.
func (m *memSource) add(id string, info functions.SeriesInfo, periods []int64, values []float64) {
	info.ID = id
	info.Count = len(periods)
	if n := len(periods); n > 0 {
		info.First, info.Last, info.LatestValue = periods[0], periods[n-1], values[n-1]
	}
	m.series[id] = &memSeries{info: info, periods: periods, values: values}
}

func (m *memSource) Info(id string) (functions.SeriesInfo, error) {
	s, ok := m.series[id]
	if !ok {
		return functions.SeriesInfo{}, fmt.Errorf("%q: %w", id, functions.ErrNotFound)
	}
	return s.info, nil
}

func (m *memSource) Get(id string, from, to int64) ([]int64, []float64, error) {
	s, ok := m.series[id]
	if !ok {
		return nil, nil, fmt.Errorf("%q: %w", id, functions.ErrNotFound)
	}
	lo, _ := slices.BinarySearch(s.periods, from)
	hi, found := slices.BinarySearch(s.periods, to)
	if found {
		hi++
	}
	hi = max(hi, lo)
	return slices.Clone(s.periods[lo:hi]), slices.Clone(s.values[lo:hi]), nil
}

func (m *memSource) Search(string, int) ([]functions.SeriesInfo, error) { return nil, nil }

// synthDaily holds n daily series of days days from 2015-01-01: ids S000, S001, ...
// Every 7th value of series j (shifted by j) is missing, so the sheet has gaps.
func synthDaily(n, days int) (*memSource, []string) { return synthDailyGaps(n, days, true) }

// synthDailyGaps is synthDaily, with or without the gaps.
func synthDailyGaps(n, days int, gaps bool) (*memSource, []string) {
	m := newMemSource()
	start := time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	ids := make([]string, n)
	for j := range n {
		id := fmt.Sprintf("S%03d", j)
		ids[j] = id
		p := make([]int64, 0, days)
		v := make([]float64, 0, days)
		for d := range days {
			if gaps && (d+j)%7 == 3 {
				continue
			}
			p = append(p, start+int64(d)*86400)
			v = append(v, float64(j)+float64(d)/8)
		}
		m.add(id, functions.SeriesInfo{Dataset: "synth", Name: "synthetic " + id, Unit: "MWh", Source: "test", Frequency: "D"}, p, v)
	}
	return m, ids
}

// synthHourly holds one hourly series of rows points from 1900-01-01.
func synthHourly(rows int) (*memSource, []string) {
	m := newMemSource()
	start := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	p := make([]int64, rows)
	v := make([]float64, rows)
	for i := range rows {
		p[i] = start + int64(i)*3600
		v[i] = 20 + float64(i%1000)/10
	}
	m.add("H1", functions.SeriesInfo{Dataset: "synth", Name: "hourly", Unit: "MW", Frequency: "H"}, p, v)
	return m, []string{"H1"}
}
