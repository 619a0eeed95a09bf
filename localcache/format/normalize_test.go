package format

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNormalize(t *testing.T) {
	cases := []struct {
		f        Frequency
		in, want string
	}{
		{Hourly, "2020-01-17T10:59:59Z", "2020-01-17T10:00:00Z"},
		{Hourly, "2020-01-17T10:00:00Z", "2020-01-17T10:00:00Z"},
		{Hourly, "1969-12-31T23:30:00Z", "1969-12-31T23:00:00Z"},
		{Daily, "2020-01-17T23:59:59Z", "2020-01-17T00:00:00Z"},
		{Daily, "1969-12-31T00:00:01Z", "1969-12-31T00:00:00Z"},
		{"", "2020-01-17T12:00:00Z", "2020-01-17T00:00:00Z"},
		{Weekly, "2020-01-13T00:00:00Z", "2020-01-13T00:00:00Z"}, // Monday
		{Weekly, "2020-01-15T12:00:00Z", "2020-01-13T00:00:00Z"}, // Wednesday
		{Weekly, "2020-01-19T23:59:59Z", "2020-01-13T00:00:00Z"}, // Sunday
		{Weekly, "2020-01-20T00:00:00Z", "2020-01-20T00:00:00Z"}, // next Monday
		{Weekly, "1970-01-01T00:00:00Z", "1969-12-29T00:00:00Z"}, // Thursday before the epoch's Monday
		{Weekly, "1969-12-28T05:00:00Z", "1969-12-22T00:00:00Z"}, // Sunday
		{Weekly, "2021-01-03T00:00:00Z", "2020-12-28T00:00:00Z"}, // across a year
		{Monthly, "2020-01-17T00:00:00Z", "2020-01-01T00:00:00Z"},
		{Monthly, "2020-02-29T23:00:00Z", "2020-02-01T00:00:00Z"},
		{Monthly, "1969-12-31T23:59:59Z", "1969-12-01T00:00:00Z"},
		{Quarterly, "2020-05-20T00:00:00Z", "2020-04-01T00:00:00Z"},
		{Quarterly, "2020-12-31T00:00:00Z", "2020-10-01T00:00:00Z"},
		{Quarterly, "2020-03-31T23:59:59Z", "2020-01-01T00:00:00Z"},
		{Annual, "2020-12-31T23:59:59Z", "2020-01-01T00:00:00Z"},
		{Annual, "1900-06-01T00:00:00Z", "1900-01-01T00:00:00Z"},
	}
	for _, c := range cases {
		got := c.f.Normalize(ts(c.in))
		if want := ts(c.want); got != want {
			t.Errorf("%q.Normalize(%s) = %s, want %s", c.f, c.in, time.Unix(got, 0).UTC().Format(time.RFC3339), c.want)
		}
		if again := c.f.Normalize(got); again != got {
			t.Errorf("%q.Normalize is not idempotent at %s", c.f, c.want)
		}
	}
}

func TestNormalizeWeeklyIsMonday(t *testing.T) {
	for p := ts("1960-01-01T00:00:00Z"); p < ts("1980-01-01T00:00:00Z"); p += 86400 + 3599 {
		n := Weekly.Normalize(p)
		d := time.Unix(n, 0).UTC()
		if d.Weekday() != time.Monday || n > p || p-n >= 7*86400 {
			t.Fatalf("Weekly.Normalize(%s) = %s (%s)", time.Unix(p, 0).UTC(), d, d.Weekday())
		}
	}
}

