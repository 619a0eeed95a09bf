package synth

import (
	"math/rand/v2"
	"strconv"
)

// idGen builds one series' id, name, unit and source from random draws.
// It reuses its byte buffers; callers copy out what they keep.
type idGen struct {
	r      *rand.Rand
	mix    *[numFreq][]float64 // cumulative family weights
	id     []byte
	name   []byte
	unit   string
	source string
}

type family func(g *idGen, f int)

type weighted struct {
	w   float64
	fam family
	cap float64 // rough number of distinct ids the family can make per frequency
}

// Families per frequency, with relative weights and capacities. Weights
// are scaled down (see familyMix) for families too small for the dataset,
// so that ids rarely collide; a collision is redrawn, family included.
var families = [numFreq][]weighted{
	freqH: {{25, famEBA, 1200}, {20, famEntsoeArea, 2100}, {55, famEntsoeUnit, 1e15}},
	freqD: {{45, famPetPrice, 1e6}, {5, famPetShort, 13}, {8, famNGSpot, 22}, {12, famEntsoeArea, 2100},
		{10, famEBA, 1200}, {20, famEntsoeUnit, 1e15}},
	freqW: {{45, famPetPrice, 1e6}, {35, famPetVol, 1.2e6}, {8, famPetShort, 500}, {2, famNGStorage, 8},
		{10, famNGSpot, 22}},
	freqM: {{30, famElecPlant, 7e6}, {10, famPetPrice, 1e6}, {15, famPetVol, 1.2e6}, {10, famNGN, 1600},
		{8, famElecAgg, 20000}, {4, famElecPrice, 370}, {5, famIntl, 15000}, {3, famSTEO, 140},
		{10, famCoal, 1e7}, {5, famPetShort, 500}},
	freqA: {{30, famIntl, 15000}, {20, famElecPlant, 7e6}, {15, famSEDS, 18000}, {8, famElecAgg, 20000},
		{4, famElecPrice, 370}, {13, famCoal, 1e7}, {5, famPetVol, 1.2e6}, {5, famNGN, 1600}},
}

// familyFill is the largest expected share of a family's capacity a
// dataset draws; beyond it the family's weight is capped.
const familyFill = 0.25

// familyMix returns cumulative family weights for a frequency with n
// series: a family expected to draw more than familyFill of its capacity is
// capped there and the excess weight goes to the others, in proportion.
func familyMix(f, n int) []float64 {
	fams := families[f]
	w := make([]float64, len(fams))
	capped := make([]bool, len(fams))
	for i := range fams {
		w[i] = fams[i].w
	}
	for changed := true; changed && n > 0; {
		changed = false
		var total, free float64
		for i := range w {
			total += w[i]
			if !capped[i] {
				free += w[i]
			}
		}
		for i, fm := range fams {
			if capped[i] || free <= 0 {
				continue
			}
			if draws := float64(n) * w[i] / total; draws > familyFill*fm.cap {
				w[i] = familyFill * fm.cap / float64(n) * total
				capped[i], changed = true, true
			}
		}
		if changed {
			// rescale the uncapped families to keep the total
			var cappedSum, freeSum float64
			for i := range w {
				if capped[i] {
					cappedSum += w[i]
				} else {
					freeSum += w[i]
				}
			}
			if freeSum > 0 {
				k := (total - cappedSum) / freeSum
				for i := range w {
					if !capped[i] {
						w[i] *= k
					}
				}
			}
		}
	}
	cum := make([]float64, len(w))
	var acc float64
	for i := range w {
		acc += w[i]
		cum[i] = acc
	}
	return cum
}

// gen draws a complete id (with frequency suffix) and name.
func (g *idGen) gen(f int) {
	g.id = g.id[:0]
	g.name = g.name[:0]
	cum := g.mix[f]
	x := g.r.Float64() * cum[len(cum)-1]
	i := 0
	for i < len(cum)-1 && x >= cum[i] {
		i++
	}
	families[f][i].fam(g, f)
	g.id = append(g.id, '.')
	g.id = append(g.id, freqCode[f]...)
	g.name = append(g.name, ", "...)
	g.name = append(g.name, freqWord[f]...)
}

