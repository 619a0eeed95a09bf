package format

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
)

// SortedTable is a table whose rows are already in the form Write gives
// them: series in strictly increasing id order, each series' periods
// normalized to its frequency, strictly increasing, without duplicates.
// Compaction builds one from the old snapshot (whose columns are in that
// form already) and the delta, which spares it Write's sort and
// normalization; untouched series are bulk copies of the old columns.
//
// WriteSorted of a SortedTable writes exactly the files Write writes for
// a Table holding the same rows (same bytes, same snapshot id).
type SortedTable struct {
	series []SeriesMeta
	c      cooked
	err    error
}

// NewSortedTable returns an empty table whose period column has type pt,
// which must be what Write would choose for the rows: PeriodTimestamp if
// and only if some series is intraday. The hints size the columns.
func NewSortedTable(pt PeriodType, seriesHint, rowsHint int) *SortedTable {
	s := &SortedTable{series: make([]SeriesMeta, 0, seriesHint)}
	s.c = cooked{
		periodType: pt,
		order:      make([]uint32, 0, seriesHint),
		freq:       make([]Frequency, 0, seriesHint),
		start:      make([]int64, 0, seriesHint+1),
		series:     make([]uint32, 0, rowsHint),
		value:      make([]float64, 0, rowsHint),
	}
	if pt == PeriodTimestamp {
		s.c.secs = make([]int64, 0, rowsHint)
	} else {
		s.c.days = make([]int32, 0, rowsHint)
	}
	return s
}

// AddSeries starts the next series; the rows appended next are its rows.
// Its Frequency must be set (any spelling ParseFrequency accepts).
func (s *SortedTable) AddSeries(m SeriesMeta) {
	if s.err != nil {
		return
	}
	if n := len(s.series); n > 0 && !(s.series[n-1].ID < m.ID) {
		s.err = fmt.Errorf("series %q does not follow %q: ids must strictly increase", m.ID, s.series[n-1].ID)
		return
	}
	if m.ID == "" {
		s.err = errors.New("empty series id")
		return
	}
	f, err := ParseFrequency(string(m.Frequency))
	if err != nil {
		s.err = fmt.Errorf("series %q: %w", m.ID, err)
		return
	}
	r := uint32(len(s.series))
	s.series = append(s.series, m)
	s.c.order = append(s.c.order, r)
	s.c.freq = append(s.c.freq, f)
	s.c.start = append(s.c.start, int64(len(s.c.value)))
}

// AppendDays appends rows given as day numbers (unix days) to the current
// series. days and values are copied.
func (s *SortedTable) AppendDays(days []int32, values []float64) {
	if s.err != nil {
		return
	}
	if s.c.secs != nil {
		for i, d := range days {
			s.Append(int64(d)*86400, values[i])
		}
		return
	}
	s.grow(len(days))
	s.c.days = append(s.c.days, days...)
	s.c.value = append(s.c.value, values...)
}

// AppendSecs appends rows given as unix seconds to the current series.
func (s *SortedTable) AppendSecs(secs []int64, values []float64) {
	if s.err != nil {
		return
	}
	if s.c.secs == nil {
		for i, p := range secs {
			s.Append(p, values[i])
		}
		return
	}
	s.grow(len(secs))
	s.c.secs = append(s.c.secs, secs...)
	s.c.value = append(s.c.value, values...)
}

// Append appends one row (unix seconds) to the current series.
func (s *SortedTable) Append(period int64, value float64) {
	if s.err != nil {
		return
	}
	if s.c.secs == nil {
		if period%86400 != 0 {
			s.err = fmt.Errorf("period %d is not a day start in a date32 table", period)
			return
		}
		if period < MinPeriod || period > MaxPeriod {
			s.err = fmt.Errorf("period %d is outside the supported range", period)
			return
		}
		s.c.days = append(s.c.days, int32(period/86400))
	} else {
		s.c.secs = append(s.c.secs, period)
	}
	s.c.value = append(s.c.value, value)
	s.c.series = append(s.c.series, uint32(len(s.series)-1))
}

