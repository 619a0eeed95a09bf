package functions

import (
	"errors"
	"fmt"
	"slices"
)

// MaxFrameCells bounds the cells (dates x (series + 1)) of a Frame on a calendar
// (days=), checked before the calendar is built: 64M, a 512 MiB table.
const MaxFrameCells = 64 << 20

// ErrNoData: none of the series has a point in the range (wrap it).
var ErrNoData = errors.New("no data")

// Frame is the data of an ES.Get held column by column, for callers that lay out more
// cells than a spilled result may hold: functions/xlsx writes workbooks from it. It
// goes through the same steps as ES.Get (fetch, re-sample with per=, agg= and days=,
// align, fill=, the transforms, last=) but boxes no cell and is not bounded by MaxCells;
// memory is the points the Source returned plus one date per row.
//
// Layout options (order, headers, dates, transpose) are the caller's. Unlike ES.Get,
// where one bad series fails only its column, a Frame fails as a whole: an export
// cannot show a reason in a column.
type Frame struct {
	IDs   []string // as asked, in order
	Dates []int64  // the union of the series' dates (unix seconds UTC), ascending, no repeats
	// Points[j] is how many points series j has in the frame (after re-sampling and last=).
	Points []int
	Fill   Fill

	cols []column
}

// dataError is an error with its own message that still matches a sentinel.
type dataError struct {
	msg string
	err error
}

func (e *dataError) Error() string { return e.msg }
func (e *dataError) Unwrap() error { return e.err }

// Frame evaluates ES.Get(ids, from, to, opts) without laying it out. from and to are
// unix seconds UTC, inclusive (MinTime and MaxTime for unbounded, as ParseDate gives).
// Errors: a series the Source does not have wraps ErrNotFound; a range in which no
// series has a point wraps ErrNoData; other Source errors are wrapped with the series id.
func (e *Engine) Frame(ids []string, from, to int64, opts Options) (*Frame, error) {
	switch {
	case e.Src == nil:
		return nil, errors.New("no data source")
	case len(ids) == 0:
		return nil, errors.New("no series")
	case len(ids) > MaxSeries:
		return nil, fmt.Errorf("%d series; at most %d", len(ids), MaxSeries)
	case from > to:
		return nil, fmt.Errorf("start %s is after end %s", formatTime(from), formatTime(to))
	}
	tb, cerr := e.asOf(opts.AsOf).assemble(ids, from, to, &opts, MaxFrameCells)
	for _, c := range tb.cols {
		if c.err != nil { // a Frame fails as a whole
			return nil, c.cause
		}
	}
	switch {
	case cerr != nil && cerr.Code == CodeNA:
		return nil, &dataError{msg: cerr.Message, err: ErrNoData}
	case cerr != nil:
		return nil, fmt.Errorf("%s: more than %d cells", cerr.Message, MaxFrameCells)
	}
	f := &Frame{IDs: ids, Fill: tb.fill, cols: tb.cols, Points: make([]int, len(ids)), Dates: tb.all}
	if opts.Last > 0 && len(f.Dates) > opts.Last {
		f.Dates = f.Dates[len(f.Dates)-opts.Last:]
	}
	first := f.Dates[0]
	for j, c := range f.cols {
		k, _ := slices.BinarySearch(c.periods, first)
		f.Points[j] = countDistinct(c.periods[k:])
	}
	return f, nil
}

func countDistinct(p []int64) int {
	n := 0
	for i := range p {
		if i == 0 || p[i] != p[i-1] {
			n++
		}
	}
	return n
}

// Rows calls fn for each date of the frame, oldest first, with the row's values in
// the order of IDs. A NaN is a date without a value: with FillNone (and FillPrev before
// a series' first value) it is an empty cell, with FillNA a #N/A cell. FillPrev is
// already applied, from the last value before the first date (which last= may have
// cut off). row is reused between calls; fn must not keep it. An error from fn stops
// the walk and is returned.
func (f *Frame) Rows(fn func(i int, date int64, row []float64) error) error {
	if len(f.Dates) == 0 {
		return nil
	}
	var err error
	walkRows(f.cols, f.Dates, f.Fill, func(i int, t int64, row []float64) bool {
		err = fn(i, t, row)
		return err == nil
	})
	return err
}
