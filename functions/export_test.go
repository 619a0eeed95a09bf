package functions

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestFrameMatchesGet holds Frame against ES.Get: for the same series, dates and
// options, every row of the frame is the row ES.Get spills (dates as serials, NaN as
// an empty cell or #N/A).
func TestFrameMatchesGet(t *testing.T) {
	e := newEngine(t)
	cases := []struct {
		ids      string
		from, to string
		opts     string
	}{
		{"MSFT", "", "", ""},
		{"MSFT,GOOG", "2004-06", "2004-09", ""},
		{"MSFT,GOOG,IBM", "2003", "2005", "fill=prev"},
		{"MSFT,GOOG", "2003", "2005", "fill=na"},
		{"MSFT,GOOG", "2000", "2010", "per=A;agg=avg"},
		{"MSFT,GOOG", "", "", "per=Q;agg=max;last=7;fill=prev"},
		{"Fossil Fuels,MSFT", "2001", "2004", "fill=prev"},
		{"SEA.TEMPERATURE,SEA.WIND", "2010-01-01", "2010-01-03", "per=D;agg=min"},
		{"SEA.TEMPERATURE,AAPL", "2010-01", "", "last=30;fill=prev"},
	}
	for _, c := range cases {
		ids := strings.Split(c.ids, ",")
		args := []any{c.ids, c.from, c.to, c.opts}
		r := e.Call("ES.Get", args)
		if r.Err != nil {
			t.Fatalf("%v: %v", args, r.Err)
		}
		opts, err := ParseOptions([]any{c.opts})
		if err != nil {
			t.Fatal(err)
		}
		from, _ := ParseDate(c.from, testNow, false)
		to, _ := ParseDate(c.to, testNow, true)
		f, err := e.Frame(ids, from, to, opts)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if len(f.Dates) != len(r.Value) {
			t.Fatalf("%v: %d rows, ES.Get %d", args, len(f.Dates), len(r.Value))
		}
		err = f.Rows(func(i int, date int64, row []float64) error {
			want := r.Value[i]
			if ExcelSerial(date) != want[0] {
				t.Fatalf("%v row %d: date %v, want %v", args, i, ExcelSerial(date), want[0])
			}
			for j, x := range row {
				w := want[j+1]
				switch {
				case math.IsNaN(x) && opts.Fill == FillNA:
					if ce, ok := w.(*CellError); !ok || ce.Code != CodeNA {
						t.Fatalf("%v row %d col %d: NaN, ES.Get %v", args, i, j, w)
					}
				case math.IsNaN(x):
					if w != nil {
						t.Fatalf("%v row %d col %d: empty, ES.Get %v", args, i, j, w)
					}
				case w != x:
					t.Fatalf("%v row %d col %d: %v, ES.Get %v", args, i, j, x, w)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestFrameErrors(t *testing.T) {
	e := newEngine(t)
	opts := DefaultOptions()
	if _, err := e.Frame([]string{"MSFT", "NOPE"}, MinTime, MaxTime, opts); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"NOPE"`) {
		t.Fatalf("unknown series: %v", err)
	}
	from, _ := ParseDate("2030", testNow, false)
	if _, err := e.Frame([]string{"MSFT"}, from, MaxTime, opts); !errors.Is(err, ErrNoData) || err.Error() != "no data for MSFT on or after 2030-01-01" {
		t.Fatalf("empty range: %v", err)
	}
	if _, err := e.Frame(nil, MinTime, MaxTime, opts); err == nil {
		t.Fatal("no series: no error")
	}
	if _, err := e.Frame([]string{"MSFT"}, MaxTime, MinTime, opts); err == nil {
		t.Fatal("from > to: no error")
	}
	stop := errors.New("stop")
	f, err := e.Frame([]string{"MSFT"}, MinTime, MaxTime, opts)
	if err != nil {
		t.Fatal(err)
	}
	if f.Points[0] != 123 {
		t.Fatalf("MSFT points %d", f.Points[0])
	}
	if err := f.Rows(func(i int, _ int64, _ []float64) error { return stop }); err != stop {
		t.Fatalf("Rows error: %v", err)
	}
}
