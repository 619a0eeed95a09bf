package calendar

import (
	"testing"
	"time"
)

// TestAgainstTime holds the arithmetic against package time, day by day over years
// -400..10000 in steps that visit every day of the month and every month.
func TestAgainstTime(t *testing.T) {
	start := DaysFromCivil(-400, 1, 1)
	end := DaysFromCivil(10000, 12, 31)
	for z := start; z <= end; z += 13 {
		y, m, d := CivilFromDays(z)
		tm := time.Unix(z*86400, 0).UTC()
		if int64(tm.Year()) != y || int64(tm.Month()) != m || int64(tm.Day()) != d {
			t.Fatalf("CivilFromDays(%d) = %d-%d-%d, time says %v", z, y, m, d, tm)
		}
		if back := DaysFromCivil(y, m, d); back != z {
			t.Fatalf("DaysFromCivil(%d-%d-%d) = %d, want %d", y, m, d, back, z)
		}
		if DaysInMonth(y, m) != int64(time.Date(int(y), time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day()) {
			t.Fatalf("DaysInMonth(%d, %d) = %d", y, m, DaysInMonth(y, m))
		}
	}
	if DaysFromCivil(1970, 1, 1) != 0 || DaysFromCivil(2000, 3, 1) != 11017 {
		t.Fatal("epoch")
	}
}

func TestFloorDiv(t *testing.T) {
	for _, c := range []struct{ a, b, q int64 }{{7, 2, 3}, {-7, 2, -4}, {-8, 2, -4}, {0, 5, 0}, {-1, 86400, -1}} {
		if q := FloorDiv(c.a, c.b); q != c.q {
			t.Errorf("FloorDiv(%d, %d) = %d, want %d", c.a, c.b, q, c.q)
		}
	}
}
