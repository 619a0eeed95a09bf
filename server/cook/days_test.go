package cook

import (
	"math/rand/v2"
	"testing"
)

// oldDays is days as it was before it used internal/calendar, copied verbatim
// (with its daysIn) as the reference.
func oldDays(y, m, d int64) (int64, bool) {
	if m < 1 || m > 12 || d < 1 || d > oldDaysIn(y, m) {
		return 0, false
	}
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 {
		era = (y - 399) / 400
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468, true
}

func oldDaysIn(y, m int64) int64 {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// TestDaysMatchesOld: the day number of every date the parser can read (years
// 0..9999 from four digits, months and days from two, valid or not) is what
// it was before the arithmetic moved to internal/calendar.
func TestDaysMatchesOld(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	check := func(y, m, d int64) {
		got, gok := days(y, m, d)
		want, wok := oldDays(y, m, d)
		if got != want || gok != wok {
			t.Fatalf("days(%d, %d, %d) = %d, %v; old %d, %v", y, m, d, got, gok, want, wok)
		}
	}
	for y := int64(0); y <= 9999; y += 1 + r.Int64N(7) {
		for m := int64(0); m <= 13; m++ {
			for _, d := range []int64{0, 1, 28, 29, 30, 31, 32, 1 + r.Int64N(99)} {
				check(y, m, d)
			}
		}
	}
	for range 100000 {
		check(r.Int64N(10000), r.Int64N(100), r.Int64N(100))
	}
}
