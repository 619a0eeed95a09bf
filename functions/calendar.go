package functions

// Civil-date arithmetic on unix seconds, UTC, proleptic Gregorian calendar. The per-point
// paths (bucketing, serials) use these instead of time.Time: they are branch-light,
// allocation-free and total (no panic for any int64, though results far outside years
// 1..9999 are meaningless).

const secondsPerDay = 86400

// floorDiv is a/b rounded toward negative infinity, for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// daysFromCivil is the number of days from 1970-01-01 to y-m-d (m 1..12, d 1..31).
// Howard Hinnant's algorithm (chrono-Compatible Low-Level Date Algorithms).
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// civilFromDays is the inverse of daysFromCivil.
func civilFromDays(z int64) (y, m, d int64) {
	z += 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	if mp < 10 {
		m = mp + 3
	} else {
		m = mp - 9
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

func isLeap(y int64) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func daysInMonth(y, m int64) int64 {
	switch m {
	case 2:
		if isLeap(y) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// addMonths moves y-m-d by n months, clamping the day to the end of the target month
// (2024-02-29 minus 1 year is 2023-02-28, not March 1st as time.AddDate would give).
func addMonths(y, m, d, n int64) (int64, int64, int64) {
	mm := y*12 + (m - 1) + n
	y = floorDiv(mm, 12)
	m = mm - y*12 + 1
	if dim := daysInMonth(y, m); d > dim {
		d = dim
	}
	return y, m, d
}

// bucketStart returns the start of the re-sampling bucket holding t and the start of the
// next one: per is 'D', 'W' (weeks start Monday), 'M', 'Q' or 'A'.
func bucketStart(t int64, per byte) (start, next int64) {
	day := floorDiv(t, secondsPerDay)
	switch per {
	case 'D':
		return day * secondsPerDay, (day + 1) * secondsPerDay
	case 'W':
		// 1970-01-01 was a Thursday: day 0 is 3 days after a Monday.
		mon := day - (((day+3)%7)+7)%7
		return mon * secondsPerDay, (mon + 7) * secondsPerDay
	}
	y, m, _ := civilFromDays(day)
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
	return daysFromCivil(y, m, 1) * secondsPerDay, daysFromCivil(ny, nm, 1) * secondsPerDay
}
