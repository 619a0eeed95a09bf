package format

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// realisticTable builds a table shaped like the synthetic EIA-style sets of
// server/cook/synth (which format cannot import): a frequency mix of daily,
// weekly, monthly and annual series (plus hourly when intraday), heavy-tailed
// lengths, 70% of series current, 20% a little behind and 10% stale, and
// values from a mean-reverting log random walk around a unit-dependent
// level, rounded to cents (source files carry two decimals).
func realisticTable(seed uint64, ns int, rows int64, intraday bool) *Table {
	rng := rand.New(rand.NewPCG(seed, 0x7a11))
	end := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC).Unix()
	type freqMix struct {
		f      Frequency
		share  float64
		factor float64 // relative expected length
		sigma  float64
		theta  float64
		small  int // small reporting lag, buckets
		stale  int // stale lag, buckets
	}
	mix := []freqMix{
		{Daily, 0.15, 4, 0.02, 0.01, 7, 15 * 365},
		{Weekly, 0.25, 2, 0.025, 0.02, 3, 15 * 52},
		{Monthly, 0.45, 1, 0.04, 0.05, 3, 15 * 12},
		{Annual, 0.15, 0.35, 0.07, 0.15, 2, 15},
	}
	if intraday {
		mix[0].share = 0.10
		mix = append(mix, freqMix{Hourly, 0.05, 10, 0.012, 0.02, 36, 5 * 8766})
	}
	levels := []struct{ median, sd float64 }{
		{3.2, 0.25}, {75, 0.3}, {11, 0.4}, {3.5, 0.4}, {85, 0.4}, {13, 0.3},
		{300, 1.8}, {20000, 1.8}, {30000, 2}, {500, 1.5}, {5000, 2}, {2, 1.2}, {50, 1.8},
	}
	type spec struct {
		k   int
		w   float64
		lag int
	}
	specs := make([]spec, ns)
	var wsum float64
	for i := range specs {
		u := rng.Float64()
		k := 0
		for acc := mix[0].share; k < len(mix)-1 && u > acc; acc += mix[k].share {
			k++
		}
		w := math.Exp(1.3*rng.NormFloat64()) * mix[k].factor
		lag := 0
		switch v := rng.IntN(100); {
		case v < 70:
		case v < 90:
			lag = 1 + rng.IntN(mix[k].small)
		default:
			lag = 1 + rng.IntN(mix[k].stale)
		}
		specs[i] = spec{k, w, lag}
		wsum += w
	}
	tb := &Table{}
	for i, s := range specs {
		m := mix[s.k]
		n := 1 + int(float64(rows-int64(ns))*s.w/wsum)
		lv := levels[rng.IntN(len(levels))]
		mu := math.Log(lv.median) + lv.sd*rng.NormFloat64()
		x := mu + 0.25*rng.NormFloat64()
		sigma := m.sigma * math.Exp(0.3*rng.NormFloat64())
		tb.Series = append(tb.Series, SeriesMeta{
			ID:        fmt.Sprintf("SYN.%06X.%s", rng.Uint32()&0xffffff, m.f) + fmt.Sprint(i),
			Frequency: m.f,
			Unit:      "u",
		})
		// Walk back from the last period to find the first.
		p := m.f.Normalize(end)
		for range s.lag {
			p = prevPeriod(m.f, p)
		}
		ps := make([]int64, n)
		for k := n - 1; k >= 0; k-- {
			ps[k] = p
			p = prevPeriod(m.f, p)
		}
		for _, p := range ps {
			x += m.theta*(mu-x) + sigma*rng.NormFloat64()
			c := math.Round(math.Exp(x) * 100)
			if c < 1 {
				c = 1
			}
			tb.Append(uint32(i), p, c/100)
		}
	}
	return tb
}

func prevPeriod(f Frequency, p int64) int64 {
	switch f {
	case Hourly:
		return p - 3600
	case Daily:
		return p - 86400
	case Weekly:
		return p - 7*86400
	}
	t := time.Unix(p, 0).UTC()
	switch f {
	case Monthly:
		return t.AddDate(0, -1, 0).Unix()
	case Quarterly:
		return t.AddDate(0, -3, 0).Unix()
	}
	return t.AddDate(-1, 0, 0).Unix()
}
