// Package synth generates realistic, deterministic synthetic energy time
// series datasets shaped like EIA / IEA / ENTSO-E source files.
//
// A dataset is a set of series; each series has an EIA-style id
// (PET.EMM_EPMRU_PTE_NUS_DPG.W, NG.N3010US3.M, ELEC.GEN.ALL-US-99.A, ...),
// a name, unit, source and frequency, and a run of consecutive periods
// ending near Options.End. Rows are written series by series in a shuffled
// series order (periods ascending within a series), with the metadata
// columns repeated on every row, the way source extracts look.
//
// Generation is streaming: memory is O(Series), never O(Rows). Planning
// keeps about 17 bytes per series (lengths, lags, emission order) plus
// about 40 bytes per series of transient buffers (an id-hash set, weights),
// and rows are produced in bounded chunks: the full scale (2.82M series,
// 136M rows) runs in under 200 MB (CSV) / 320 MB (Parquet) resident.
// Series are rebuilt from their index when written (every random draw of
// series i comes from a PCG seeded with (Seed, i)), so ids are never all
// held in memory. The output depends only on the Options: the same Options
// give byte-identical files, whatever GOMAXPROCS is.
package synth

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Options controls a generated dataset.
type Options struct {
	Series   int    // number of series; each has at least one row
	Rows     int64  // total rows, matched exactly; must be >= Series
	Seed     uint64 // everything is derived from this
	Intraday bool   // include hourly series (5% of series, taken from daily)
	// End is the last period of the freshest series. Zero means DefaultEnd.
	// It is fixed (never time.Now) so that output is reproducible. The
	// freshest series of each frequency ends in the bucket containing End
	// (End's hour, End's day, the Monday on or before it, its month's 1st,
	// its year's Jan 1); most others end there too, some a few buckets
	// earlier (reporting lag) and about 10% years earlier (discontinued).
	End time.Time
}

// DefaultEnd is the End used when Options.End is zero.
var DefaultEnd = time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)

// Stats summarises what was written.
type Stats struct {
	Rows   int64
	Series int
}

// SeriesSpec describes one series of a dataset, without its rows.
type SeriesSpec struct {
	ID        string
	Name      string
	Unit      string
	Source    string
	Frequency string    // "H", "D", "W", "M" or "A"
	Start     time.Time // first period (UTC)
	End       time.Time // last period (UTC)
	Length    int       // number of rows (periods)
}

// Columns is the column order of CSV and Parquet output.
var Columns = []string{"series_id", "period", "value", "unit", "name", "source", "frequency"}

// Validate reports whether o is well formed. Generation can still fail
// if Rows exceed what the calendar holds (periods back to year 1), which
// only happens for absurd Rows/Series ratios.
func (o Options) Validate() error {
	_, err := o.normalize()
	return err
}

func (o Options) normalize() (Options, error) {
	if o.End.IsZero() {
		o.End = DefaultEnd
	}
	o.End = o.End.UTC()
	switch {
	case o.Series < 0 || o.Rows < 0:
		return o, errors.New("synth: Series and Rows must not be negative")
	case o.Series > math.MaxUint32:
		return o, errors.New("synth: too many series")
	case o.Rows < int64(o.Series):
		return o, fmt.Errorf("synth: Rows (%d) must be at least Series (%d): every series has a row", o.Rows, o.Series)
	case o.Series == 0 && o.Rows > 0:
		return o, errors.New("synth: Rows > 0 needs at least one series")
	case o.End.Year() < 1000 || o.End.Year() > 9999:
		return o, errors.New("synth: End must be within years 1000..9999")
	}
	return o, nil
}

// Catalogue returns the series of the dataset o describes, in the order
// they are written, with their periods but without rows. It returns nil if
// o is invalid (see Options.Validate).
func Catalogue(o Options) []SeriesSpec {
	p, err := newPlan(o)
	if err != nil {
		return nil
	}
	out := make([]SeriesSpec, 0, p.n)
	s := p.newSeriesGen()
	for pos := 0; pos < p.n; pos++ {
		s.load(int(p.perm[pos]))
		out = append(out, SeriesSpec{
			ID:        string(s.g.id),
			Name:      string(s.g.name),
			Unit:      s.g.unit,
			Source:    s.g.source,
			Frequency: freqCode[s.f],
			Start:     bucketTime(s.f, s.first),
			End:       bucketTime(s.f, s.first+int64(s.length)-1),
			Length:    s.length,
		})
	}
	return out
}