// disambiguate inserts "-k" before the frequency suffix and " (k)" in the name.
func (g *idGen) disambiguate(k int) {
	suffix := len(g.id) - 2 // ".X"
	tail := [2]byte{g.id[suffix], g.id[suffix+1]}
	g.id = g.id[:suffix]
	g.id = append(g.id, '-')
	g.id = strconv.AppendInt(g.id, int64(k), 10)
	g.id = append(g.id, tail[0], tail[1])
	g.name = append(g.name, " ("...)
	g.name = strconv.AppendInt(g.name, int64(k), 10)
	g.name = append(g.name, ')')
}

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }

func (g *idGen) ids(parts ...string) {
	for _, p := range parts {
		g.id = append(g.id, p...)
	}
}

func (g *idGen) names(parts ...string) {
	for _, p := range parts {
		g.name = append(g.name, p...)
	}
}

func (g *idGen) num(n, width int) {
	var buf [20]byte
	s := strconv.AppendInt(buf[:0], int64(n), 10)
	for i := len(s); i < width; i++ {
		g.id = append(g.id, '0')
	}
	g.id = append(g.id, s...)
}

// petArea picks a petroleum reporting area: a named area, a state, a
// numbered market zone within a state (Y<nn><ST>, shaped like EIA city
// codes) or a numbered terminal (T<ST><nnnn>). It appends the area's name to
// g.name and its code to dst.
func (g *idGen) petArea(dst []byte) []byte {
	switch x := g.r.IntN(20); {
	case x < 2:
		a := pick(g.r, petAreas)
		g.name = append(g.name, a.n...)
		return append(dst, a.c...)
	case x < 4:
		s := pick(g.r, states)
		g.name = append(g.name, s.n...)
		return append(append(dst, 'S'), s.c...)
	case x < 10:
		s := pick(g.r, states)
		z := g.r.IntN(100)
		g.name = append(g.name, s.n...)
		g.name = append(g.name, " Zone "...)
		g.name = append(g.name, digits2[2*z], digits2[2*z+1])
		return append(append(dst, 'Y', digits2[2*z], digits2[2*z+1]), s.c...)
	default:
		s := pick(g.r, states)
		t := g.r.IntN(10000)
		hi, lo := t/100, t%100
		g.name = append(g.name, s.n...)
		g.name = append(g.name, " Terminal "...)
		g.name = append(g.name, digits2[2*hi], digits2[2*hi+1], digits2[2*lo], digits2[2*lo+1])
		dst = append(append(dst, 'T'), s.c...)
		return append(dst, digits2[2*hi], digits2[2*hi+1], digits2[2*lo], digits2[2*lo+1])
	}
}

func famPetPrice(g *idGen, f int) {
	prefix := "EMA"
	switch f {
	case freqD:
		prefix = "EER"
	case freqW:
		prefix = "EMM"
	}
	if g.r.IntN(5) == 0 {
		prefix = pick(g.r, petPricePrefix)
	}
	p := pick(g.r, petProducts)
	procs := petPriceProcs
	if p.crude {
		procs = petCrudePriceProcs
	}
	proc := pick(g.r, procs)
	var ab [12]byte
	ac := g.petArea(ab[:0])
	uc := "DPG"
	g.unit = "$/gal"
	if p.crude {
		uc, g.unit = "DPB", "$/bbl"
	}
	g.source = "EIA"
	g.ids("PET.", prefix, "_", p.c, "_", proc.c, "_")
	g.id = append(g.id, ac...)
	g.ids("_", uc)
	g.names(" ", p.n, " ", proc.n)
}

func famPetVol(g *idGen, f int) {
	p := pick(g.r, petProducts)
	proc := pick(g.r, petVolProcs)
	if proc.c == "FPF" && !p.crude && p.c != "EPLLPA" {
		proc = petVolProcs[5] // refiner and blender net production
	}
	var ab [12]byte
	ac := g.petArea(ab[:0])
	uc, unit := "MBBLD", "MBBL/D"
	if proc.c == "SAX" || proc.c == "SKA" || g.r.IntN(2) == 0 {
		uc, unit = "MBBL", "thousand barrels"
	}
	g.unit = unit
	g.source = "EIA"
	if proc.c == "FPF" && f == freqM {
		g.source = "EIA-914"
	}
	g.ids("PET.", freqLetter[f], "_", p.c, "_", proc.c, "_")
	g.id = append(g.id, ac...)
	g.ids("_", uc)
	g.names(" ", proc.n, " of ", p.n)
}

