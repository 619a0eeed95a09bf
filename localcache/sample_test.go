package localcache_test

import (
	"encoding/csv"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// The real sample data of the repository (see testdata/README.md).
var sampleDir = filepath.Join("..", "testdata")

// sampleSeries is one series as read straight from a CSV file: the
// expectation the store is held against.
type sampleSeries struct {
	id, name string
	freq     format.Frequency // "" = let the cook infer it
	want     format.Frequency // what the index must say
	periods  []int64
	values   []float64
}

func readCSV(t *testing.T, name string) [][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(sampleDir, name))
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

func num(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// loadSamples parses the three CSVs into one list of series per dataset.
func loadSamples(t *testing.T) map[string][]*sampleSeries {
	t.Helper()
	out := map[string][]*sampleSeries{}
	add := func(ds string, byID map[string]*sampleSeries, id, name string, freq, want format.Frequency, p int64, v float64) {
		s := byID[id]
		if s == nil {
			s = &sampleSeries{id: id, name: name, freq: freq, want: want}
			byID[id] = s
			out[ds] = append(out[ds], s)
		}
		s.periods = append(s.periods, p)
		s.values = append(s.values, v)
	}
	// year,source,net_generation: annual, long format with a category.
	byID := map[string]*sampleSeries{}
	for _, r := range readCSV(t, "iowa-electricity.csv") {
		id := "IOWA." + strings.ToUpper(strings.ReplaceAll(r[1], " ", "_"))
		add("iowa", byID, id, r[1], "", format.Annual, utc(r[0]), num(t, r[2]))
	}
	// symbol,date,price: monthly, dates like "Jan 1 2000".
	byID = map[string]*sampleSeries{}
	for _, r := range readCSV(t, "stocks.csv") {
		add("stocks", byID, r[0], r[0]+" monthly close", format.Monthly, format.Monthly, utc(r[1]), num(t, r[2]))
	}
	// date,pressure,temperature,wind: hourly, wide.
	byID = map[string]*sampleSeries{}
	cols := []string{"pressure", "temperature", "wind"}
	for _, r := range readCSV(t, "seattle-weather-hourly-normals.csv") {
		for i, c := range cols {
			add("seattle", byID, "SEATTLE."+strings.ToUpper(c), "Seattle hourly normal "+c, "", format.Hourly, utc(r[0]), num(t, r[1+i]))
		}
	}
	return out
}

func sampleTable(series []*sampleSeries) *format.Table {
	tb := &format.Table{}
	for i, s := range series {
		tb.Series = append(tb.Series, format.SeriesMeta{ID: s.id, Name: s.name, Source: "vega-datasets", Frequency: s.freq})
		for k := range s.periods {
			tb.Append(uint32(i), s.periods[k], s.values[k])
		}
	}
	return tb
}

// sampleHome publishes the three sample datasets into a fresh home.
func sampleHome(t *testing.T) (string, map[string][]*sampleSeries, map[string]*format.Manifest) {
	t.Helper()
	home := t.TempDir()
	samples := loadSamples(t)
	ms := map[string]*format.Manifest{}
	for ds, series := range samples {
		ms[ds], _ = publish(t, home, ds, sampleTable(series), format.WriteOptions{Epoch: 1, CoversThroughSeq: 7})
	}
	return home, samples, ms
}

func TestSamplesGolden(t *testing.T) {
	home, _, ms := sampleHome(t)
	st := openStore(t, home)
	if got := st.DatasetNames(); !slices.Equal(got, []string{"iowa", "seattle", "stocks"}) {
		t.Fatalf("datasets %v", got)
	}
	if ms["seattle"].PeriodType != format.PeriodTimestamp || ms["iowa"].PeriodType != format.PeriodDate32 || ms["stocks"].PeriodType != format.PeriodDate32 {
		t.Fatalf("period types: seattle %s, iowa %s, stocks %s", ms["seattle"].PeriodType, ms["iowa"].PeriodType, ms["stocks"].PeriodType)
	}
	// Values looked up by hand in the CSV files.
	cases := []struct {
		ref   string
		at    string
		value float64
	}{
		{"IOWA.FOSSIL_FUELS", "2001-01-01", 35361},
		{"iowa:IOWA.FOSSIL_FUELS", "2017-01-01", 29329},
		{"IOWA.NUCLEAR_ENERGY", "2017-01-01", 5214},
		{"IOWA.RENEWABLES", "2017-01-01", 21933},
		{"MSFT", "2000-01-01", 39.81},
		{"stocks:MSFT", "2000-02-01", 36.35},
		{"MSFT", "2010-03-01", 28.8},
		{"GOOG", "2010-03-01", 560.19},
		{"SEATTLE.PRESSURE", "2010-01-01T01:00:00Z", 1016.6},
		{"seattle:SEATTLE.TEMPERATURE", "2010-01-01T01:00:00Z", 4.0},
		{"SEATTLE.WIND", "2010-12-31T23:00:00Z", 4.0},
	}
	for _, c := range cases {
		p := utc(c.at)
		r, err := st.Get(c.ref, p, p)
		if err != nil {
			t.Fatalf("Get(%s): %v", c.ref, err)
		}
		if r.Points.Len() != 1 || r.Points.Unix(0) != p || r.Points.Values[0] != c.value {
			t.Errorf("Get(%s, %s) = %d points %v, want %v", c.ref, c.at, r.Points.Len(), r.Points.Values, c.value)
		}
		r.Release()
	}
	for _, c := range []struct {
		ref   string
		count int
		first string
		last  string
		value float64
		freq  format.Frequency
	}{
		{"IOWA.FOSSIL_FUELS", 17, "2001-01-01", "2017-01-01", 29329, format.Annual},
		{"GOOG", 68, "2004-08-01", "2010-03-01", 560.19, format.Monthly},
		{"AAPL", 123, "2000-01-01", "2010-03-01", 223.02, format.Monthly},
		{"SEATTLE.TEMPERATURE", 8759, "2010-01-01T01:00:00Z", "2010-12-31T23:00:00Z", 4.3, format.Hourly},
	} {
		in, err := st.Info(c.ref)
		if err != nil {
			t.Fatal(err)
		}
		if in.Count != c.count || in.First != utc(c.first) || in.Last != utc(c.last) || in.LatestValue != c.value || in.Frequency != c.freq {
			t.Errorf("Info(%s) = %+v", c.ref, in)
		}
	}
}

// TestSamplesAgainstCSV holds every series of the samples against the CSV
// rows: the whole series, Info, Latest and a yearly range query.
func TestSamplesAgainstCSV(t *testing.T) {
	home, samples, ms := sampleHome(t)
	st := openStore(t, home)
	for ds, series := range samples {
		for _, s := range series {
			for _, ref := range []string{s.id, ds + ":" + s.id} {
				r, err := st.Get(ref, snapshot.MinTime, snapshot.MaxTime)
				if err != nil {
					t.Fatalf("Get(%s): %v", ref, err)
				}
				if r.Dataset != ds {
					t.Errorf("Get(%s) from dataset %q, want %q", ref, r.Dataset, ds)
				}
				if hourly := s.want == format.Hourly; (r.Points.Secs != nil) != hourly || (r.Points.Days != nil) == hourly {
					t.Errorf("Get(%s): Secs set %v, Days set %v for %s data", ref, r.Points.Secs != nil, r.Points.Days != nil, s.want)
				}
				checkPoints(t, ref, r.Points, s.periods, s.values)
				r.Release()
			}
			in, err := st.Info(s.id)
			if err != nil {
				t.Fatal(err)
			}
			n := len(s.values)
			want := localcache.Info{
				Info: snapshot.Info{ID: s.id, Name: s.name, Source: "vega-datasets", Frequency: s.want,
					First: s.periods[0], Last: s.periods[n-1], Count: n, LatestValue: s.values[n-1], Tier: format.Hot,
					Batch: in.Batch, Offset: in.Offset},
				Dataset: ds, SnapshotID: ms[ds].SnapshotID, Epoch: 1, Seq: 7, Updated: 1700000000,
			}
			if in != want {
				t.Errorf("Info(%s) =\n%+v, want\n%+v", s.id, in, want)
			}
			p, v, err := st.Latest(ds + ":" + s.id)
			if err != nil || p != s.periods[n-1] || v != s.values[n-1] {
				t.Errorf("Latest(%s) = %d, %v, %v", s.id, p, v, err)
			}
			// One calendar year, bounds given as arbitrary instants.
			from, to := utc("2005-01-01T00:00:00Z"), utc("2005-12-31T23:59:59Z")
			if s.want == format.Hourly {
				from, to = utc("2010-07-04T00:00:00Z"), utc("2010-07-04T23:59:59Z")
			}
			var wp []int64
			var wv []float64
			for k, p := range s.periods {
				if p >= from && p <= to {
					wp, wv = append(wp, p), append(wv, s.values[k])
				}
			}
			r, err := st.Get(s.id, from, to)
			if err != nil {
				t.Fatal(err)
			}
			checkPoints(t, s.id+" range", r.Points, wp, wv)
			r.Release()
		}
	}
	// The monthly and hourly ranges have the lengths a calendar gives.
	for ref, want := range map[string]int{"MSFT": 12, "SEATTLE.WIND": 24, "IOWA.RENEWABLES": 1} {
		from, to := utc("2005-01-01"), utc("2005-12-31")
		if ref == "SEATTLE.WIND" {
			from, to = utc("2010-07-04T00:00:00Z"), utc("2010-07-04T23:00:00Z")
		}
		r, err := st.Get(ref, from, to)
		if err != nil || r.Points.Len() != want {
			t.Errorf("Get(%s) over one period: %d points (%v), want %d", ref, r.Points.Len(), err, want)
		}
		r.Release()
	}
}

func checkPoints(t *testing.T, what string, p snapshot.Points, periods []int64, values []float64) {
	t.Helper()
	if p.Len() != len(values) {
		t.Errorf("%s: %d points, want %d", what, p.Len(), len(values))
		return
	}
	for i := range values {
		if p.Unix(i) != periods[i] || p.Values[i] != values[i] {
			t.Errorf("%s: point %d = (%d, %v), want (%d, %v)", what, i, p.Unix(i), p.Values[i], periods[i], values[i])
			return
		}
	}
}

func TestSamplesSearchAndErrors(t *testing.T) {
	home, _, _ := sampleHome(t)
	st := openStore(t, home)
	for _, c := range []struct {
		q     string
		first string // dataset:id of the best hit
		n     int    // number of hits with a large limit
	}{
		{"msft", "stocks:MSFT", 1},
		{"MSFT", "stocks:MSFT", 1},
		{"fossil", "iowa:IOWA.FOSSIL_FUELS", 1},
		{"iowa.", "iowa:IOWA.RENEWABLES", 3}, // id prefix; shortest id first
		{"seattle temp", "seattle:SEATTLE.TEMPERATURE", 1},
		{"monthly close", "stocks:IBM", 5}, // name word; ties by shorter id
		{"pressure", "seattle:SEATTLE.PRESSURE", 1},
		{"no such thing", "", 0},
	} {
		hits, err := st.Search(c.q, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != c.n {
			t.Errorf("Search(%q): %d hits %+v, want %d", c.q, len(hits), hits, c.n)
		}
		if c.n == 0 {
			continue
		}
		if got := hits[0].Dataset + ":" + hits[0].ID; got != c.first {
			t.Errorf("Search(%q) best hit %s, want %s", c.q, got, c.first)
		}
		// The limit cuts the ranking, it does not change it.
		one, _ := st.Search(c.q, 1)
		if len(one) != 1 || one[0] != hits[0] {
			t.Errorf("Search(%q, 1) = %+v, Search(%q, 100)[0] = %+v", c.q, one, c.q, hits[0])
		}
		if !sort.SliceIsSorted(hits, func(a, b int) bool { return hits[a].Score > hits[b].Score }) {
			t.Errorf("Search(%q) not sorted by score: %+v", c.q, hits)
		}
	}

	for _, ref := range []string{"msft", "MSFT ", "IOWA.FOSSIL", "stocks:IOWA.FOSSIL_FUELS", "iowa:MSFT", "nosuch:MSFT", ":MSFT", ""} {
		if _, err := st.Get(ref, snapshot.MinTime, snapshot.MaxTime); !errors.Is(err, localcache.ErrNotFound) {
			t.Errorf("Get(%q): %v, want ErrNotFound", ref, err)
		}
		if _, err := st.Info(ref); !errors.Is(err, localcache.ErrNotFound) {
			t.Errorf("Info(%q): %v, want ErrNotFound", ref, err)
		}
		if _, _, err := st.Latest(ref); !errors.Is(err, localcache.ErrNotFound) {
			t.Errorf("Latest(%q): %v, want ErrNotFound", ref, err)
		}
	}
	if _, err := st.Dataset("nosuch"); !errors.Is(err, localcache.ErrNoDataset) {
		t.Errorf("Dataset(nosuch): %v, want ErrNoDataset", err)
	}
	// Copy gives the same as Get, in memory the caller owns.
	periods, values, err := st.Copy("IOWA.NUCLEAR_ENERGY", utc("2016-01-01"), snapshot.MaxTime)
	if err != nil || !slices.Equal(periods, []int64{utc("2016-01-01"), utc("2017-01-01")}) || len(values) != 2 || values[1] != 5214 || math.IsNaN(values[0]) {
		t.Errorf("Copy = %v %v %v", periods, values, err)
	}
}