// Frequency mix by index range; hourly is carved out of daily.
var (
	mixDefault  = [numFreq]float64{freqD: 0.15, freqW: 0.25, freqM: 0.45, freqA: 0.15}
	mixIntraday = [numFreq]float64{freqH: 0.05, freqD: 0.10, freqW: 0.25, freqM: 0.45, freqA: 0.15}
	// Relative expected length by frequency, before heavy-tailed noise.
	lengthFactor = [numFreq]float64{freqH: 10, freqD: 4, freqW: 2, freqM: 1, freqA: 0.35}
	// Realistic earliest period per frequency (soft cap on length); the
	// hard cap is 0001-01-01, used only when Rows demands it.
	softFloor = [numFreq]time.Time{
		freqH: time.Date(2015, 7, 1, 0, 0, 0, 0, time.UTC),
		freqD: time.Date(1986, 1, 2, 0, 0, 0, 0, time.UTC),
		freqW: time.Date(1990, 8, 20, 0, 0, 0, 0, time.UTC),
		freqM: time.Date(1920, 1, 1, 0, 0, 0, 0, time.UTC),
		freqA: time.Date(1949, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	// Reporting lag in buckets: small lags and discontinued series.
	smallLag = [numFreq]int{freqH: 36, freqD: 7, freqW: 3, freqM: 3, freqA: 2}
	staleLag = [numFreq]int{freqH: 5 * 8766, freqD: 15 * 365, freqW: 15 * 52, freqM: 15 * 12, freqA: 15}
)

// maxRedraws bounds how often a colliding id is redrawn before a numeric
// disambiguator is appended (a variable so tests can force that path).
var maxRedraws = 32

// plan is everything decided before rows are written.
type plan struct {
	o       Options
	n       int
	bounds  [numFreq + 1]int // frequency f covers indices [bounds[f], bounds[f+1])
	last    [numFreq]bucket  // freshest bucket per frequency
	lags    []int32
	lengths []int32
	perm    []uint32         // emission order: position -> series index
	redraws []uint8          // id draws discarded because of collisions
	disamb  map[uint32]int32 // index -> numeric disambiguator (rare)
	mix     [numFreq][]float64
}

func newPlan(o Options) (*plan, error) {
	o, err := o.normalize()
	if err != nil {
		return nil, err
	}
	p := &plan{o: o, n: o.Series, disamb: map[uint32]int32{}}
	mix := mixDefault
	if o.Intraday {
		mix = mixIntraday
	}
	counts := apportion(p.n, mix[:])
	for f := 0; f < numFreq; f++ {
		p.bounds[f+1] = p.bounds[f] + counts[f]
		p.last[f] = lastBucket(f, o.End)
		p.mix[f] = familyMix(f, counts[f])
	}

	n := p.n
	p.lags = make([]int32, n)
	weights := make([]float32, n)
	p.redraws = make([]uint8, n)
	set := newHashSet(n)
	s := p.newSeriesGen()
	var baseID, baseName []byte
	for i := 0; i < n; i++ {
		f := p.freqOf(i)
		s.seed(i)
		p.lags[i] = s.drawLag(f, i == p.bounds[f])
		weights[i] = s.drawWeight(f)
		s.g.gen(f)
		h := hashBytes(s.g.id)
		redraws := 0
		for ; redraws < maxRedraws; redraws++ {
			if !set.has(h) {
				break
			}
			s.g.gen(f)
			h = hashBytes(s.g.id)
		}
		p.redraws[i] = uint8(redraws)
		if set.has(h) {
			baseID = append(baseID[:0], s.g.id...)
			baseName = append(baseName[:0], s.g.name...)
			for k := 2; ; k++ {
				s.g.id = append(s.g.id[:0], baseID...)
				s.g.name = append(s.g.name[:0], baseName...)
				s.g.disambiguate(k)
				h = hashBytes(s.g.id)
				if !set.has(h) {
					p.disamb[uint32(i)] = int32(k)
					break
				}
			}
		}
		set.add(h)
	}
	set = hashSet{}

	if p.lengths, err = p.allocate(weights); err != nil {
		return nil, err
	}

	p.perm = make([]uint32, n)
	for i := range p.perm {
		p.perm[i] = uint32(i)
	}
	r := rand.New(rand.NewPCG(o.Seed, 0xda3e39cb94b95bdb))
	r.Shuffle(n, func(i, j int) { p.perm[i], p.perm[j] = p.perm[j], p.perm[i] })
	return p, nil
}

func (p *plan) freqOf(i int) int {
	f := 0
	for i >= p.bounds[f+1] {
		f++
	}
	return f
}

// apportion splits n by fractions with the largest-remainder method.
func apportion(n int, frac []float64) []int {
	out := make([]int, len(frac))
	rem := make([]float64, len(frac))
	given := 0
	for i, q := range frac {
		x := float64(n) * q
		out[i] = int(x)
		rem[i] = x - float64(out[i])
		given += out[i]
	}
	for ; given < n; given++ {
		best := -1
		for i := range rem {
			if frac[i] > 0 && (best < 0 || rem[i] > rem[best]) {
				best = i
			}
		}
		out[best]++
		rem[best] = -1
	}
	return out
}

// lastOf is the last bucket of series i.
func (p *plan) lastOf(i, f int) bucket { return p.last[f] - int64(p.lags[i]) }

// allocate gives every series >= 1 row and distributes the rest in
// proportion to the heavy-tailed weights, capped by calendar room, so that
// the total is exactly Rows.
func (p *plan) allocate(weights []float32) ([]int32, error) {
	n := p.n
	var softFl, hardFl [numFreq]bucket
	for f := 0; f < numFreq; f++ {
		y, m, d := softFloor[f].Date()
		softFl[f] = firstBucketOnOrAfter(f, daysFromCivil(y, int(m), d))
		hardFl[f] = firstBucketOnOrAfter(f, minDay)
	}
	capOf := func(fl *[numFreq]bucket, i, f int) int64 {
		c := p.lastOf(i, f) - fl[f] + 1
		if c < 1 {
			c = 1
		}
		if c > math.MaxInt32 {
			c = math.MaxInt32
		}
		return c
	}
	var soft, hard int64
	for i := 0; i < n; i++ {
		f := p.freqOf(i)
		soft += capOf(&softFl, i, f)
		hard += capOf(&hardFl, i, f)
	}
	floor := &softFl
	if soft < p.o.Rows {
		floor = &hardFl
		if hard < p.o.Rows {
			return nil, fmt.Errorf("synth: %d rows do not fit in %d series (at most %d periods since year 1)", p.o.Rows, n, hard)
		}
	}
	caps := make([]int32, n)
	lengths := make([]int32, n)
	active := make([]int32, 0, n)
	for i := 0; i < n; i++ {
		caps[i] = int32(capOf(floor, i, p.freqOf(i)))
		lengths[i] = 1
		if caps[i] > 1 {
			active = append(active, int32(i))
		}
	}
	rem := p.o.Rows - int64(n)
	for rem > 0 {
		if len(active) == 0 {
			return nil, errors.New("synth: internal error: row capacity exhausted")
		}
		var W float64
		for _, i := range active {
			W += float64(weights[i])
		}
		scale := float64(rem) / W
		var added int64
		capped := false
		next := active[:0]
		for _, i := range active {
			a := int64(float64(weights[i]) * scale)
			if room := int64(caps[i] - lengths[i]); a >= room {
				a, capped = room, true
			}
			if a > rem-added {
				a = rem - added
			}
			lengths[i] += int32(a)
			added += a
			if lengths[i] < caps[i] {
				next = append(next, i)
			}
		}
		active = next
		rem -= added
		if capped || rem == 0 {
			continue // redistribute what the capped series could not take
		}
		// Nobody was capped: what is left is the sum of the fractional
		// parts. Hand it out by systematic sampling on those fractions, so
		// the expected length stays proportional to the weight.
		acc := 0.5
		for _, i := range active {
			q := float64(weights[i]) * scale
			acc += q - math.Floor(q)
			if acc >= 1 && rem > 0 {
				lengths[i]++
				rem--
				acc--
			}
		}
		// Float rounding can leave a row or two: the next round takes them.
	}
	return lengths, nil
}

// hashSet is an open-addressing set of 64-bit hashes (0 is remapped).
type hashSet struct {
	slots []uint64
	mask  uint64
}

func newHashSet(n int) hashSet {
	size := 16
	for size < n+n/2 {
		size <<= 1
	}
	return hashSet{slots: make([]uint64, size), mask: uint64(size - 1)}
}

func (s *hashSet) has(h uint64) bool {
	if h == 0 {
		h = 1
	}
	for i := mix64(h) & s.mask; ; i = (i + 1) & s.mask {
		switch s.slots[i] {
		case h:
			return true
		case 0:
			return false
		}
	}
}

func (s *hashSet) add(h uint64) {
	if h == 0 {
		h = 1
	}
	for i := mix64(h) & s.mask; ; i = (i + 1) & s.mask {
		switch s.slots[i] {
		case h:
			return
		case 0:
			s.slots[i] = h
			return
		}
	}
}

// hashBytes is FNV-1a 64; deterministic across runs, unlike maphash.
func hashBytes(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}