func famPetShort(g *idGen, f int) {
	g.source = "EIA"
	if f == freqD {
		s := pick(g.r, petShortDaily)
		g.unit = s.unit
		g.ids("PET.", s.c)
		g.names(s.n)
		return
	}
	p := pick(g.r, petShortProds)
	proc := pick(g.r, petShortProcs)
	a := pick(g.r, petShortAreas)
	d := "2"
	g.unit = "MBBL/D"
	if proc.stock || (f != freqW && g.r.IntN(2) == 0) {
		d, g.unit = "1", "thousand barrels"
	}
	g.ids("PET.", freqLetter[f], p.c, proc.c, a.c, d)
	g.names(a.n, " ", proc.n, " of ", p.n)
}

func (g *idGen) usOrState() code {
	if g.r.IntN(8) == 0 {
		return code{"US", "U.S."}
	}
	return pick(g.r, states)
}

func famNGN(g *idGen, f int) {
	c := pick(g.r, ngCodes)
	a := g.usOrState()
	g.source = "EIA"
	if (c.c == "9010" || c.c == "9050") && f == freqM {
		g.source = "EIA-914"
	}
	if c.price && g.r.IntN(2) == 0 {
		g.unit = "$/Mcf"
		g.ids("NG.N", c.c, a.c, "3")
		g.names(a.n, " Natural Gas ", c.n, " Price")
		return
	}
	g.unit = "MMcf"
	g.ids("NG.N", c.c, a.c, "2")
	g.names(a.n, " Natural Gas ", c.n)
}

func famNGSpot(g *idGen, f int) {
	h := pick(g.r, ngHubs)
	g.unit, g.source = "$/MMBtu", "EIA"
	g.ids("NG.RNG", h.c)
	if h.c[0] == 'C' && len(h.c) == 2 {
		g.names(h.n)
		return
	}
	g.names(h.n, " Natural Gas Spot Price")
}

func famNGStorage(g *idGen, f int) {
	r := pick(g.r, ngStorageRegions)
	g.unit, g.source = "Bcf", "EIA"
	g.ids("NG.NW2_EPG0_SWO_", r.c, "_BCF")
	g.names("Working Gas in Underground Storage, ", r.n)
}

func (g *idGen) elecArea() code {
	if g.r.IntN(4) == 0 {
		return pick(g.r, elecRegions)
	}
	return pick(g.r, states)
}

func famElecAgg(g *idGen, f int) {
	m := pick(g.r, elecMeasures)
	fu := pick(g.r, elecFuels)
	a := g.elecArea()
	s := pick(g.r, elecSectors)
	g.unit, g.source = m.unit, "EIA"
	g.ids("ELEC.", m.c, ".", fu.c, "-", a.c, "-", s.c)
	g.names(m.n, " : ", fu.n, " : ", s.n, " : ", a.n)
}

func famElecPrice(g *idGen, f int) {
	a := g.elecArea()
	s := pick(g.r, elecRetailSectors)
	g.unit, g.source = "cents/kWh", "EIA"
	g.ids("ELEC.PRICE.", a.c, "-", s.c)
	g.names("Average retail price of electricity : ", a.n, " : ", s.n)
}

func mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// facilityName gives a stable name to a numeric facility id.
func (g *idGen) facilityName(id int, kinds []string) {
	h := mix64(uint64(id) + 0x9e3779b97f4a7c15)
	g.name = append(g.name, placeNames[h%uint64(len(placeNames))]...)
	g.name = append(g.name, ' ')
	g.name = append(g.name, kinds[(h>>32)%uint64(len(kinds))]...)
}

func famElecPlant(g *idGen, f int) {
	m := pick(g.r, plantMeasures)
	fu := pick(g.r, plantFuels)
	pm := pick(g.r, fu.pms)
	plant := 1 + g.r.IntN(65000)
	g.unit, g.source = m.unit, "EIA-923"
	g.ids("ELEC.PLANT.", m.c, ".")
	g.num(plant, 0)
	g.ids("-", fu.c, "-", pm.c)
	g.names(m.n, " : ")
	g.facilityName(plant, plantKinds)
	g.names(" (")
	g.name = strconv.AppendInt(g.name, int64(plant), 10)
	g.names(") : ", fu.n, " : ", pm.n)
}

func famIntl(g *idGen, f int) {
	p := pick(g.r, intlProducts)
	a := pick(g.r, intlActivities)
	c := pick(g.r, countries)
	u := pick(g.r, p.units)
	g.unit, g.source = u.n, "IEA"
	g.ids("INTL.", p.c, "-", a.c, "-", c.c, "-", u.c)
	g.names(p.n, " ", a.n, ", ", c.n)
}

