package localcache

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// liveLong reports whether the long forms of the tests should run:
// ES_NIGHTLY=1, or -long if some test file of the package defines it.
func liveLong() bool {
	if os.Getenv("ES_NIGHTLY") == "1" {
		return true
	}
	f := flag.Lookup("long")
	return f != nil && f.Value.String() == "true"
}

// liveRace reports whether the test binary was built with -race.
func liveRace() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// liveSeed returns ES_SEED if set, else a fresh seed; it is logged so a
// failure can be replayed.
func liveSeed(t testing.TB) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ES_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("ES_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with ES_SEED=%d)", seed, seed)
	return seed
}

// liveTempDir is t.TempDir, on /dev/shm when there is one: these tests
// fsync thousands of times, which costs milliseconds each on a virtual
// disk and nothing on tmpfs, and they kill processes, not machines, so
// what reached the page cache is what survives.
func liveTempDir(t testing.TB) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "es-live-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

func liveDay(s string) int64 {
	tm, err := time.Parse("2006-01-02", s)
	if err != nil {
		panic(err)
	}
	return tm.Unix()
}

// liveLogger returns a logger writing into a buffer that is safe to read
// while the store logs from other goroutines.
type liveLogBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *liveLogBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *liveLogBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func liveLogger() (*slog.Logger, *liveLogBuf) {
	b := &liveLogBuf{}
	return slog.New(slog.NewTextHandler(b, nil)), b
}

