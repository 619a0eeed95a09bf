// Package calendar is civil-date arithmetic on day numbers (days since 1970-01-01) in
// the proleptic Gregorian calendar, and the periods on unix seconds built on it, with
// plain integers: the per-point and per-row loops use it instead of time.Time. It is the
// one owner of period arithmetic: Frequency.Bucket says where an hour, day, week, month,
// quarter or year starts for the snapshot format's normalization (localcache/format),
// functions' re-sampling and calendars, and the date parsing of server/cook and its
// synth generator. The functions are branch-light, allocation-free and total (no panic
// for any input; results far outside years 1..9999 are meaningless but defined).
//
// Map: calendar.go, day numbers (DaysFromCivil, CivilFromDays, DaysInMonth); period.go,
// Frequency and its Bucket, Next, Prev and Count, AddMonths and Weekday.
//
// It imports nothing, so that the format, functions (stdlib and internal only) and the
// cook may all import it. It is not a date library: no zones, no parsing, no formatting,
// and not the limits of a period a snapshot holds (localcache/format's MinPeriod and
// MaxPeriod: they come from date32).
package calendar

// FloorDiv is a/b rounded toward negative infinity, for b > 0.
func FloorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// DaysFromCivil is the number of days from 1970-01-01 to y-m-d (m 1..12, d 1..31).
// Howard Hinnant's algorithm (chrono-Compatible Low-Level Date Algorithms).
func DaysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := FloorDiv(y, 400)
	yoe := y - era*400 // [0, 399]
	mp := (m + 9) % 12 // March = 0
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// CivilFromDays is the inverse of DaysFromCivil. Cassio Neri and Lorenz
// Schneider's algorithm (Euclidean affine functions and their application to
// calendar algorithms, 2022), as package time uses it: one division by a
// constant per step, on unsigned integers shifted by 2^30 eras of 400 years,
// so that it is exact for every day of a unix time in seconds (|z| < 1.1e14).
func CivilFromDays(z int64) (y, m, d int64) {
	const (
		eras = 1 << 30
		k    = 719468 + 146097*eras // 0000-03-01 moved eras*400 years earlier
	)
	n1 := 4*uint64(z+k) + 3
	c := n1 / 146097            // centuries since the shifted 0000-03-01
	n2 := n1%146097 | 3         // 4 * day of the century + 3
	p2 := 2939745 * n2          // (year of the century, day of the year) in fixed point
	ny := uint32(p2) / 11758980 // day of the year from March 1st: low bits / (2939745*4)
	n3 := 2141*ny + 197913
	y = int64(100*c+p2>>32) - 400*eras
	m = int64(n3 >> 16)
	d = int64(n3&0xffff)/2141 + 1
	if ny >= 306 { // January or February: the next civil year
		y++
		m -= 12
	}
	return y, m, d
}

// IsLeap reports whether y is a leap year.
func IsLeap(y int64) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

// DaysInMonth is the length of month m (1..12) of year y.
func DaysInMonth(y, m int64) int64 {
	switch m {
	case 2:
		if IsLeap(y) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