// grow extends the series column by n rows of the current series.
func (s *SortedTable) grow(n int) {
	if len(s.series) == 0 {
		if n > 0 {
			s.err = errors.New("rows appended before any series")
		}
		return
	}
	r := uint32(len(s.series) - 1)
	at := len(s.c.series)
	s.c.series = slices.Grow(s.c.series, n)[:at+n]
	for i := at; i < at+n; i++ {
		s.c.series[i] = r
	}
}

// Len is the number of rows.
func (s *SortedTable) Len() int { return len(s.c.value) }

// ErrNotSorted wraps every reason WriteSorted refuses a table: the rows
// are not in the form Write would give them. Write the rows with Write
// instead.
var ErrNotSorted = errors.New("table is not sorted and normalized")

// check verifies what Write's cook would otherwise establish, so that a
// table that is not in its form is refused rather than written
// differently from Write.
func (s *SortedTable) check() error {
	if s.err != nil {
		return s.err
	}
	c := &s.c
	if len(c.series) != len(c.value) || (c.secs != nil && len(c.secs) != len(c.value)) || (c.secs == nil && len(c.days) != len(c.value)) {
		return errors.New("columns disagree")
	}
	if len(s.series) > math.MaxUint32-1 {
		return errors.New("too many series")
	}
	intraday := false
	for _, f := range c.freq {
		if f.Intraday() {
			intraday = true
		}
	}
	if intraday != (c.periodType == PeriodTimestamp) {
		return fmt.Errorf("period type %s does not fit the frequencies", c.periodType)
	}
	for _, v := range c.value {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("value %v is not a finite number", v)
		}
	}
	ns := len(s.series)
	for r := range ns {
		lo, hi := c.start[r], int64(len(c.value))
		if r+1 < ns {
			hi = c.start[r+1]
		}
		f := c.freq[r]
		if c.secs != nil {
			for i := lo; i < hi; i++ {
				p := c.secs[i]
				if (i > lo && p <= c.secs[i-1]) || p < MinPeriod || p > MaxPeriod || f.Normalize(p) != p {
					return fmt.Errorf("series %q: period %d out of order, out of range or not normalized", s.series[r].ID, p)
				}
			}
			continue
		}
		for i := lo; i < hi; i++ {
			d := c.days[i]
			if i > lo && d <= c.days[i-1] {
				return fmt.Errorf("series %q: day %d out of order", s.series[r].ID, d)
			}
			if p := int64(d) * 86400; p < MinPeriod || (f != Daily && f.Normalize(p) != p) {
				return fmt.Errorf("series %q: day %d out of range or not normalized", s.series[r].ID, d)
			}
		}
	}
	return nil
}

// WriteSorted is Write for a SortedTable: the same files, byte for byte,
// as Write of the same rows, without sorting or normalizing them. A table
// that is not sorted and normalized is refused with an error wrapping
// ErrNotSorted, and nothing is written. The table must not be used
// afterwards.
func WriteSorted(dir string, s *SortedTable, o WriteOptions) (m *Manifest, st WriteStats, err error) {
	if err := ValidDatasetName(o.Dataset); err != nil {
		return nil, st, err
	}
	if err := s.check(); err != nil {
		return nil, st, fmt.Errorf("%w: %v", ErrNotSorted, err)
	}
	if err := startWrite(dir, &o); err != nil {
		return nil, st, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	return writeCooked(dirSink(dir), s.finished(), &Table{Series: s.series}, int64(len(s.c.value)), o)
}

// finished closes the per-series bounds (start[len(order)] = rows) and
// returns the cooked rows.
func (s *SortedTable) finished() *cooked {
	c := &s.c
	c.start = append(c.start, int64(len(c.value)))
	return c
}
