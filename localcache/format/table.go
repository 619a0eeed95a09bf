package format

import (
	"fmt"

	"github.com/energyscope/energyscope/internal/calendar"
)

// Frequency is the sampling frequency of a series. Periods are normalized to
// the start of their frequency bucket before they are stored or merged.
type Frequency string

// The frequencies a series may have, finest first.
const (
	Hourly    Frequency = "H"
	Daily     Frequency = "D"
	Weekly    Frequency = "W" // buckets start on Monday
	Monthly   Frequency = "M"
	Quarterly Frequency = "Q"
	Annual    Frequency = "A"
)

// ParseFrequency accepts the one-letter codes and common spellings
// ("daily", "weekly", "month", "annual", "yearly", "hourly", ...).
func ParseFrequency(s string) (Frequency, error) {
	switch s {
	case "H", "h", "hourly", "hour", "1h", "HOURLY":
		return Hourly, nil
	case "D", "d", "daily", "day", "DAILY":
		return Daily, nil
	case "W", "w", "weekly", "week", "WEEKLY":
		return Weekly, nil
	case "M", "m", "monthly", "month", "MONTHLY":
		return Monthly, nil
	case "Q", "q", "quarterly", "quarter", "QUARTERLY":
		return Quarterly, nil
	case "A", "a", "Y", "y", "annual", "yearly", "year", "ANNUAL", "YEARLY":
		return Annual, nil
	}
	return "", fmt.Errorf("unknown frequency %q (want H, D, W, M, Q or A)", s)
}

// Intraday reports whether periods of this frequency need a time of day.
func (f Frequency) Intraday() bool { return f == Hourly }

// Normalize maps a unix time (seconds, UTC) to the start of its bucket.
// Normalize is monotone: a <= b implies Normalize(a) <= Normalize(b), which
// the writer relies on to dedupe in a single sort. The arithmetic is
// internal/calendar's Frequency.Bucket, the one owner of where a period starts.
func (f Frequency) Normalize(unix int64) int64 {
	start, _ := f.calendarFreq().Bucket(unix)
	return start
}

// calendarFreq is f as internal/calendar's frequency. "" is Daily, as for a
// series whose frequency was never inferred; a spelling that ParseFrequency
// has not turned into its letter buckets by month, as Normalize always did.
func (f Frequency) calendarFreq() calendar.Frequency {
	switch f {
	case Hourly:
		return calendar.Hourly
	case Daily, "":
		return calendar.Daily
	case Weekly:
		return calendar.Weekly
	case Quarterly:
		return calendar.Quarterly
	case Annual:
		return calendar.Annual
	}
	return calendar.Monthly
}

// PeriodType is the Arrow type of the period column of a snapshot.
type PeriodType string

const (
	// PeriodDate32 stores days since the epoch; used when every series is
	// daily or coarser.
	PeriodDate32 PeriodType = "date32"
	// PeriodTimestamp stores seconds since the epoch, UTC; used when any
	// series is intraday.
	PeriodTimestamp PeriodType = "timestamp[s, UTC]"
)

// SeriesMeta is the descriptive part of a series, stored once per series in
// index.arrow and never per row.
type SeriesMeta struct {
	ID        string
	Name      string
	Unit      string
	Source    string
	Frequency Frequency // "" means infer from the spacing of its periods
	Tier      Tier      // Hot unless the cook places the series in the cold tier
}

// Tier routes a series to the file that holds its rows.
type Tier uint8

const (
	Hot  Tier = 0 // data.arrow, zero-copy
	Cold Tier = 1 // tail file, compressed, decoded on demand
)

// Table is the input of Write: rows in any order, possibly with duplicates.
// Row i belongs to Series[SeriesIdx[i]] and has period Period[i] (unix
// seconds, UTC, not yet normalized) and value Value[i]. When two rows
// normalize to the same (series, period), the one with the larger row index
// wins ("last one wins"): append rows in input order.
type Table struct {
	Series    []SeriesMeta
	SeriesIdx []uint32
	Period    []int64
	Value     []float64
}

// Append adds one row.
func (t *Table) Append(series uint32, period int64, value float64) {
	t.SeriesIdx = append(t.SeriesIdx, series)
	t.Period = append(t.Period, period)
	t.Value = append(t.Value, value)
}

// Len is the number of rows.
func (t *Table) Len() int { return len(t.Period) }
