package format

import (
	"math/rand/v2"
	"testing"
	"time"
)

// oldNormalize is Frequency.Normalize as it was before it used
// internal/calendar's Bucket, copied verbatim as the reference.
func oldNormalize(f Frequency, unix int64) int64 {
	switch f {
	case Hourly:
		return oldFloorDiv(unix, 3600) * 3600
	case Daily, "":
		return oldFloorDiv(unix, 86400) * 86400
	case Weekly:
		days := oldFloorDiv(unix, 86400)
		// 1970-01-01 was a Thursday; Monday-based weeks start 3 days earlier.
		return (oldFloorDiv(days+3, 7)*7 - 3) * 86400
	}
	t := time.Unix(unix, 0).UTC()
	y, m := t.Year(), t.Month()
	switch f {
	case Monthly:
	case Quarterly:
		m = ((m-1)/3)*3 + 1
	case Annual:
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

// TestNormalizeMatchesOld holds Normalize, now over internal/calendar, against
// the old implementation for every frequency a series may have, the empty one,
// and spellings that never reach it in letter form, over random periods in
// [MinPeriod, MaxPeriod] (the periods Write and the delta normalize) and the
// seconds around bucket boundaries.
func TestNormalizeMatchesOld(t *testing.T) {
	freqs := []Frequency{Hourly, Daily, Weekly, Monthly, Quarterly, Annual, "", "B", "h", "daily", "x"}
	r := rand.New(rand.NewPCG(11, 12))
	n := 200000
	if testing.Short() {
		n = 20000
	}
	for i := range n {
		var p int64
		switch i % 4 {
		case 0:
			p = MinPeriod + r.Int64N(MaxPeriod-MinPeriod+1)
		case 1:
			p = time.Date(1+r.IntN(9999), time.Month(1+r.IntN(12)), 1, 0, 0, 0, 0, time.UTC).Unix() + r.Int64N(3) - 1
		case 2:
			p = r.Int64N(2*400*365*86400) - 400*365*86400
		default:
			p = []int64{MinPeriod, MaxPeriod, MinRecordPeriod, 0, -1, 1}[r.IntN(6)]
		}
		for _, f := range freqs {
			if got, want := f.Normalize(p), oldNormalize(f, p); got != want {
				t.Fatalf("Frequency(%q).Normalize(%d) = %d, old %d", f, p, got, want)
			}
		}
	}
}
