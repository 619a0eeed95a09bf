package functions

import "github.com/energyscope/energyscope/internal/calendar"

// Calendar steps on unix seconds, UTC, over internal/calendar's day arithmetic: the
// per-point paths (bucketing, serials) use these instead of time.Time.

const secondsPerDay = 86400

// addMonths moves y-m-d by n months, clamping the day to the end of the target month
// (2024-02-29 minus 1 year is 2023-02-28, not March 1st as time.AddDate would give).
func addMonths(y, m, d, n int64) (int64, int64, int64) {
	mm := y*12 + (m - 1) + n
	y = calendar.FloorDiv(mm, 12)
	m = mm - y*12 + 1
	if dim := calendar.DaysInMonth(y, m); d > dim {
		d = dim
	}
	return y, m, d
}

// bucketStart returns the start of the re-sampling bucket holding t and the start of the
// next one: per is 'D', 'W' (weeks start Monday), 'M', 'Q' or 'A'.
func bucketStart(t int64, per byte) (start, next int64) {
	day := calendar.FloorDiv(t, secondsPerDay)
	switch per {
	case 'D':
		return day * secondsPerDay, (day + 1) * secondsPerDay
	case 'W':
		// 1970-01-01 was a Thursday: day 0 is 3 days after a Monday.
		mon := day - (((day+3)%7)+7)%7
		return mon * secondsPerDay, (mon + 7) * secondsPerDay
	}
	y, m, _ := calendar.CivilFromDays(day)
	var n int64
	switch per {
	case 'Q':
		m = (m-1)/3*3 + 1
		n = 3
	case 'A':
		m, n = 1, 12
	default: // 'M'
		n = 1
	}
	ny, nm, _ := addMonths(y, m, 1, n)
	return calendar.DaysFromCivil(y, m, 1) * secondsPerDay, calendar.DaysFromCivil(ny, nm, 1) * secondsPerDay
}
