package calendar

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// The implementations that Frequency's methods replaced, copied verbatim (renamed) as the
// reference: functions' bucketStart, nextBucket, prevBucket and countBuckets, and
// localcache/format's Frequency.Normalize, with the CivilFromDays (Hinnant's) that they
// used. TestBucketMatchesOld proves the new methods equal to them, not merely plausible.

func oldCivilFromDays(z int64) (y, m, d int64) {
	z += 719468
	era := FloorDiv(z, 146097)
	doe := z - era*146097                                  // [0, 146096]
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // [0, 399]
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

// TestCivilFromDaysMatchesOld holds Neri-Schneider against Hinnant's algorithm that it
// replaced, over the day of every int64 unix time and the edges of its shift.
func TestCivilFromDaysMatchesOld(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const lim = math.MaxInt64/86400 + 1
	edges := []int64{-lim, lim, 0, -1, 1, -719468, -719469, 2932896, 2932897}
	for i := range 1000000 {
		var z int64
		switch {
		case i < len(edges):
			z = edges[i]
		case i%2 == 0:
			z = r.Int64N(2*lim+1) - lim
		default:
			z = r.Int64N(2*8000*366) - 8000*366
		}
		y, m, d := CivilFromDays(z)
		oy, om, od := oldCivilFromDays(z)
		if y != oy || m != om || d != od {
			t.Fatalf("CivilFromDays(%d) = %d-%d-%d, old %d-%d-%d", z, y, m, d, oy, om, od)
		}
		if back := DaysFromCivil(y, m, d); back != z {
			t.Fatalf("DaysFromCivil(CivilFromDays(%d)) = %d", z, back)
		}
	}
}

func oldWeekday(day int64) int64 { return ((day+3)%7 + 7) % 7 }

func oldAddMonths(y, m, d, n int64) (int64, int64, int64) {
	mm := y*12 + (m - 1) + n
	y = FloorDiv(mm, 12)
	m = mm - y*12 + 1
	if dim := DaysInMonth(y, m); d > dim {
		d = dim
	}
	return y, m, d
}

func oldFunctionsBucketStart(t int64, per byte) (start, next int64) {
	const secondsPerDay = 86400
	day := FloorDiv(t, secondsPerDay)
	switch per {
	case 'D':
		return day * secondsPerDay, (day + 1) * secondsPerDay
	case 'B':
		if wd := oldWeekday(day); wd >= 5 {
			day += 7 - wd
		}
		return day * secondsPerDay, (day + 1) * secondsPerDay
	case 'W':
		// 1970-01-01 was a Thursday: day 0 is 3 days after a Monday.
		mon := day - (((day+3)%7)+7)%7
		return mon * secondsPerDay, (mon + 7) * secondsPerDay
	}
	y, m, _ := oldCivilFromDays(day)
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
	ny, nm, _ := oldAddMonths(y, m, 1, n)
	return DaysFromCivil(y, m, 1) * secondsPerDay, DaysFromCivil(ny, nm, 1) * secondsPerDay
}

func oldFunctionsNextBucket(start int64, per byte) int64 {
	const secondsPerDay = 86400
	if per == 'B' {
		day := FloorDiv(start, secondsPerDay) + 1
		if wd := oldWeekday(day); wd >= 5 {
			day += 7 - wd
		}
		return day * secondsPerDay
	}
	_, next := oldFunctionsBucketStart(start, per)
	return next
}

func oldFunctionsPrevBucket(start int64, per byte) int64 {
	const secondsPerDay = 86400
	if per == 'B' {
		day := FloorDiv(start, secondsPerDay) - 1
		if wd := oldWeekday(day); wd >= 5 {
			day -= wd - 4
		}
		return day * secondsPerDay
	}
	s, _ := oldFunctionsBucketStart(start-1, per)
	return s
}

func oldFunctionsCountBuckets(a, b int64, per byte) int64 {
	const secondsPerDay = 86400
	if b < a {
		return 0
	}
	da, db := FloorDiv(a, secondsPerDay), FloorDiv(b, secondsPerDay)
	switch per {
	case 'D':
		return db - da + 1
	case 'W':
		return (db-da)/7 + 1
	case 'B':
		return oldWeekdaysBefore(db+1) - oldWeekdaysBefore(da)
	}
	ya, ma, _ := oldCivilFromDays(da)
	yb, mb, _ := oldCivilFromDays(db)
	months := (yb-ya)*12 + mb - ma
	switch per {
	case 'Q':
		return months/3 + 1
	case 'A':
		return months/12 + 1
	}
	return months + 1
}

func oldWeekdaysBefore(day int64) int64 {
	x := day + 3
	w := FloorDiv(x, 7)
	return w*5 + min(x-w*7, 5)
}

// oldFormatNormalize is localcache/format's Frequency.Normalize before it used Bucket,
// with the frequency as its one-letter code (format maps "" to 'D').
func oldFormatNormalize(f byte, unix int64) int64 {
	switch f {
	case 'H':
		return oldFloorDiv(unix, 3600) * 3600
	case 'D':
		return oldFloorDiv(unix, 86400) * 86400
	case 'W':
		days := oldFloorDiv(unix, 86400)
		// 1970-01-01 was a Thursday; Monday-based weeks start 3 days earlier.
		return (oldFloorDiv(days+3, 7)*7 - 3) * 86400
	}
	t := time.Unix(unix, 0).UTC()
	y, m := t.Year(), t.Month()
	switch f {
	case 'M':
	case 'Q':
		m = ((m-1)/3)*3 + 1
	case 'A':
		m = 1
	}
	return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC).Unix()
}

func oldFloorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// The widest periods a snapshot holds (localcache/format: a day number must fit date32's
// int32): the domain of the format's comparison.
const (
	snapMin = math.MinInt32 * 86400
	snapMax = math.MaxInt32 * 86400
)

// randTime draws from the ranges that matter: any time a snapshot can hold, the years
// 1..9999 that functions deals in, the recent past, and the second on either side of a
// bucket boundary (midnights, month and year starts), where an off-by-one would hide.
func randTime(r *rand.Rand) int64 {
	switch r.IntN(5) {
	case 0:
		return snapMin + r.Int64N(snapMax-snapMin)
	case 1:
		return -62135596800 + r.Int64N(253402300800+62135596800)
	case 2:
		return r.Int64N(60 * 365 * 86400)
	case 3:
		y, m := 1+r.Int64N(9999), 1+r.Int64N(12)
		return DaysFromCivil(y, m, 1)*86400 + r.Int64N(3) - 1
	default:
		d := r.Int64N(2*200000) - 200000
		return d*86400 + r.Int64N(3) - 1
	}
}

func TestBucketMatchesOld(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 300000
	if testing.Short() {
		n = 30000
	}
	edges := []int64{0, -1, 1, 86399, 86400, -86400, -86401, snapMin, snapMax, snapMin + 366*86400,
		-62135596800, 253402300799}
	for i := 0; i < n+len(edges); i++ {
		var tm int64
		if i < len(edges) {
			tm = edges[i]
		} else {
			tm = randTime(r)
		}
		// functions: every per it passes, over any time it may hand over.
		for _, per := range []byte("DBWMQA") {
			f := Frequency(per)
			s, nx := f.Bucket(tm)
			os, onx := oldFunctionsBucketStart(tm, per)
			if s != os || nx != onx {
				t.Fatalf("%c.Bucket(%d) = %d, %d; old bucketStart %d, %d", per, tm, s, nx, os, onx)
			}
			if got, want := f.Next(s), oldFunctionsNextBucket(s, per); got != want {
				t.Fatalf("%c.Next(%d) = %d, old %d", per, s, got, want)
			}
			if got, want := f.Prev(s), oldFunctionsPrevBucket(s, per); got != want {
				t.Fatalf("%c.Prev(%d) = %d, old %d", per, s, got, want)
			}
			b := s + r.Int64N(40*366*86400) - 366*86400
			if got, want := f.Count(s, b), oldFunctionsCountBuckets(s, b, per); got != want {
				t.Fatalf("%c.Count(%d, %d) = %d, old %d", per, s, b, got, want)
			}
		}
		// localcache/format: every frequency a snapshot stores, over every period it holds.
		if tm >= snapMin+366*86400 && tm <= snapMax {
			for _, code := range []byte("HDWMQA") {
				s, nx := Frequency(code).Bucket(tm)
				if want := oldFormatNormalize(code, tm); s != want {
					t.Fatalf("%c.Bucket(%d) = %d, old Normalize %d", code, tm, s, want)
				}
				if !(s <= tm && tm < nx) || tm-s > 366*86400 {
					t.Fatalf("%c.Bucket(%d) = [%d, %d) does not hold it within a year", code, tm, s, nx)
				}
			}
		}
	}
}

// TestBucketMonotone: the snapshot writer dedupes in one sort because a <= b implies
// Bucket(a) <= Bucket(b).
func TestBucketMonotone(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		a := randTime(r)
		b := a + r.Int64N(3*366*86400)
		for _, code := range []byte("HDBWMQA") {
			f := Frequency(code)
			sa, _ := f.Bucket(a)
			sb, _ := f.Bucket(b)
			if sa > sb {
				t.Fatalf("%c: Bucket(%d) = %d > Bucket(%d) = %d", code, a, sa, b, sb)
			}
		}
	}
}

func TestCountHourly(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 10000 {
		a, _ := Hourly.Bucket(randTime(r))
		k := r.Int64N(1000)
		b := a
		for range k {
			b = Hourly.Next(b)
		}
		if got := Hourly.Count(a, b); got != k+1 {
			t.Fatalf("Hourly.Count(%d, %d) = %d, want %d", a, b, got, k+1)
		}
		if Hourly.Prev(Hourly.Next(a)) != a {
			t.Fatalf("Hourly.Prev(Next(%d)) != itself", a)
		}
	}
}

// BenchmarkBucket holds the new Bucket against the old implementations in the same run:
// a month bucket through time.Date (format's old Normalize) and through the integer path.
func BenchmarkBucket(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	ts := make([]int64, 4096)
	for i := range ts {
		ts[i] = r.Int64N(60 * 365 * 86400)
	}
	for _, code := range []byte("DWMA") {
		f := Frequency(code)
		b.Run("new/"+string(code), func(b *testing.B) {
			var sink int64
			for b.Loop() {
				for _, t := range ts {
					s, _ := f.Bucket(t)
					sink += s
				}
			}
			_ = sink
		})
		b.Run("oldfunctions/"+string(code), func(b *testing.B) {
			var sink int64
			for b.Loop() {
				for _, t := range ts {
					s, _ := oldFunctionsBucketStart(t, code)
					sink += s
				}
			}
			_ = sink
		})
		b.Run("oldformat/"+string(code), func(b *testing.B) {
			var sink int64
			for b.Loop() {
				for _, t := range ts {
					sink += oldFormatNormalize(code, t)
				}
			}
			_ = sink
		})
	}
}
