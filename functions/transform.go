package functions

import (
	"math"
	"slices"

	"github.com/energyscope/energyscope/internal/calendar"
)

// The steps of ES.Get after the fetch, for the options that need more than the plain
// path (fetch, re-sample, union, fill while laying out): looking back before the start,
// calendars (days=) and transforms (chg, yoy, ma, rebase, scale).
//
// A column then holds its history (points before the cut, the first date of the range)
// ahead of its points in the range. Transforms run over a column's own points when
// fill is none or na (an empty cell is not a point, so "the previous point" is the
// previous value shown), and over the filled rows when fill is prev or zero (a filled
// cell is a value the analyst sees, so a change is taken from it). History rows are cut
// after the transforms.

const week = 7 * secondsPerDay

// lookback is how much of a series before the range a call needs.
type lookback struct {
	points int  // points before the range (or before a year before it, with year)
	year   bool // the year before the range too (yoy=)
}

func (lb lookback) any() bool { return lb.points > 0 || lb.year }

func needs(o *Options) lookback {
	n := 0
	if o.Chg != ChangeNone {
		n++
	}
	if o.MA > 1 {
		n += o.MA - 1
	}
	if o.Fill == FillPrev && n == 0 {
		n = 1
	}
	return lookback{points: n, year: o.YoY != ChangeNone}
}

// history prepends to c the points before from that lb asks for, re-sampled like the
// range and dated before cut (a bucket straddling the start holds only the points in
// the range, as without history). It widens the window it asks the Source for until it
// has them or reaches MinTime. A Source error leaves the column without history.
func (e *Engine) history(c *column, from, cut int64, per byte, agg Agg, lb lookback) {
	if from <= MinTime {
		return
	}
	lim := cut
	if lb.year {
		lim = yearBefore(cut) - week
	}
	need := lb.points
	spacing := int64(31 * secondsPerDay)
	if n := len(c.periods); n >= 2 {
		spacing = max((c.periods[n-1]-c.periods[0])/int64(n-1), 1)
	}
	if per != 0 {
		_, next := calendar.Frequency(per).Bucket(cut)
		spacing = max(spacing, next-cut)
	}
	span := max(from-lim, 0) + int64(need+2)*spacing*2
	var hp []int64
	var hv []float64
	for {
		lo := max(from-span, MinTime)
		if from-span < MinTime || span <= 0 {
			lo = MinTime
		}
		p, v, err := e.Src.Get(c.ref, lo, from-1)
		if err != nil || len(p) != len(v) || !slices.IsSorted(p) {
			return
		}
		if per != 0 {
			p, v = resample(p, v, per, agg)
			k, _ := slices.BinarySearch(p, cut)
			p, v = p[:k], v[:k]
			if lo > MinTime && len(p) > 0 { // the first bucket may hold only part of its points
				p, v = p[1:], v[1:]
			}
		}
		if lo == MinTime || countFinite(p, v, lim) >= need {
			hp, hv = p, v
			break
		}
		span *= 4
	}
	// Keep from the need-th finite point before lim (or from lim if none is needed).
	start, _ := slices.BinarySearch(hp, lim)
	for k, found := start-1, 0; k >= 0 && found < need; k-- {
		if finiteValue(hv[k]) {
			found++
			start = k
		}
	}
	if start >= len(hp) {
		return
	}
	c.hist = len(hp) - start
	c.periods = append(hp[start:len(hp):len(hp)], c.periods...)
	c.values = append(hv[start:len(hv):len(hv)], c.values...)
}

// countFinite counts the points before lim with a finite value.
func countFinite(p []int64, v []float64, lim int64) int {
	n := 0
	for i := range p {
		if p[i] >= lim {
			break
		}
		if finiteValue(v[i]) {
			n++
		}
	}
	return n
}