func TestParseFrequency(t *testing.T) {
	for in, want := range map[string]Frequency{
		"H": Hourly, "hourly": Hourly, "d": Daily, "DAILY": Daily, "week": Weekly,
		"M": Monthly, "month": Monthly, "Q": Quarterly, "quarterly": Quarterly,
		"A": Annual, "Y": Annual, "yearly": Annual, "annual": Annual,
	} {
		if got, err := ParseFrequency(in); err != nil || got != want {
			t.Errorf("ParseFrequency(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "minute", "Monthly "} {
		if _, err := ParseFrequency(in); err == nil {
			t.Errorf("ParseFrequency(%q) accepted", in)
		}
	}
}

// cookedSeries reads back one series of a written snapshot: its index row
// and its (period, value) rows.
type cookedSeries struct {
	freq    Frequency
	first   int64
	last    int64
	latest  float64
	periods []int64
	values  []float64
}

func readBack(t *testing.T, dir string, m *Manifest) map[string]cookedSeries {
	t.Helper()
	x, err := OpenIndex(aligned(readFile(t, dir, IndexFile)), m.PeriodType, m.Series)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	d, err := OpenData(aligned(readFile(t, dir, DataFile)), m.PeriodType, m.Batches)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	out := map[string]cookedSeries{}
	for r := uint32(0); r < uint32(x.N); r++ {
		cs := cookedSeries{freq: x.Frequency(r), first: x.First(r), last: x.Last(r), latest: x.Latest[r]}
		if n := x.Length[r]; n > 0 {
			b, err := d.Batch(int(x.Batch[r]))
			if err != nil {
				t.Fatal(err)
			}
			for i := x.Offset[r]; i < x.Offset[r]+n; i++ {
				if b.Series[i] != r {
					t.Fatalf("row %d of batch %d: series %d, want %d", i, x.Batch[r], b.Series[i], r)
				}
				if b.Secs != nil {
					cs.periods = append(cs.periods, b.Secs[i])
				} else {
					cs.periods = append(cs.periods, int64(b.Days[i])*86400)
				}
				cs.values = append(cs.values, b.Values[i])
			}
		}
		out[x.ID(r)] = cs
	}
	return out
}

func TestWriteNormalizesAndDedupes(t *testing.T) {
	type row struct {
		at string
		v  float64
	}
	type point struct {
		at string
		v  float64
	}
	cases := []struct {
		name  string
		freq  Frequency
		rows  []row
		want  []point
		dups  int64
		ptype PeriodType
	}{
		{"monthly mid-month", Monthly, []row{{"2020-01-17T00:00:00Z", 1}}, []point{{"2020-01-01T00:00:00Z", 1}}, 0, PeriodDate32},
		{"weekly to Monday", Weekly, []row{{"2020-01-15T00:00:00Z", 1}, {"2020-01-23T00:00:00Z", 2}},
			[]point{{"2020-01-13T00:00:00Z", 1}, {"2020-01-20T00:00:00Z", 2}}, 0, PeriodDate32},
		{"same period last wins", Daily, []row{{"2020-01-01T00:00:00Z", 1}, {"2020-01-01T00:00:00Z", 2}, {"2020-01-01T00:00:00Z", 3}},
			[]point{{"2020-01-01T00:00:00Z", 3}}, 2, PeriodDate32},
		// The winner is the last row in input order, not the latest raw period.
		{"same bucket last input wins", Monthly, []row{{"2020-01-20T00:00:00Z", 1}, {"2020-01-03T00:00:00Z", 2}, {"2020-02-09T00:00:00Z", 3}, {"2020-01-25T00:00:00Z", 4}, {"2020-01-10T00:00:00Z", 5}},
			[]point{{"2020-01-01T00:00:00Z", 5}, {"2020-02-01T00:00:00Z", 3}}, 3, PeriodDate32},
		{"unsorted input is sorted", Annual, []row{{"2003-07-01T00:00:00Z", 3}, {"2001-01-01T00:00:00Z", 1}, {"2002-12-31T00:00:00Z", 2}},
			[]point{{"2001-01-01T00:00:00Z", 1}, {"2002-01-01T00:00:00Z", 2}, {"2003-01-01T00:00:00Z", 3}}, 0, PeriodDate32},
		{"quarterly", Quarterly, []row{{"2020-05-20T00:00:00Z", 1}, {"2020-06-30T00:00:00Z", 2}},
			[]point{{"2020-04-01T00:00:00Z", 2}}, 1, PeriodDate32},
		{"hourly gives timestamps", Hourly, []row{{"2020-01-01T10:59:00Z", 1}, {"2020-01-01T10:01:00Z", 2}, {"2020-01-01T11:00:00Z", 3}},
			[]point{{"2020-01-01T10:00:00Z", 2}, {"2020-01-01T11:00:00Z", 3}}, 1, PeriodTimestamp},
		{"before the epoch", Monthly, []row{{"1969-12-31T12:00:00Z", 1}, {"1969-11-30T00:00:00Z", 2}},
			[]point{{"1969-11-01T00:00:00Z", 2}, {"1969-12-01T00:00:00Z", 1}}, 0, PeriodDate32},
		{"no rows", Daily, nil, nil, 0, PeriodDate32},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A second series interleaved with the first checks that dedupe
			// never crosses series.
			tb := &Table{Series: []SeriesMeta{{ID: "x", Frequency: c.freq}, {ID: "other", Frequency: Annual}}}
			for i, r := range c.rows {
				tb.Append(0, ts(r.at), r.v)
				tb.Append(1, ts("2000-01-01T00:00:00Z")+int64(i)*366*86400, -1)
			}
			dir := filepath.Join(t.TempDir(), "s")
			m, st, err := Write(dir, tb, WriteOptions{Dataset: "t", Created: time.Unix(0, 0)})
			if err != nil {
				t.Fatal(err)
			}
			if st.Duplicates != c.dups || m.Duplicates != c.dups {
				t.Errorf("duplicates: stats %d, manifest %d, want %d", st.Duplicates, m.Duplicates, c.dups)
			}
			if want := int64(len(c.want) + len(c.rows)); m.Rows != want || st.Rows != want || st.InputRows != int64(2*len(c.rows)) {
				t.Errorf("rows: manifest %d, stats %+v, want %d", m.Rows, st, want)
			}
			if m.PeriodType != c.ptype {
				t.Errorf("period type %q, want %q", m.PeriodType, c.ptype)
			}
			if _, err := Verify(dir); err != nil {
				t.Fatal(err)
			}
			got := readBack(t, dir, m)["x"]
			if got.freq != c.freq {
				t.Errorf("frequency %q, want %q", got.freq, c.freq)
			}
			if len(got.values) != len(c.want) {
				t.Fatalf("got %d points %v, want %v", len(got.values), got.periods, c.want)
			}
			for i, w := range c.want {
				if got.periods[i] != ts(w.at) || got.values[i] != w.v {
					t.Errorf("point %d = (%s, %v), want (%s, %v)", i, time.Unix(got.periods[i], 0).UTC().Format(time.RFC3339), got.values[i], w.at, w.v)
				}
			}
			if len(c.want) == 0 {
				if got.first != 0 || got.last != 0 || !math.IsNaN(got.latest) {
					t.Errorf("empty series: first %d last %d latest %v, want 0 0 NaN", got.first, got.last, got.latest)
				}
				return
			}
			lw := c.want[len(c.want)-1]
			if got.first != ts(c.want[0].at) || got.last != ts(lw.at) || got.latest != lw.v {
				t.Errorf("index bounds (%d, %d, %v), want (%s, %s, %v)", got.first, got.last, got.latest, c.want[0].at, lw.at, lw.v)
			}
		})
	}
}

