package localcache_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// The metamorphic test holds Store.Get, Info, Latest and Search against a
// plain Go model: per dataset a map from series id to a map from
// normalized period to value, built from the same random rows with its own
// (time package) normalization and "last row in input order wins".

type mSeries struct {
	meta   format.SeriesMeta
	freq   format.Frequency // expected in the index
	points map[int64]float64
}

func (s *mSeries) sorted(from, to int64) ([]int64, []float64) {
	var ps []int64
	for p := range s.points {
		if p >= from && p <= to {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	vs := make([]float64, len(ps))
	for i, p := range ps {
		vs[i] = s.points[p]
	}
	return ps, vs
}

type mDataset struct {
	series   map[string]*mSeries
	ids      []string
	epoch    uint64
	manifest *format.Manifest
	dir      string
}

func (d *mDataset) timestamps() bool {
	for _, s := range d.series {
		if s.freq == format.Hourly {
			return true
		}
	}
	return false
}

// bucket is the model's own normalization, through the time package.
func bucket(f format.Frequency, p int64) int64 {
	t := time.Unix(p, 0).UTC()
	y, m, d := t.Date()
	switch f {
	case format.Hourly:
		return time.Date(y, m, d, t.Hour(), 0, 0, 0, time.UTC).Unix()
	case format.Daily:
		return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix()
	case format.Weekly:
		back := (int(t.Weekday()) + 6) % 7 // days since Monday
		return time.Date(y, m, d-back, 0, 0, 0, 0, time.UTC).Unix()
	case format.Monthly:
		return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC).Unix()
	case format.Quarterly:
		return time.Date(y, (m-1)/3*3+1, 1, 0, 0, 0, 0, time.UTC).Unix()
	}
	return time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
}

func step(f format.Frequency, p int64, n int) int64 {
	t := time.Unix(p, 0).UTC()
	switch f {
	case format.Hourly:
		return p + int64(n)*3600
	case format.Daily:
		return t.AddDate(0, 0, n).Unix()
	case format.Weekly:
		return t.AddDate(0, 0, 7*n).Unix()
	case format.Monthly:
		return t.AddDate(0, n, 0).Unix()
	case format.Quarterly:
		return t.AddDate(0, 3*n, 0).Unix()
	}
	return t.AddDate(n, 0, 0).Unix()
}

var (
	mFreqs = []format.Frequency{format.Hourly, format.Daily, format.Weekly, format.Monthly, format.Quarterly, format.Annual}
	// Shared prefixes and characters whose case folding round-trips
	// (no 'ı', 'ß', 'ſ').
	mPrefixes = []string{"PET.", "PET.R", "PET.RW", "NG.", "ELEC.GEN.", "Zürich.", "東京.", "🙂", "a", "A", "x:y.", "Ж"}
	mAlphabet = []rune("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._- éÜø東京🙂Жж")
	mDatasets = []string{"alpha", "beta", "gamma.v2", "delta_4", "eps-5"}
)

type mGen struct {
	rng  *rand.Rand
	used map[string]bool // ids across the home: unique
}

func (g *mGen) id() string {
	for {
		var b strings.Builder
		if g.rng.IntN(5) > 0 {
			b.WriteString(mPrefixes[g.rng.IntN(len(mPrefixes))])
		}
		for range 1 + g.rng.IntN(8) {
			b.WriteRune(mAlphabet[g.rng.IntN(len(mAlphabet))])
		}
		id := b.String()
		// An id extending another one makes ids that are prefixes of each
		// other.
		if g.rng.IntN(4) == 0 && len(g.used) > 0 {
			for u := range g.used {
				id = u + id[:1]
				break
			}
		}
		if !g.used[id] && strings.TrimSpace(id) != "" {
			g.used[id] = true
			return id
		}
	}
}

// dataset makes random series and rows: random frequencies, lengths 0..max,
// periods inside their buckets (not only at the start), some duplicates
// and rows of all series interleaved in a random input order.
func (g *mGen) dataset(epoch uint64, maxLen int) (*mDataset, *format.Table) {
	rng := g.rng
	d := &mDataset{series: map[string]*mSeries{}, epoch: epoch}
	tb := &format.Table{}
	type row struct {
		s    uint32
		p    int64
		v    float64
		last bool
	}
	var rows []row
	ns := rng.IntN(25)
	for i := range ns {
		f := mFreqs[rng.IntN(len(mFreqs))]
		if f == format.Hourly && rng.IntN(3) > 0 {
			f = mFreqs[1+rng.IntN(len(mFreqs)-1)] // fewer timestamp datasets
		}
		meta := format.SeriesMeta{ID: g.id(), Name: "name " + strconv.Itoa(rng.IntN(1000)), Unit: []string{"", "MWh", "$/bbl", "°C"}[rng.IntN(4)], Source: "src" + strconv.Itoa(i), Frequency: f}
		n := rng.IntN(maxLen + 1)
		exact := rng.IntN(3) == 0 // on bucket starts, regular: the cook may infer the frequency
		if exact && n >= 3 {
			meta.Frequency = ""
		}
		s := &mSeries{meta: meta, freq: f, points: map[int64]float64{}}
		if meta.Frequency == "" && n == 0 {
			s.freq = format.Daily
		}
		d.series[meta.ID] = s
		d.ids = append(d.ids, meta.ID)
		tb.Series = append(tb.Series, meta)
		// Years 1890..2110: before and after the epoch.
		start := bucket(f, utc("1890-01-01")+rng.Int64N(220*365*86400))
		for k := range n {
			p := step(f, start, k)
			if !exact {
				p += rng.Int64N(step(f, p, 1) - p) // anywhere in the bucket
			}
			rows = append(rows, row{s: uint32(i), p: p, v: math.Round(rng.NormFloat64()*1e6) / 100})
			if !exact && rng.IntN(6) == 0 { // a duplicate of the bucket
				rows = append(rows, row{s: uint32(i), p: bucket(f, p) + rng.Int64N(step(f, bucket(f, p), 1)-bucket(f, p)), v: float64(rng.IntN(100))})
			}
		}
	}
	rng.Shuffle(len(rows), func(a, b int) { rows[a], rows[b] = rows[b], rows[a] })
	for _, r := range rows {
		tb.Append(r.s, r.p, r.v)
		s := d.series[tb.Series[r.s].ID]
		s.points[bucket(s.freq, r.p)] = r.v // later rows overwrite: last one wins
	}
	slices.Sort(d.ids)
	return d, tb
}

// query picks a random [from, to]: open ends, bucket starts, arbitrary
// instants, reversed and far outside the data.
func query(rng *rand.Rand, s *mSeries) (int64, int64) {
	var lo, hi int64 = utc("1880-01-01"), utc("2120-01-01")
	if len(s.points) > 0 {
		ps, _ := s.sorted(snapshot.MinTime, snapshot.MaxTime)
		lo, hi = ps[0], ps[len(ps)-1]
	}
	pick := func() int64 {
		switch rng.IntN(8) {
		case 0:
			return snapshot.MinTime
		case 1:
			return snapshot.MaxTime
		case 2:
			for p := range s.points { // an exact period
				return p
			}
			return lo
		case 3:
			return lo - 1 - rng.Int64N(1e9) // before the data
		case 4:
			return hi + 1 + rng.Int64N(1e9) // after it
		}
		return lo + rng.Int64N(hi-lo+1+86400*40) - 86400*20 // anywhere around it, unaligned
	}
	return pick(), pick()
}

type heldResult struct {
	r       localcache.Result
	ref     string
	periods []int64
	values  []float64
}

func checkSeries(t *testing.T, st *localcache.Store, rng *rand.Rand, name string, d *mDataset, id string, held *[]heldResult) {
	t.Helper()
	s := d.series[id]
	ref := id
	if rng.IntN(2) == 0 {
		ref = name + ":" + id
	}
	for range 6 {
		from, to := query(rng, s)
		wp, wv := s.sorted(from, to)
		r, err := st.Get(ref, from, to)
		if err != nil {
			t.Fatalf("Get(%q, %d, %d): %v", ref, from, to, err)
		}
		if r.Dataset != name {
			t.Fatalf("Get(%q) from dataset %q, want %q", ref, r.Dataset, name)
		}
		checkPoints(t, fmt.Sprintf("%s Get(%q, %d, %d)", name, ref, from, to), r.Points, wp, wv)
		if r.Points.Len() > 0 && (r.Points.Secs != nil) != d.timestamps() {
			t.Errorf("Get(%q): Secs set = %v in a dataset with timestamps = %v", ref, r.Points.Secs != nil, d.timestamps())
		}
		if rng.IntN(10) == 0 {
			*held = append(*held, heldResult{r: r, ref: ref, periods: wp, values: wv})
		} else {
			r.Release()
		}
	}
	in, err := st.Info(ref)
	if err != nil {
		t.Fatalf("Info(%q): %v", ref, err)
	}
	ps, vs := s.sorted(snapshot.MinTime, snapshot.MaxTime)
	want := snapshot.Info{ID: id, Name: s.meta.Name, Unit: s.meta.Unit, Source: s.meta.Source, Frequency: s.freq,
		Count: len(ps), LatestValue: math.NaN(), Tier: format.Hot, Batch: in.Batch, Offset: in.Offset}
	if len(ps) > 0 {
		want.First, want.Last, want.LatestValue = ps[0], ps[len(ps)-1], vs[len(vs)-1]
	}
	got := in.Info
	if math.IsNaN(got.LatestValue) && math.IsNaN(want.LatestValue) {
		got.LatestValue, want.LatestValue = 0, 0
	}
	if got != want || in.Dataset != name || in.SnapshotID != d.manifest.SnapshotID || in.Epoch != d.epoch {
		t.Errorf("Info(%q) = %+v (dataset %s, snapshot %s, epoch %d)\nwant %+v (dataset %s, snapshot %s, epoch %d)",
			ref, got, in.Dataset, in.SnapshotID, in.Epoch, want, name, d.manifest.SnapshotID, d.epoch)
	}
	p, v, err := st.Latest(ref)
	switch {
	case len(ps) == 0:
		if err == nil || errors.Is(err, localcache.ErrNotFound) {
			t.Errorf("Latest(%q) of an empty series: %v, want a no-data error that is not ErrNotFound", ref, err)
		}
	case err != nil || p != ps[len(ps)-1] || v != vs[len(vs)-1]:
		t.Errorf("Latest(%q) = %d, %v, %v; want %d, %v", ref, p, v, err, ps[len(ps)-1], vs[len(vs)-1])
	}
}

// checkSearch looks for a random piece of a random id, in random case.
func checkSearch(t *testing.T, st *localcache.Store, rng *rand.Rand, name, id string) {
	t.Helper()
	runes := []rune(id)
	i := rng.IntN(len(runes))
	j := i + 1 + rng.IntN(len(runes)-i)
	q := string(runes[i:j])
	if strings.TrimSpace(q) == "" {
		return
	}
	if rng.IntN(2) == 0 {
		q = strings.ToUpper(q)
	}
	hits, err := st.Search(q, 10000)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	words := strings.Fields(strings.ToLower(q))
	for _, h := range hits {
		found = found || (h.Dataset == name && h.ID == id)
		hay := strings.ToLower(h.ID) + "\x00" + strings.ToLower(h.Name)
		for _, w := range words {
			if !strings.Contains(hay, w) {
				t.Errorf("Search(%q) hit %+v does not contain %q", q, h, w)
			}
		}
	}
	if !found {
		t.Errorf("Search(%q) did not find %s:%s (%d hits)", q, name, id, len(hits))
	}
}

func checkUnknown(t *testing.T, st *localcache.Store, rng *rand.Rand, model map[string]*mDataset, g *mGen) {
	t.Helper()
	var names []string
	for n := range model {
		names = append(names, n)
	}
	slices.Sort(names)
	refs := []string{"", ":", "no such id", "nosuch:x"}
	for range 10 {
		id := g.id() // fresh: in no dataset
		refs = append(refs, id, names[rng.IntN(len(names))]+":"+id, "nosuchds:"+id)
	}
	// An id of one dataset asked of another.
	for _, n := range names {
		for _, o := range names {
			if n != o && len(model[o].ids) > 0 {
				refs = append(refs, n+":"+model[o].ids[rng.IntN(len(model[o].ids))])
			}
		}
	}
	for _, ref := range refs {
		if _, err := st.Get(ref, snapshot.MinTime, snapshot.MaxTime); !errors.Is(err, localcache.ErrNotFound) {
			t.Errorf("Get(%q): %v, want ErrNotFound", ref, err)
		}
		if _, err := st.Info(ref); !errors.Is(err, localcache.ErrNotFound) {
			t.Errorf("Info(%q): %v, want ErrNotFound", ref, err)
		}
		if _, _, err := st.Latest(ref); !errors.Is(err, localcache.ErrNotFound) {
			t.Errorf("Latest(%q): %v, want ErrNotFound", ref, err)
		}
	}
}

func mSeed(t *testing.T) uint64 {
	if s := os.Getenv("ES_TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	return 20261129
}

// TestStoreMetamorphic publishes random datasets into one home, then in
// rounds republishes some (new content, new epoch), republishes others
// unchanged, adds new ones, and after every Refresh holds every series and
// some random misses against the model. Results taken in one round are
// held across the swaps of the next and must still read what they read.
func TestStoreMetamorphic(t *testing.T) {
	seed := mSeed(t)
	t.Logf("seed %d (ES_TEST_SEED to repeat)", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	g := &mGen{rng: rng, used: map[string]bool{}}
	home := t.TempDir()
	model := map[string]*mDataset{}
	retired := []string{}
	put := func(name string) {
		if old := model[name]; old != nil {
			for id := range old.series {
				delete(g.used, id) // ids of the replaced content may come back
			}
			retired = append(retired, old.dir)
		}
		d, tb := g.dataset(uint64(len(retired)+1), 40)
		d.manifest, d.dir = publish(t, home, name, tb, format.WriteOptions{Epoch: d.epoch, CoversThroughSeq: rng.Uint64N(1000), BatchRows: 1 + rng.IntN(80)})
		model[name] = d
	}
	for _, name := range mDatasets[:3] {
		put(name)
	}
	st := openStore(t, home)
	var held []heldResult
	rounds := 8
	for round := range rounds {
		// Results held since the last round read what they read then.
		for _, h := range held {
			checkPoints(t, "held "+h.ref, h.r.Points, h.periods, h.values)
			h.r.Release()
			h.r.Release() // a second Release is harmless
		}
		held = held[:0]

		var names []string
		for n := range model {
			names = append(names, n)
		}
		slices.Sort(names)
		if got := st.DatasetNames(); !slices.Equal(got, names) {
			t.Fatalf("round %d: datasets %v, want %v", round, got, names)
		}
		for _, name := range names {
			d := model[name]
			for _, id := range d.ids {
				checkSeries(t, st, rng, name, d, id, &held)
				if rng.IntN(3) == 0 {
					checkSearch(t, st, rng, name, id)
				}
			}
		}
		checkUnknown(t, st, rng, model, g)
		if t.Failed() {
			t.Fatalf("round %d failed (seed %d)", round, seed)
		}

		// Change the home for the next round.
		switch op := rng.IntN(4); {
		case op == 0 && len(model) < len(mDatasets):
			put(mDatasets[len(model)])
		case op == 1: // same rows again: same id, nothing to swap
			name := names[rng.IntN(len(names))]
			d := model[name]
			m, dir := publish(t, home, name, mTable(d), format.WriteOptions{Epoch: d.epoch, CoversThroughSeq: d.manifest.CoversThroughSeq, BatchRows: 1 + rng.IntN(80)})
			if m.SnapshotID == d.manifest.SnapshotID {
				break
			}
			// Another batch size: other bytes, the same data.
			retired = append(retired, d.dir)
			d.manifest, d.dir = m, dir
		default:
			for _, name := range names {
				if rng.IntN(2) == 0 {
					put(name)
				}
			}
		}
		if err := st.Refresh(); err != nil {
			t.Fatalf("round %d: Refresh: %v", round, err)
		}
	}
	for _, h := range held {
		h.r.Release()
	}
	// Every retired snapshot has been unmapped, the ones in service not.
	var serving []string
	for _, d := range model {
		serving = append(serving, d.dir)
	}
	if m, ok := mappedDirs(t, append(retired, serving...)...); ok {
		for _, dir := range retired {
			if m[dir] && !slices.Contains(serving, dir) {
				t.Errorf("retired snapshot %s is still mapped", dir)
			}
		}
		for _, dir := range serving {
			if !m[dir] {
				t.Errorf("snapshot in service %s is not mapped", dir)
			}
		}
	}
}

// mTable rebuilds a table from the model (bucket starts, no duplicates).
func mTable(d *mDataset) *format.Table {
	tb := &format.Table{}
	for i, id := range d.ids {
		s := d.series[id]
		meta := s.meta
		meta.Frequency = s.freq
		tb.Series = append(tb.Series, meta)
		ps, vs := s.sorted(snapshot.MinTime, snapshot.MaxTime)
		for k := range ps {
			tb.Append(uint32(i), ps[k], vs[k])
		}
	}
	return tb
}