func famSEDS(g *idGen, f int) {
	s := pick(g.r, sedsSources)
	sec := pick(g.r, sedsSectors)
	u := pick(g.r, sedsUnits)
	st := g.usOrState()
	g.unit, g.source = u.unit, "EIA"
	if g.unit == "" {
		g.unit = s.phys
	}
	g.ids("SEDS.", s.c, sec.c, u.c, ".", st.c)
	g.names(s.n, " ", u.n, " in the ", sec.n, " sector, ", st.n)
}

var mineKinds = []string{"Mine", "No. 2 Mine", "Surface Mine", "Deep Mine", "Strip", "Preparation Plant"}

func famCoal(g *idGen, f int) {
	si := g.r.IntN(len(states))
	id := (si+1)*100000 + g.r.IntN(100000)
	g.source = "EIA"
	meas, mname := "PRODUCTION", "Coal mine production"
	g.unit = "thousand short tons"
	if g.r.IntN(4) == 0 {
		meas, mname, g.unit = "PRICE", "Average sales price of coal", "$/short ton"
	}
	g.ids("COAL.MINE.", meas, ".")
	g.num(id, 7)
	g.names(mname, " : ")
	g.facilityName(id, mineKinds)
	g.names(" (")
	g.name = append(g.name, g.id[len(g.id)-7:]...)
	g.names(") : ", states[si].n)
}

func famSTEO(g *idGen, f int) {
	c := pick(g.r, steoCodes)
	r := pick(g.r, steoRegions)
	g.unit, g.source = c.unit, "EIA"
	g.ids("STEO.", c.c, "_", r.c)
	g.names(c.n, ", ", r.n)
}

func famEBA(g *idGen, f int) {
	ba := pick(g.r, balancingAuthorities)
	g.unit, g.source = "MWh", "EIA"
	if g.r.IntN(4) == 0 {
		to := pick(g.r, balancingAuthorities)
		if to.c != ba.c {
			g.ids("EBA.", ba.c, "-", to.c, ".ID")
			g.names("Actual net interchange for ", ba.n, " (", ba.c, ") to ", to.n, " (", to.c, ")")
			return
		}
	}
	m := pick(g.r, ebaMeasures)
	g.ids("EBA.", ba.c, "-ALL.", m.c)
	g.names(m.n, " for ", ba.n, " (", ba.c, ")")
}

func famEntsoeArea(g *idGen, f int) {
	z := pick(g.r, biddingZones)
	g.source = "ENTSO-E"
	switch x := g.r.IntN(10); {
	case x < 4:
		m := pick(g.r, entsoeMeasures)
		g.unit = m.unit
		g.ids("ENTSOE.", z.c, ".", m.c)
		g.names(m.n, ", ", z.n)
	case x < 8:
		t := pick(g.r, entsoeTypes)
		g.unit = "MWh"
		g.ids("ENTSOE.", z.c, ".GEN.", t.c)
		g.names("Actual Generation per Production Type, ", t.n, ", ", z.n)
	default:
		to := pick(g.r, biddingZones)
		g.unit = "MWh"
		g.ids("ENTSOE.", z.c, ".FLOW.", to.c)
		g.names("Cross-Border Physical Flow, ", z.n, " > ", to.n)
	}
}

var unitKinds = []string{"Unit", "Block", "Gruppo", "Tranche", "Aggregat"}

func famEntsoeUnit(g *idGen, f int) {
	z := pick(g.r, biddingZones)
	t := pick(g.r, entsoeTypes[:len(entsoeTypes)-1])
	g.unit, g.source = "MWh", "ENTSO-E"
	g.ids("ENTSOE.", z.c, ".UNIT.", z.office, "W")
	start := len(g.id)
	sum := 0
	for i := 0; i < 12; i++ {
		c := alnum[g.r.IntN(len(alnum))]
		g.id = append(g.id, c)
		sum += int(c) * (i + 1)
	}
	g.id = append(g.id, alnum[sum%len(alnum)])
	eic := g.id[start-3:]
	plant := g.r.IntN(1 << 20)
	g.names("Actual Generation per Generation Unit, ")
	g.facilityName(plant, unitKinds)
	g.names(" ")
	g.name = strconv.AppendInt(g.name, int64(1+g.r.IntN(8)), 10)
	g.names(" (", t.n, ", ")
	g.name = append(g.name, eic...)
	g.names("), ", z.n)
}