// transform applies chg, yoy, ma, rebase and scale, in that order, to the values v of
// dates p (ascending), in place. Values that are not finite are not points: they stay
// empty (NaN) and are skipped when looking back. Rebase takes the first finite value
// dated at or after start as its base. A result that is not finite is empty.
func transform(p []int64, v []float64, o *Options, start int64) {
	if o.Chg != ChangeNone {
		prev := math.NaN()
		for i, x := range v {
			if !finiteValue(x) {
				v[i] = math.NaN()
				continue
			}
			v[i] = change(o.Chg, x, prev)
			prev = x
		}
	}
	if o.YoY != ChangeNone {
		in := slices.Clone(v)
		k := 0 // the first point after the target date, which only moves forward
		for i, x := range in {
			if !finiteValue(x) {
				v[i] = math.NaN()
				continue
			}
			target := yearBefore(p[i])
			for k < i && p[k] <= target {
				k++
			}
			v[i] = change(o.YoY, x, yearAgo(p, in, k, target))
		}
	}
	if o.MA > 1 {
		movingAverage(v, o.MA)
	}
	if o.HasRebase {
		base := math.NaN()
		for i := range v {
			if p[i] >= start && finiteValue(v[i]) {
				base = v[i]
				break
			}
		}
		scale(v, o.Rebase/base)
	}
	if o.HasScale {
		scale(v, o.Scale)
	}
}

// change is x compared with an earlier value; NaN when there is none or the ratio is
// undefined.
func change(c Change, x, earlier float64) float64 {
	var r float64
	switch c {
	case ChangeDiff:
		r = x - earlier
	case ChangePct:
		if earlier == 0 {
			return math.NaN()
		}
		r = (x/earlier - 1) * 100
	case ChangeLog:
		if earlier <= 0 || x <= 0 {
			return math.NaN()
		}
		r = math.Log(x / earlier)
	default:
		return x
	}
	if !finiteValue(r) {
		return math.NaN()
	}
	return r
}

// yearAgo is the value of the same period a year before a point, given target, the
// point's date moved back a year, and k, the index of the first date after target: the
// latest finite value dated at most target and less than a week before it (so a weekday
// a year ago that fell on a weekend takes the Friday, and a weekly series the week
// holding that date); NaN if there is none.
func yearAgo(p []int64, v []float64, k int, target int64) float64 {
	for k--; k >= 0 && p[k] > target-week; k-- {
		if finiteValue(v[k]) {
			return v[k]
		}
	}
	return math.NaN()
}

// movingAverage replaces each finite value by the mean of it and the n-1 finite values
// before it, or NaN while there are fewer than n. The sum is kept with Neumaier's
// compensation, so a long window does not drift.
func movingAverage(v []float64, n int) {
	ring := make([]float64, n)
	k, have := 0, 0
	var sum, comp float64
	add := func(x float64) {
		t := sum + x
		if math.Abs(sum) >= math.Abs(x) {
			comp += (sum - t) + x
		} else {
			comp += (x - t) + sum
		}
		sum = t
	}
	for i, x := range v {
		if !finiteValue(x) {
			v[i] = math.NaN()
			continue
		}
		if have == n {
			add(-ring[k])
		} else {
			have++
		}
		ring[k] = x
		k = (k + 1) % n
		add(x)
		if have < n {
			v[i] = math.NaN()
			continue
		}
		v[i] = (sum + comp) / float64(n)
	}
}

func scale(v []float64, f float64) {
	for i, x := range v {
		if y := x * f; finiteValue(y) {
			v[i] = y
		} else {
			v[i] = math.NaN()
		}
	}
}

// calendarDates returns every bucket from the one starting at a to the one starting at
// b, or nil and the count if there would be more than limit.
func calendarDates(a, b int64, per byte, limit int) ([]int64, int64) {
	n := calendar.Frequency(per).Count(a, b)
	if n > int64(limit) {
		return nil, n
	}
	out := make([]int64, 0, n)
	for t := a; t <= b && int64(len(out)) < n; t = calendar.Frequency(per).Next(t) {
		out = append(out, t)
	}
	return out, n
}