// liveCook publishes a snapshot of tb as dataset name in home.
func liveCook(t testing.TB, home, name string, tb *format.Table, o format.WriteOptions) *format.Manifest {
	t.Helper()
	dsDir := filepath.Join(home, DatasetsDir, name)
	tmp, err := format.TempSnapshotDir(dsDir)
	if err != nil {
		t.Fatal(err)
	}
	o.Dataset = name
	m, _, err := format.Write(tmp, tb, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := format.Publish(dsDir, tmp, m); err != nil {
		t.Fatal(err)
	}
	return m
}

func liveOpen(t testing.TB, home string, o *Options) *Store {
	t.Helper()
	s, err := Open(home, o)
	if err != nil {
		t.Fatalf("open %s: %v", home, err)
	}
	return s
}

// liveSeries is the model of one series.
type liveSeries struct {
	freq               format.Frequency
	name, unit, source string
	pts                map[int64]float64 // normalized period -> value
}

// liveModel is what a dataset must serve: a plain map per series.
type liveModel struct {
	last   uint64
	series map[string]*liveSeries
}

func liveModelOf(tb *format.Table) *liveModel {
	m := &liveModel{series: map[string]*liveSeries{}}
	for _, sm := range tb.Series {
		m.series[sm.ID] = &liveSeries{freq: sm.Frequency, name: sm.Name, unit: sm.Unit, source: sm.Source, pts: map[int64]float64{}}
	}
	for i := range tb.Period {
		s := m.series[tb.Series[tb.SeriesIdx[i]].ID]
		s.pts[s.freq.Normalize(tb.Period[i])] = tb.Value[i]
	}
	return m
}

func (m *liveModel) clone() *liveModel {
	c := &liveModel{last: m.last, series: make(map[string]*liveSeries, len(m.series))}
	for id, s := range m.series {
		cs := *s
		cs.pts = make(map[int64]float64, len(s.pts))
		for p, v := range s.pts {
			cs.pts[p] = v
		}
		c.series[id] = &cs
	}
	return c
}

// apply is Store.Apply on the model: records at or below last are
// skipped; a series is created by its first record, with the frequency
// its metadata names (Daily if none), which later records do not change;
// metadata replaces name, unit and source.
func (m *liveModel) apply(batch []format.Record) int {
	n := 0
	for _, r := range batch {
		if r.Seq <= m.last {
			continue
		}
		m.last = r.Seq
		n++
		s := m.series[r.SeriesID]
		if s == nil {
			s = &liveSeries{freq: format.Daily, pts: map[int64]float64{}}
			if r.Meta != nil && r.Meta.Frequency != "" {
				f, err := format.ParseFrequency(string(r.Meta.Frequency))
				if err != nil {
					panic(err)
				}
				s.freq = f
			}
			m.series[r.SeriesID] = s
		}
		if r.Meta != nil {
			s.name, s.unit, s.source = r.Meta.Name, r.Meta.Unit, r.Meta.Source
		}
		p := s.freq.Normalize(r.Period)
		if r.Op == format.Delete {
			delete(s.pts, p)
		} else {
			s.pts[p] = r.Value
		}
	}
	return n
}

func (s *liveSeries) sorted(from, to int64) ([]int64, []float64) {
	var ps []int64
	for p := range s.pts {
		if p >= from && p <= to {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	vs := make([]float64, len(ps))
	for i, p := range ps {
		vs[i] = s.pts[p]
	}
	return ps, vs
}

// liveCheck holds every series of dataset "d" of s against m: the full
// range, ranges random if rng is set, Info, Latest and LastSeq.
func liveCheck(s *Store, m *liveModel, rng *rand.Rand) error {
	if seq, err := s.LastSeq("d"); err != nil || seq != m.last {
		return fmt.Errorf("last seq %d (%v), model %d", seq, err, m.last)
	}
	ids := make([]string, 0, len(m.series))
	for id := range m.series {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		ms := m.series[id]
		ranges := [][2]int64{{snapshot.MinTime, snapshot.MaxTime}}
		if rng != nil {
			for range 2 {
				a, b := liveRandTime(rng), liveRandTime(rng)
				if rng.IntN(10) > 0 && a > b {
					a, b = b, a
				}
				ranges = append(ranges, [2]int64{a, b})
			}
			ranges = append(ranges, [2]int64{snapshot.MinTime, liveRandTime(rng)}, [2]int64{liveRandTime(rng), snapshot.MaxTime})
		}
		for _, r := range ranges {
			res, err := s.Get("d:"+id, r[0], r[1])
			if err != nil {
				return fmt.Errorf("get %s [%d, %d]: %v", id, r[0], r[1], err)
			}
			got := make([]int64, res.Points.Len())
			for i := range got {
				got[i] = res.Points.Unix(i)
			}
			gotV := slices.Clone(res.Points.Values)
			freq := res.Frequency
			res.Release()
			wantP, wantV := ms.sorted(r[0], r[1])
			if !slices.Equal(got, wantP) || !slices.Equal(gotV, wantV) {
				return fmt.Errorf("get %s [%d, %d]:\n got  %v %v\n want %v %v", id, r[0], r[1], got, gotV, wantP, wantV)
			}
			if freq != ms.freq {
				return fmt.Errorf("get %s: frequency %q, model %q", id, freq, ms.freq)
			}
		}
		in, err := s.Info(id)
		if err != nil {
			return fmt.Errorf("info %s: %v", id, err)
		}
		wantP, wantV := ms.sorted(snapshot.MinTime, snapshot.MaxTime)
		if in.Count != len(wantP) || in.Name != ms.name || in.Unit != ms.unit || in.Source != ms.source || in.Frequency != ms.freq || in.Dataset != "d" {
			return fmt.Errorf("info %s: count %d name %q unit %q source %q freq %q; model %d %q %q %q %q", id, in.Count, in.Name, in.Unit, in.Source, in.Frequency, len(wantP), ms.name, ms.unit, ms.source, ms.freq)
		}
		per, val, lerr := s.Latest(id)
		if n := len(wantP); n > 0 {
			if in.First != wantP[0] || in.Last != wantP[n-1] || in.LatestValue != wantV[n-1] {
				return fmt.Errorf("info %s: first %d last %d latest %v; model %d %d %v", id, in.First, in.Last, in.LatestValue, wantP[0], wantP[n-1], wantV[n-1])
			}
			if lerr != nil || per != wantP[n-1] || val != wantV[n-1] {
				return fmt.Errorf("latest %s: %d %v %v; model %d %v", id, per, val, lerr, wantP[n-1], wantV[n-1])
			}
		} else {
			if in.First != 0 || in.Last != 0 {
				return fmt.Errorf("info %s: empty series with bounds %d..%d", id, in.First, in.Last)
			}
			if lerr == nil {
				return fmt.Errorf("latest %s: empty series gave %d %v", id, per, val)
			}
		}
	}
	if _, err := s.Get("d:no-such-series", snapshot.MinTime, snapshot.MaxTime); !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("unknown series: %v", err)
	}
	return nil
}

// liveRandTime is a time in the range the generators use, on a bucket
// boundary or not.
func liveRandTime(rng *rand.Rand) int64 {
	t := liveDay("2019-06-01") + rng.Int64N(9*365*86400)
	if rng.IntN(20) == 0 {
		t = liveDay("1960-01-01") + rng.Int64N(15*365*86400)
	}
	if rng.IntN(3) == 0 {
		t -= t % 86400
	}
	return t
}

// liveMetaBase is the base snapshot of the metamorphic test: daily,
// monthly and weekly series, one of them empty; no intraday series (a
// delta adding one turns the snapshot into timestamps at compaction).
func liveMetaBase(rng *rand.Rand) *format.Table {
	tb := &format.Table{Series: []format.SeriesMeta{
		{ID: "A", Name: "a", Unit: "MW", Source: "src", Frequency: format.Daily},
		{ID: "M", Name: "m", Frequency: format.Monthly},
		{ID: "W", Name: "w", Frequency: format.Weekly},
		{ID: "E", Name: "empty", Frequency: format.Daily},
		{ID: "Old", Frequency: format.Annual},
	}}
	for i := range 60 {
		tb.Append(0, liveDay("2026-09-01")+int64(i)*86400, float64(rng.IntN(1000)))
	}
	for i := range 24 {
		tb.Append(1, time.Date(2025, time.Month(1+i), 1, 0, 0, 0, 0, time.UTC).Unix(), float64(i))
	}
	for i := range 20 {
		tb.Append(2, liveDay("2026-06-01")+int64(i)*7*86400, float64(-i))
	}
	for i := range 5 {
		tb.Append(4, time.Date(1962+i, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), float64(i))
	}
	return tb
}

// liveMetaGen makes the random batches of the metamorphic test.
type liveMetaGen struct {
	rng   *rand.Rand
	m     *liveModel // what has been applied (for revisions and deletes)
	seq   uint64
	spell map[format.Frequency][]string
}

var liveSpellings = []string{"", "D", "daily", "M", "monthly", "H", "h", "hourly", "W", "week", "Q", "A", "yearly"}

func (g *liveMetaGen) batch() []format.Record {
	n := 1 + g.rng.IntN(10)
	out := make([]format.Record, 0, n)
	ids := make([]string, 0, len(g.m.series))
	for id := range g.m.series {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for range n {
		g.seq += 1 + uint64(g.rng.IntN(3)/2)
		r := format.Record{Seq: g.seq, Op: format.Upsert, Value: float64(g.seq) + 0.25}
		if g.rng.IntN(4) == 0 || len(ids) == 0 {
			// A series that may be new.
			r.SeriesID = fmt.Sprintf("N%d", g.rng.IntN(25))
			if g.rng.IntN(5) > 0 {
				r.Meta = &format.RecordMeta{Name: "new " + r.SeriesID, Unit: "u", Frequency: format.Frequency(liveSpellings[g.rng.IntN(len(liveSpellings))])}
			}
		} else {
			r.SeriesID = ids[g.rng.IntN(len(ids))]
			if g.rng.IntN(10) == 0 {
				r.Meta = &format.RecordMeta{Name: fmt.Sprint("renamed ", g.seq), Source: "s", Frequency: "M"}
			}
		}
		freq := format.Daily
		s := g.m.series[r.SeriesID]
		if s != nil {
			freq = s.freq
		} else if r.Meta != nil && r.Meta.Frequency != "" {
			freq, _ = format.ParseFrequency(string(r.Meta.Frequency))
		}
		r.Period = liveRandTime(g.rng)
		if freq == format.Hourly {
			r.Period = liveDay("2026-10-01") + g.rng.Int64N(30*86400)
		}
		if s != nil && len(s.pts) > 0 && g.rng.IntN(2) == 0 {
			// Revise (or delete) an existing point, at a random time inside
			// its bucket: a daily value stamped 14:00 revises the day.
			ps, _ := s.sorted(snapshot.MinTime, snapshot.MaxTime)
			p := ps[g.rng.IntN(len(ps))]
			r.Period = p + g.rng.Int64N(liveBucket(freq, p)-p)
		}
		if g.rng.IntN(5) == 0 {
			r.Op = format.Delete
		}
		out = append(out, r)
	}
	return out
}

// liveBucket returns the start of the bucket after the one starting at p.
func liveBucket(f format.Frequency, p int64) int64 {
	switch f {
	case format.Hourly:
		return p + 3600
	case format.Daily:
		return p + 86400
	case format.Weekly:
		return p + 7*86400
	}
	t := time.Unix(p, 0).UTC()
	switch f {
	case format.Monthly:
		t = t.AddDate(0, 1, 0)
	case format.Quarterly:
		t = t.AddDate(0, 3, 0)
	default:
		t = t.AddDate(1, 0, 0)
	}
	return t.Unix()
}

// liveBadBatches are batches Apply must refuse without changing anything.
func liveBadBatches(next uint64) map[string][]format.Record {
	ok := func(seq uint64) format.Record {
		return format.Record{Seq: seq, Op: format.Upsert, SeriesID: "A", Period: liveDay("2026-12-01"), Value: 1}
	}
	with := func(r format.Record, f func(*format.Record)) format.Record { f(&r); return r }
	return map[string][]format.Record{
		"out of order":        {ok(next + 1), ok(next)},
		"duplicate seq":       {ok(next), ok(next)},
		"seq 0":               {with(ok(0), func(r *format.Record) {})},
		"NaN":                 {ok(next), with(ok(next+1), func(r *format.Record) { r.Value = math.NaN() })},
		"Inf":                 {with(ok(next), func(r *format.Record) { r.Value = math.Inf(-1) })},
		"empty id":            {ok(next), with(ok(next+1), func(r *format.Record) { r.SeriesID = "" })},
		"unknown op":          {with(ok(next), func(r *format.Record) { r.Op = 9 })},
		"bad frequency":       {with(ok(next), func(r *format.Record) { r.SeriesID, r.Meta = "Nbad", &format.RecordMeta{Frequency: "often"} })},
		"period out of range": {ok(next), with(ok(next+1), func(r *format.Record) { r.Period = math.MaxInt64 / 2 })},
	}
}

// TestLiveMetamorphic holds a store against a plain map under random
// upserts, revisions, deletes, new series, compactions, installs from a
// second store fed the same records, reopenings and bad input, checking
// every series after every step.
func TestLiveMetamorphic(t *testing.T) {
	steps := 300
	if liveLong() {
		steps = 5000
	}
	if liveRace() || testing.Short() {
		steps = 120
	}
	seed := liveSeed(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	base := liveMetaBase(rng)
	homeA, homeB := liveTempDir(t), liveTempDir(t)
	liveCook(t, homeA, "d", base, format.WriteOptions{Epoch: 1})
	liveCook(t, homeB, "d", base, format.WriteOptions{Epoch: 1})
	opts := &Options{CompactRows: -1, CompactBytes: -1, Keep: 1 + rng.IntN(3)}
	a, b := liveOpen(t, homeA, opts), liveOpen(t, homeB, opts)
	defer func() { a.Close(); b.Close() }()
	model := liveModelOf(base)
	gen := &liveMetaGen{rng: rng, m: model}
	var applied [][]format.Record
	stat := func(s *Store) DatasetStatus {
		st, err := s.Status()
		if err != nil || len(st) != 1 {
			t.Fatalf("status: %v %v", st, err)
		}
		return st[0]
	}
	counts := map[string]int{}
	for step := range steps {
		op := rng.IntN(100)
		var what string
		switch {
		case op < 50:
			what = "apply"
			batch := gen.batch()
			want := model.apply(batch)
			if n, err := a.Apply("d", batch); err != nil || n != want {
				t.Fatalf("step %d: apply %v: %d %v, want %d", step, batch, n, err, want)
			}
			if _, err := b.Apply("d", batch); err != nil {
				t.Fatal(err)
			}
			applied = append(applied, batch)
		case op < 55 && len(applied) > 0:
			what = "re-apply"
			old := applied[rng.IntN(len(applied))]
			if n, err := a.Apply("d", old); err != nil || n != 0 {
				t.Fatalf("step %d: re-applying an applied batch: %d %v", step, n, err)
			}
			// Half old, half new: only the new records count.
			batch := append(slices.Clone(applied[len(applied)-1]), gen.batch()...)
			want := model.apply(batch)
			if n, err := a.Apply("d", batch); err != nil || n != want {
				t.Fatalf("step %d: overlapping batch: %d %v, want %d", step, n, err, want)
			}
			b.Apply("d", batch)
			applied = append(applied, batch)
		case op < 60:
			what = "bad input"
			before := stat(a)
			for name, bad := range liveBadBatches(model.last + 1) {
				if _, err := a.Apply("d", bad); !errors.Is(err, format.ErrBadRecord) {
					t.Fatalf("step %d: bad batch %q: %v", step, name, err)
				}
			}
			if _, err := a.Apply("nope", gen.batch()); !errors.Is(err, ErrNoDataset) {
				t.Fatalf("step %d: unknown dataset: %v", step, err)
			}
			gen.seq = model.last // the batch above was not applied
			if after := stat(a); after.WALBytes != before.WALBytes || after.DeltaRecords != before.DeltaRecords || after.Seq != before.Seq {
				t.Fatalf("step %d: refused batches changed the dataset: %+v -> %+v", step, before, after)
			}
		case op < 66:
			// Fold only a prefix of the delta, as a companion rebuilding a
			// server snapshot does; the rest stays pending.
			what = "compact through"
			c0 := stat(a).Manifest.CoversThroughSeq
			upTo := c0 + rng.Uint64N(model.last-c0+1)
			want := c0
			for _, b := range applied {
				for _, r := range b {
					if r.Seq > want && r.Seq <= upTo {
						want = r.Seq
					}
				}
			}
			m, err := a.CompactThrough("d", upTo)
			if err != nil {
				t.Fatalf("step %d: compact through %d: %v", step, upTo, err)
			}
			if m.CoversThroughSeq != want {
				t.Fatalf("step %d: compaction through %d covers %d, want %d", step, upTo, m.CoversThroughSeq, want)
			}
			if _, err := a.CompactThrough("d", c0-min(c0, 1)); c0 > 0 && want > c0 && err == nil {
				t.Fatalf("step %d: compaction below the snapshot in service accepted", step)
			}
		case op < 72:
			what = "compact"
			m, err := a.Compact("d")
			if err != nil {
				t.Fatalf("step %d: compact: %v", step, err)
			}
			if m.CoversThroughSeq != model.last {
				t.Fatalf("step %d: compaction covers %d, last seq %d", step, m.CoversThroughSeq, model.last)
			}
			if st := stat(a); st.DeltaRecords != 0 || st.Manifest.SnapshotID != m.SnapshotID {
				t.Fatalf("step %d: after compaction %+v", step, st)
			}
		case op < 80:
			what = "install"
			// Sometimes of a snapshot that covers only part of what this
			// store has applied: the records above it stay pending.
			upTo := model.last
			if bc := stat(b).Manifest.CoversThroughSeq; rng.IntN(2) == 0 {
				upTo = bc + rng.Uint64N(model.last-bc+1)
			}
			mb, err := b.CompactThrough("d", upTo)
			if err != nil {
				t.Fatal(err)
			}
			cur := stat(a).Manifest
			_, err = a.Install("d", stat(b).Dir)
			switch {
			case mb.CoversThroughSeq < cur.CoversThroughSeq:
				if err == nil || !strings.Contains(err.Error(), "older") {
					t.Fatalf("step %d: installing an older snapshot: %v", step, err)
				}
			case err != nil:
				t.Fatalf("step %d: install: %v", step, err)
			default:
				if st := stat(a); st.Manifest.SnapshotID != mb.SnapshotID {
					t.Fatalf("step %d: installed %s, serving %s", step, mb.SnapshotID, st.Manifest.SnapshotID)
				}
			}
		case op < 85:
			what = "compact both"
			ma, err := a.Compact("d")
			if err != nil {
				t.Fatal(err)
			}
			mb, err := b.Compact("d")
			if err != nil {
				t.Fatal(err)
			}
			// Different histories of compactions and installs, same
			// records: the same snapshot, byte for byte.
			if ma.SnapshotID != mb.SnapshotID {
				t.Fatalf("step %d: same records, different snapshots %s %s", step, ma.SnapshotID, mb.SnapshotID)
			}
			for _, f := range []string{format.DataFile, format.IndexFile, format.HashFile} {
				x, _ := os.ReadFile(filepath.Join(stat(a).Dir, f))
				y, _ := os.ReadFile(filepath.Join(stat(b).Dir, f))
				if !bytes.Equal(x, y) || len(x) == 0 {
					t.Fatalf("step %d: %s differs", step, f)
				}
			}
			if _, err := format.Verify(stat(a).Dir); err != nil {
				t.Fatalf("step %d: verify: %v", step, err)
			}
		case op < 92:
			what = "reopen"
			a.Close()
			a = liveOpen(t, homeA, opts)
			if rng.IntN(3) == 0 {
				b.Close()
				b = liveOpen(t, homeB, opts)
			}
		default:
			what = "apply"
			batch := gen.batch()
			model.apply(batch)
			a.Apply("d", batch)
			b.Apply("d", batch)
			applied = append(applied, batch)
		}
		counts[what]++
		if err := liveCheck(a, model, rng); err != nil {
			t.Fatalf("step %d (%s): %v", step, what, err)
		}
		if step%10 == 0 {
			if err := liveCheck(b, model, nil); err != nil {
				t.Fatalf("step %d (%s), second store: %v", step, what, err)
			}
		}
	}
	// Retention: Keep snapshots at most, none of them temporary.
	ents, _ := os.ReadDir(filepath.Join(homeA, DatasetsDir, "d", format.SnapshotsDir))
	if len(ents) > opts.Keep {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("%d snapshots on disk with Keep %d: %v", len(ents), opts.Keep, names)
	}
	t.Logf("steps: %v; %d series", counts, len(model.series))
}
