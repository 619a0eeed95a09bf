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

// weekday is 0 for Monday to 6 for Sunday (1970-01-01, day 0, was a Thursday).
func weekday(day int64) int64 { return ((day+3)%7 + 7) % 7 }

// bucketStart returns the start of the re-sampling bucket holding t and the start of the
// next one: per is 'D', 'B' (a weekday: Saturday and Sunday belong to the Monday after),
// 'W' (weeks start Monday), 'M', 'Q' or 'A'. A 'B' bucket may start after t.
func bucketStart(t int64, per byte) (start, next int64) {
	day := calendar.FloorDiv(t, secondsPerDay)
	switch per {
	case 'D':
		return day * secondsPerDay, (day + 1) * secondsPerDay
	case 'B':
		if wd := weekday(day); wd >= 5 {
			day += 7 - wd
		}
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

// nextBucket is the start of the bucket after the one starting at start.
func nextBucket(start int64, per byte) int64 {
	if per == 'B' {
		day := calendar.FloorDiv(start, secondsPerDay) + 1
		if wd := weekday(day); wd >= 5 {
			day += 7 - wd
		}
		return day * secondsPerDay
	}
	_, next := bucketStart(start, per)
	return next
}

// prevBucket is the start of the bucket before the one starting at start.
func prevBucket(start int64, per byte) int64 {
	if per == 'B' {
		day := calendar.FloorDiv(start, secondsPerDay) - 1
		if wd := weekday(day); wd >= 5 {
			day -= wd - 4
		}
		return day * secondsPerDay
	}
	s, _ := bucketStart(start-1, per)
	return s
}

// countBuckets is the number of buckets from the one starting at a to the one starting
// at b, both included (0 if b < a).
func countBuckets(a, b int64, per byte) int64 {
	if b < a {
		return 0
	}
	da, db := calendar.FloorDiv(a, secondsPerDay), calendar.FloorDiv(b, secondsPerDay)
	switch per {
	case 'D':
		return db - da + 1
	case 'W':
		return (db-da)/7 + 1
	case 'B':
		return weekdaysBefore(db+1) - weekdaysBefore(da)
	}
	ya, ma, _ := calendar.CivilFromDays(da)
	yb, mb, _ := calendar.CivilFromDays(db)
	months := (yb-ya)*12 + mb - ma
	switch per {
	case 'Q':
		return months/3 + 1
	case 'A':
		return months/12 + 1
	}
	return months + 1
}

// weekdaysBefore counts the weekdays before day, from Monday 1969-12-29 (day -3).
func weekdaysBefore(day int64) int64 {
	x := day + 3
	w := calendar.FloorDiv(x, 7)
	return w*5 + min(x-w*7, 5)
}

// yearBefore is t moved back one year, the day clamped to the month's end (2024-02-29
// gives 2023-02-28), the time of day kept.
func yearBefore(t int64) int64 {
	day := calendar.FloorDiv(t, secondsPerDay)
	sec := t - day*secondsPerDay
	y, m, d := calendar.CivilFromDays(day)
	return calendar.DaysFromCivil(addMonths(y, m, d, -12))*secondsPerDay + sec
}
