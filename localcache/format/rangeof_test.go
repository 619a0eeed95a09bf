package format

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"unsafe"
)

// wantRange is rangeOf's answer by sort.Search over sorted periods.
func wantRange[T int32 | int64](ps []T, from, to int64) (uint, uint) {
	lo := sort.Search(len(ps), func(i int) bool { return int64(ps[i]) >= from })
	hi := sort.Search(len(ps), func(i int) bool { return int64(ps[i]) > to })
	if lo >= hi {
		return 0, 0 // empty: any lo >= hi is the same answer
	}
	return uint(lo), uint(hi)
}

func checkRange[T int32 | int64](t *testing.T, ps []T, from, to int64) {
	t.Helper()
	p := unsafe.Pointer(unsafe.SliceData(ps))
	values := make([]float64, len(ps)) // what a version 5 lookup asks the CPU for ahead
	first, last := int64(ps[0]), int64(ps[len(ps)-1])
	for _, ahead := range []unsafe.Pointer{nil, unsafe.Pointer(unsafe.SliceData(values))} {
		lo, hi := rangeOf[T](p, ahead, uint(len(ps)), from, to, first, last)
		if lo >= hi {
			lo, hi = 0, 0
		}
		if wlo, whi := wantRange(ps, from, to); lo != wlo || hi != whi {
			t.Fatalf("rangeOf(%d periods %v..%v, %d, %d) = [%d, %d), sort.Search says [%d, %d)", len(ps), ps[0], ps[len(ps)-1], from, to, lo, hi, wlo, whi)
		}
	}
}

// spacings are the shapes of a series' periods the lookup meets: even
// (a frequency), business days, random gaps, clusters far apart, and
// gaps growing geometrically (the worst case of interpolation).
var spacings = map[string]func(r *rand.Rand, n int) []int64{
	"even": func(r *rand.Rand, n int) []int64 { return periodsBy(n, func(int) int64 { return 1 }) },
	"business days": func(r *rand.Rand, n int) []int64 {
		return periodsBy(n, func(i int) int64 {
			if i%5 == 0 {
				return 3
			}
			return 1
		})
	},
	"random gaps": func(r *rand.Rand, n int) []int64 { return periodsBy(n, func(int) int64 { return 1 + r.Int64N(40) }) },
	"clusters": func(r *rand.Rand, n int) []int64 {
		return periodsBy(n, func(i int) int64 {
			if r.IntN(50) == 0 {
				return 100000
			}
			return 1
		})
	},
	"geometric": func(r *rand.Rand, n int) []int64 {
		return periodsBy(n, func(i int) int64 { return 1 << min(i/4, 16) }) // within int32 days
	},
}

func periodsBy(n int, gap func(i int) int64) []int64 {
	out := make([]int64, n)
	p := int64(-20000)
	for i := range out {
		out[i] = p
		p += gap(i)
	}
	return out
}

// TestRangeOfMatchesSortSearch: the interpolated search finds what
// sort.Search finds, for days and seconds, every spacing, series of 1 to
// 5,000 points, ranges inside, across and outside the series and open
// ends.
func TestRangeOfMatchesSortSearch(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for name, spacing := range spacings {
		t.Run(name, func(t *testing.T) {
			for _, n := range []int{1, 2, 3, 7, 16, 17, 100, 365, 5000} {
				ps := spacing(r, n)
				days := make([]int32, n)
				secs := make([]int64, n)
				for i, p := range ps {
					days[i] = int32(p)
					secs[i] = p * 86400
				}
				lo, hi := ps[0]-5, ps[n-1]+5
				probe := func(from, to int64) {
					checkRange(t, days, from, to)
					fs, ts := from*86400, to*86400+86399
					if from == math.MinInt32 {
						fs = math.MinInt64
					}
					if to == math.MaxInt32 {
						ts = math.MaxInt64
					}
					checkRange(t, secs, fs, ts)
				}
				for range 400 {
					from := lo + r.Int64N(hi-lo+1)
					probe(from, from+r.Int64N(hi-lo+1))
					probe(from, from-r.Int64N(3)) // empty or inverted
				}
				for _, p := range ps[:min(n, 50)] {
					probe(p, p)
					probe(p-1, p+1)
				}
				probe(math.MinInt32, math.MaxInt32)
				probe(math.MinInt32, ps[n/2])
				probe(ps[n/2], math.MaxInt32)
			}
		})
	}
}

// TestRangeOfUnsorted: periods out of order (a corrupt file that passed
// its checks) give bounds within the series and no fault or endless loop.
func TestRangeOfUnsorted(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		n := 1 + r.IntN(300)
		ps := make([]int32, n)
		for i := range ps {
			ps[i] = int32(r.IntN(1000)) - 500
		}
		if r.IntN(4) == 0 {
			slices.Sort(ps)
			slices.Reverse(ps)
		}
		from := int64(r.IntN(1200)) - 600
		// The first and last period as the points give them, or as a
		// damaged version 5 record might (any two values).
		first, last := int64(ps[0]), int64(ps[n-1])
		if r.IntN(2) == 0 {
			first, last = int64(r.Int32())-1<<30, int64(r.Int32())-1<<30
		}
		values := make([]float64, n)
		lo, hi := rangeOf[int32](unsafe.Pointer(unsafe.SliceData(ps)), unsafe.Pointer(unsafe.SliceData(values)), uint(n), from, from+int64(r.IntN(600)), first, last)
		if lo > uint(n) || hi > uint(n) {
			t.Fatalf("rangeOf over %d unsorted periods (first %d, last %d) = [%d, %d)", n, first, last, lo, hi)
		}
	}
}
