package synth

import (
	"math"
	"math/rand/v2"
)

// seriesGen materialises one series at a time from its index: every random
// draw for series i comes from a PCG seeded from (Seed, i), so a series can
// be replayed in any order and planning need not keep ids in memory.
type seriesGen struct {
	p   *plan
	pcg rand.PCG
	r   *rand.Rand
	g   idGen

	f      int
	first  bucket
	length int

	// value model: mean-reverting log random walk (x, with v = exp(x))
	// times a seasonal factor
	mu, x, v, sigma, theta float64
	steps                  int
	season                 [24]float64
	cur                    cursor
}

func (p *plan) newSeriesGen() *seriesGen {
	s := &seriesGen{p: p}
	s.r = rand.New(&s.pcg)
	s.g.r = s.r
	s.g.mix = &p.mix
	return s
}

func (s *seriesGen) seed(i int) {
	seed := s.p.o.Seed
	s.pcg.Seed(mix64(seed^0x5851f42d4c957f2d+uint64(i)*0x9e3779b97f4a7c15), mix64(uint64(i)+0x632be59bd9b4e019)^seed)
}

// drawLag draws how many buckets before the freshest one a series ends.
// The draws consumed do not depend on first.
func (s *seriesGen) drawLag(f int, first bool) int32 {
	u := s.r.IntN(100)
	lag := 0
	switch {
	case u < 70:
	case u < 90:
		lag = 1 + s.r.IntN(smallLag[f])
	default:
		lag = 1 + s.r.IntN(staleLag[f])
	}
	if first {
		lag = 0
	}
	return int32(lag)
}

// drawWeight draws a heavy-tailed (log-normal) length weight.
func (s *seriesGen) drawWeight(f int) float32 {
	return float32(math.Exp(1.3*s.r.NormFloat64()) * lengthFactor[f])
}

type level struct{ median, sd float64 }

var unitLevels = map[string]level{
	"$/gal":               {3.2, 0.25},
	"$/bbl":               {75, 0.3},
	"$/Mcf":               {11, 0.4},
	"$/MMBtu":             {3.5, 0.4},
	"$/short ton":         {45, 0.5},
	"EUR/MWh":             {85, 0.4},
	"cents/kWh":           {13, 0.3},
	"MBBL/D":              {300, 1.8},
	"thousand barrels":    {20000, 1.8},
	"MMcf":                {30000, 2},
	"Bcf":                 {500, 1.5},
	"MWh":                 {5000, 2},
	"thousand MWh":        {3000, 1.8},
	"MMBtu":               {500000, 2},
	"billion Btu":         {50000, 2},
	"quad Btu":            {2, 1.2},
	"billion kWh":         {50, 1.8},
	"million kWh":         {20000, 1.8},
	"million kW":          {10, 1.5},
	"thousand short tons": {1000, 2},
	"million dollars":     {2000, 1.8},
	"MMtonnes CO2":        {50, 1.8},
}

var (
	freqSigma = [numFreq]float64{freqH: 0.012, freqD: 0.02, freqW: 0.025, freqM: 0.04, freqA: 0.07}
	freqTheta = [numFreq]float64{freqH: 0.02, freqD: 0.01, freqW: 0.02, freqM: 0.05, freqA: 0.15}
	// Load-like daily shape (trough ~4am, peak ~6pm) and winter-peaking year.
	hourShape  [24]float64
	monthShape [12]float64
)

func init() {
	for h := range hourShape {
		hourShape[h] = math.Sin(2 * math.Pi * float64(h-10) / 24)
	}
	for m := range monthShape {
		monthShape[m] = math.Cos(2 * math.Pi * float64(m) / 12)
	}
}

// load replays series i: its id, name, periods and value-model parameters.
func (s *seriesGen) load(i int) {
	p := s.p
	f := p.freqOf(i)
	s.f = f
	s.seed(i)
	s.drawLag(f, false)
	s.drawWeight(f)
	for j := 0; j <= int(p.redraws[i]); j++ {
		s.g.gen(f)
	}
	if len(p.disamb) > 0 {
		if k, ok := p.disamb[uint32(i)]; ok {
			s.g.disambiguate(int(k))
		}
	}
	s.length = int(p.lengths[i])
	s.first = p.lastOf(i, f) - int64(s.length) + 1

	lv, ok := unitLevels[s.g.unit]
	if !ok {
		lv = level{100, 1}
	}
	s.mu = math.Log(lv.median) + lv.sd*s.r.NormFloat64()
	s.x = s.mu + 0.25*s.r.NormFloat64()
	s.sigma = freqSigma[f] * math.Exp(0.3*s.r.NormFloat64())
	s.theta = freqTheta[f]
	s.v = math.Exp(s.x)
	s.steps = 0
	switch f {
	case freqH:
		amp := 0.05 + 0.25*s.r.Float64()
		for h, sh := range hourShape {
			s.season[h] = math.Exp(amp * sh)
		}
	case freqM:
		amp := 0.15 * s.r.Float64()
		for m, sh := range monthShape {
			s.season[m] = math.Exp(amp * sh)
		}
	}
	s.cur = newCursor(f, s.first)
}

const maxCents = 100_000_000_000_000 // 1e12 units; far below 2^53

// cents advances the walk and returns the current period's value in
// hundredths. Values are positive and exactly representable to 2 decimals.
func (s *seriesGen) cents() int64 {
	dx := s.theta*(s.mu-s.x) + s.sigma*s.r.NormFloat64()
	s.x += dx
	s.steps++
	if s.steps&63 == 0 || dx > 0.25 || dx < -0.25 {
		s.v = math.Exp(s.x) // resynchronise
	} else {
		// exp(dx) by its Taylor series: relative error < 4e-7 for |dx| <= 0.25
		s.v *= 1 + dx*(1+dx*(1.0/2+dx*(1.0/6+dx*(1.0/24+dx*(1.0/120)))))
	}
	y := s.v
	switch s.f {
	case freqH:
		y *= s.season[s.cur.h]
	case freqM:
		y *= s.season[s.cur.m-1]
	}
	v := y*100 + 0.5
	if v >= maxCents {
		return maxCents
	}
	if v < 1 {
		return 1
	}
	return int64(v)
}

// appendCents formats c/100 with exactly two decimals. For 0 < c <= maxCents
// the bytes equal strconv.AppendFloat(b, float64(c)/100, 'f', 2, 64).
func appendCents(b []byte, c int64) []byte {
	whole, frac := c/100, int(c%100)
	if whole < 100 {
		if whole >= 10 {
			b = append(b, digits2[2*whole], digits2[2*whole+1])
		} else {
			b = append(b, byte('0'+whole))
		}
	} else {
		var tmp [20]byte
		i := len(tmp)
		for whole >= 100 {
			q := whole / 100
			r := int(whole - q*100)
			i -= 2
			tmp[i], tmp[i+1] = digits2[2*r], digits2[2*r+1]
			whole = q
		}
		if whole >= 10 {
			i -= 2
			tmp[i], tmp[i+1] = digits2[2*whole], digits2[2*whole+1]
		} else {
			i--
			tmp[i] = byte('0' + whole)
		}
		b = append(b, tmp[i:]...)
	}
	return append(b, '.', digits2[2*frac], digits2[2*frac+1])
}