func TestInferFrequency(t *testing.T) {
	series := func(start string, step func(time.Time) time.Time, n int) []int64 {
		var out []int64
		for p, i := ts(start), 0; i < n; i++ {
			out = append(out, p)
			p = step(time.Unix(p, 0).UTC()).Unix()
		}
		return out
	}
	add := func(y, m, d int, dur time.Duration) func(time.Time) time.Time {
		return func(t time.Time) time.Time { return t.AddDate(y, m, d).Add(dur) }
	}
	cases := []struct {
		name    string
		periods []int64
		want    Frequency
	}{
		{"hourly", series("2010-01-01T01:00:00Z", add(0, 0, 0, time.Hour), 50), Hourly},
		{"daily", series("2010-01-01T00:00:00Z", add(0, 0, 1, 0), 50), Daily},
		{"business days", []int64{ts("2020-01-02T00:00:00Z"), ts("2020-01-03T00:00:00Z"), ts("2020-01-06T00:00:00Z"), ts("2020-01-07T00:00:00Z"), ts("2020-01-08T00:00:00Z")}, Daily},
		{"weekly", series("2010-01-04T00:00:00Z", add(0, 0, 7, 0), 50), Weekly},
		{"monthly", series("2000-01-01T00:00:00Z", add(0, 1, 0, 0), 50), Monthly},
		{"quarterly", series("2000-01-01T00:00:00Z", add(0, 3, 0, 0), 50), Quarterly},
		{"annual", series("2001-01-01T00:00:00Z", add(1, 0, 0, 0), 17), Annual},
		{"one midnight point", []int64{ts("2001-01-01T00:00:00Z")}, Daily},
		{"one intraday point", []int64{ts("2001-01-01T05:00:00Z")}, Hourly},
		{"repeated point", []int64{ts("2001-01-01T00:00:00Z"), ts("2001-01-01T00:00:00Z")}, Daily},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tb := &Table{Series: []SeriesMeta{{ID: "s"}}}
			for i, p := range c.periods {
				tb.Append(0, p, float64(i))
			}
			dir, m := writeSnap(t, tb, WriteOptions{})
			if got := readBack(t, dir, m)["s"].freq; got != c.want {
				t.Errorf("inferred %q, want %q", got, c.want)
			}
		})
	}
}

