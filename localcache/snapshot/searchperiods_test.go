package snapshot

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// checkSearch compares searchDays and searchSecs with sort.Search over the
// same periods for target t.
func checkSearch(t *testing.T, secs []int64, target int64) {
	t.Helper()
	want := sort.Search(len(secs), func(i int) bool { return secs[i] >= target })
	if got := searchSecs(secs, target); got != want {
		t.Fatalf("searchSecs(%v, %d) = %d, sort.Search says %d", secs, target, got, want)
	}
	days := make([]int32, 0, len(secs))
	for _, s := range secs {
		if s < math.MinInt32 || s > math.MaxInt32 {
			return
		}
		days = append(days, int32(s))
	}
	if got := searchDays(days, target); got != want {
		t.Fatalf("searchDays(%v, %d) = %d, sort.Search says %d", days, target, got, want)
	}
}

// TestSearchPeriodsAgainstSortSearch: the searches of the lookup path find
// exactly what sort.Search finds, for series at regular frequencies, with
// gaps, bursts and repeated periods, at the ends of the int64 range, and
// for every target around and between the periods. (They were
// interpolating searches for a while, which this test was written for;
// they are binary searches again, BENCHMARKS.md "Serving snapshot v2".)
func TestSearchPeriodsAgainstSortSearch(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 14))
	shapes := map[string]func(n int) []int64{
		"daily":  func(n int) []int64 { return series(n, func(i int) int64 { return 18000 + int64(i) }) },
		"weekly": func(n int) []int64 { return series(n, func(i int) int64 { return -700 + 7*int64(i) }) },
		"monthly": func(n int) []int64 {
			return series(n, func(i int) int64 { return int64(i)*30 + int64(i*7%4) })
		},
		"gaps": func(n int) []int64 {
			v := int64(r.IntN(1000))
			return series(n, func(int) int64 { v += 1 + int64(r.ExpFloat64()*float64(1+r.IntN(500))); return v })
		},
		"burst": func(n int) []int64 { // most periods bunched at one end
			return series(n, func(i int) int64 {
				if i < n-3 {
					return int64(i)
				}
				return 1e6 * int64(i)
			})
		},
		"repeats": func(n int) []int64 {
			v := int64(0)
			return series(n, func(int) int64 { v += int64(r.IntN(2)); return v })
		},
		"extremes": func(n int) []int64 {
			return series(n, func(i int) int64 {
				switch {
				case i == 0:
					return math.MinInt64
				case i == n-1 && n > 1:
					return math.MaxInt64
				}
				return math.MinInt64/2 + int64(i)*(math.MaxInt64/int64(n))
			})
		},
	}
	for name, shape := range shapes {
		t.Run(name, func(t *testing.T) {
			for _, n := range []int{0, 1, 2, 3, 5, 17, 100, 1000} {
				secs := shape(n)
				targets := []int64{math.MinInt64, math.MaxInt64, 0}
				for _, s := range secs {
					targets = append(targets, s-1, s, s+1)
				}
				for range 50 {
					targets = append(targets, r.Int64()-math.MaxInt64/2)
				}
				for _, target := range targets {
					if target == math.MaxInt64 && len(secs) > 0 && secs[len(secs)-1] == math.MaxInt64 {
						continue // s+1 wrapped
					}
					checkSearch(t, secs, target)
				}
			}
		})
	}
}

func series(n int, f func(i int) int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// FuzzSearchPeriods: any ascending periods and target, the searches agree
// with sort.Search.
func FuzzSearchPeriods(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}, int64(2))
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 127, 0, 0, 0, 0, 0, 0, 0, 128}, int64(-5))
	f.Fuzz(func(t *testing.T, b []byte, target int64) {
		secs := make([]int64, 0, len(b)/8)
		for len(b) >= 8 {
			secs = append(secs, int64(binary.LittleEndian.Uint64(b)))
			b = b[8:]
		}
		sort.Slice(secs, func(i, j int) bool { return secs[i] < secs[j] })
		checkSearch(t, secs, target)
	})
}
