package calendar

// Periods on unix seconds, UTC: the one place that knows where an hour, a day, a week, a
// month, a quarter or a year starts. The snapshot format normalizes every period to the
// start of its bucket with Bucket, and functions re-samples and lays out calendars with
// Bucket, Next, Prev and Count.

// SecondsPerDay is the length of a civil day: UTC has no leap seconds in unix time.
const SecondsPerDay = 86400

// Frequency is the length of a period, by its one-letter code: the codes of the snapshot
// format (H, D, W, M, Q, A) and functions' business day (B). Any other value behaves as
// Monthly, so that every byte has a defined bucket.
type Frequency byte

// The frequencies, finest first.
const (
	Hourly    Frequency = 'H'
	Daily     Frequency = 'D'
	Business  Frequency = 'B' // a weekday: Saturday and Sunday belong to the Monday after
	Weekly    Frequency = 'W' // weeks start on Monday
	Monthly   Frequency = 'M'
	Quarterly Frequency = 'Q'
	Annual    Frequency = 'A'
)

// Bucket returns the start of the period of frequency f that holds t (unix seconds, UTC)
// and the start of the next one.
//
// For every frequency but Business, start <= t < next (for t whose next period is
// representable), start is at most a year below t, and Bucket is monotone: a <= b implies
// Bucket(a).start <= Bucket(b).start, which the snapshot writer relies on to dedupe in a
// single sort. A Business bucket of a Saturday or Sunday is the Monday after, so its start
// may lie after t.
func (f Frequency) Bucket(t int64) (start, next int64) {
	if f == Hourly {
		h := FloorDiv(t, 3600) * 3600
		return h, h + 3600
	}
	day := FloorDiv(t, SecondsPerDay)
	switch f {
	case Daily:
		return day * SecondsPerDay, (day + 1) * SecondsPerDay
	case Business:
		if wd := Weekday(day); wd >= 5 {
			day += 7 - wd
		}
		return day * SecondsPerDay, (day + 1) * SecondsPerDay
	case Weekly:
		mon := day - Weekday(day)
		return mon * SecondsPerDay, (mon + 7) * SecondsPerDay
	}
	// The start is found from the day of the month (no second trip through
	// DaysFromCivil) and the next one by adding the months' lengths: this is
	// the per-row path of the snapshot writer and the per-point path of
	// functions' re-sampling.
	y, m, d := CivilFromDays(day)
	first := day - d + 1 // the 1st of t's month
	switch f {
	case Quarterly:
		for q := (m-1)/3*3 + 1; m > q; {
			m--
			first -= DaysInMonth(y, m)
		}
		next := first + DaysInMonth(y, m) + DaysInMonth(y, m+1) + DaysInMonth(y, m+2)
		return first * SecondsPerDay, next * SecondsPerDay
	case Annual:
		jan1 := DaysFromCivil(y, 1, 1)
		n := int64(365)
		if IsLeap(y) {
			n = 366
		}
		return jan1 * SecondsPerDay, (jan1 + n) * SecondsPerDay
	}
	return first * SecondsPerDay, (first + DaysInMonth(y, m)) * SecondsPerDay
}

// Next is the start of the bucket after the one starting at start.
func (f Frequency) Next(start int64) int64 {
	if f == Business {
		day := FloorDiv(start, SecondsPerDay) + 1
		if wd := Weekday(day); wd >= 5 {
			day += 7 - wd
		}
		return day * SecondsPerDay
	}
	_, next := f.Bucket(start)
	return next
}

// Prev is the start of the bucket before the one starting at start.
func (f Frequency) Prev(start int64) int64 {
	if f == Business {
		day := FloorDiv(start, SecondsPerDay) - 1
		if wd := Weekday(day); wd >= 5 {
			day -= wd - 4
		}
		return day * SecondsPerDay
	}
	s, _ := f.Bucket(start - 1)
	return s
}

// Count is the number of buckets from the one starting at a to the one starting at b,
// both included (0 if b < a).
func (f Frequency) Count(a, b int64) int64 {
	if b < a {
		return 0
	}
	if f == Hourly {
		return FloorDiv(b, 3600) - FloorDiv(a, 3600) + 1
	}
	da, db := FloorDiv(a, SecondsPerDay), FloorDiv(b, SecondsPerDay)
	switch f {
	case Daily:
		return db - da + 1
	case Weekly:
		return (db-da)/7 + 1
	case Business:
		return weekdaysBefore(db+1) - weekdaysBefore(da)
	}
	ya, ma, _ := CivilFromDays(da)
	yb, mb, _ := CivilFromDays(db)
	months := (yb-ya)*12 + mb - ma
	switch f {
	case Quarterly:
		return months/3 + 1
	case Annual:
		return months/12 + 1
	}
	return months + 1
}

// AddMonths moves y-m-d by n months, clamping the day to the end of the target month
// (2024-02-29 minus 1 year is 2023-02-28, not March 1st as time.AddDate would give).
func AddMonths(y, m, d, n int64) (int64, int64, int64) {
	mm := y*12 + (m - 1) + n
	y = FloorDiv(mm, 12)
	m = mm - y*12 + 1
	if dim := DaysInMonth(y, m); d > dim {
		d = dim
	}
	return y, m, d
}

// Weekday is 0 for Monday to 6 for Sunday (1970-01-01, day 0, was a Thursday).
func Weekday(day int64) int64 { return ((day+3)%7 + 7) % 7 }

// weekdaysBefore counts the weekdays before day, from Monday 1969-12-29 (day -3).
func weekdaysBefore(day int64) int64 {
	x := day + 3
	w := FloorDiv(x, 7)
	return w*5 + min(x-w*7, 5)
}