func TestWriteRejects(t *testing.T) {
	ok := func() *Table {
		tb := &Table{Series: []SeriesMeta{{ID: "a"}}}
		tb.Append(0, 0, 1)
		return tb
	}
	cases := []struct {
		name    string
		mutate  func(*Table, *WriteOptions)
		wantErr string
	}{
		{"bad dataset name", func(_ *Table, o *WriteOptions) { o.Dataset = "../x" }, "invalid dataset name"},
		{"empty dataset name", func(_ *Table, o *WriteOptions) { o.Dataset = "" }, "invalid dataset name"},
		{"ragged columns", func(tb *Table, _ *WriteOptions) { tb.Value = append(tb.Value, 2) }, "disagree"},
		{"empty id", func(tb *Table, _ *WriteOptions) { tb.Series[0].ID = "" }, "empty id"},
		{"duplicate id", func(tb *Table, _ *WriteOptions) { tb.Series = append(tb.Series, SeriesMeta{ID: "a"}) }, "appears twice"},
		{"bad frequency", func(tb *Table, _ *WriteOptions) { tb.Series[0].Frequency = "X" }, "unknown frequency"},
		{"series out of range", func(tb *Table, _ *WriteOptions) { tb.SeriesIdx[0] = 1 }, "out of range"},
		{"NaN", func(tb *Table, _ *WriteOptions) { tb.Value[0] = math.NaN() }, "not a finite"},
		{"Inf", func(tb *Table, _ *WriteOptions) { tb.Value[0] = math.Inf(-1) }, "not a finite"},
		// A period whose day number does not fit date32 would wrap around
		// silently and break the sort order of the file.
		{"period after date32 range", func(tb *Table, _ *WriteOptions) { tb.Period[0] = (math.MaxInt32 + 10) * 86400 }, "outside the supported range"},
		{"period before date32 range", func(tb *Table, _ *WriteOptions) { tb.Period[0] = math.MinInt64 }, "outside the supported range"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tb := ok()
			o := WriteOptions{Dataset: "t"}
			c.mutate(tb, &o)
			dir := filepath.Join(t.TempDir(), "s")
			_, _, err := Write(dir, tb, o)
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("Write: %v, want an error containing %q", err, c.wantErr)
			}
			if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("failed Write left %s behind (%v)", dir, serr)
			}
		})
	}
	// The directory must not exist beforehand.
	dir := t.TempDir()
	if _, _, err := Write(dir, ok(), WriteOptions{Dataset: "t"}); err == nil {
		t.Fatal("Write into an existing directory succeeded")
	}
}
