package synth

import (
	"errors"
	"strconv"
	"testing"
	"time"
)

// TestEachMatchesCSV: Each yields the rows WriteCSV writes, row for row:
// the same series in the same order with their metadata, periods and
// values.
func TestEachMatchesCSV(t *testing.T) {
	o := Options{Series: 300, Rows: 40_000, Seed: 7, Intraday: true}
	b, st := writeCSV(t, o)
	recs := readCSV(t, b)
	row := 0
	freqs := map[string]bool{}
	est, err := Each(o, func(s SeriesSpec, periods []int64, values []float64) error {
		if len(periods) != s.Length || len(values) != s.Length {
			t.Fatalf("%s: %d periods, %d values, length %d", s.ID, len(periods), len(values), s.Length)
		}
		freqs[s.Frequency] = true
		for j := range periods {
			r := recs[row]
			row++
			layout := time.DateOnly
			if s.Frequency == "H" {
				layout = "2006-01-02T15:04:05"
			}
			v, err := strconv.ParseFloat(r[2], 64)
			if err != nil {
				t.Fatal(err)
			}
			if r[0] != s.ID || r[3] != s.Unit || r[4] != s.Name || r[5] != s.Source || r[6] != s.Frequency ||
				time.Unix(periods[j], 0).UTC().Format(layout) != r[1] || v != values[j] {
				t.Fatalf("row %d: CSV %q, Each %s %s %v", row, r, s.ID, time.Unix(periods[j], 0).UTC().Format(layout), values[j])
			}
		}
		if !s.Start.Equal(time.Unix(periods[0], 0)) || !s.End.Equal(time.Unix(periods[len(periods)-1], 0)) {
			t.Fatalf("%s: start %v end %v, periods %d..%d", s.ID, s.Start, s.End, periods[0], periods[len(periods)-1])
		}
		return nil
	})
	if err != nil || est != st || row != len(recs) {
		t.Fatalf("Each: %+v %v, %d rows seen; CSV %+v, %d rows", est, err, row, st, len(recs))
	}
	if len(freqs) != 5 {
		t.Fatalf("frequencies %v, want all five", freqs)
	}
	stop := errors.New("stop")
	n := 0
	if _, err := Each(o, func(SeriesSpec, []int64, []float64) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("fn's error: %v after %d calls", err, n)
	}
	if _, err := Each(Options{Series: 2, Rows: 1}, func(SeriesSpec, []int64, []float64) error { return nil }); err == nil {
		t.Fatal("invalid options accepted")
	}
}
