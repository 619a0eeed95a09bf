package localcache

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// The generation scheme of the swap tests: liveGenSeries series of
// liveGenPeriods daily points, all rewritten by every batch ("generation"
// g) with value liveGenValue(s, p, g), at an intraday time that revises
// the day; point liveGenPeriods (the extra one) is present in even
// generations and deleted in odd ones; each series' name is "g<g>". Any
// read of one series must see exactly one generation, whole.
const (
	liveGenSeries  = 8
	liveGenPeriods = 20
	liveGenRecords = liveGenSeries * (liveGenPeriods + 1) // per batch
)

func liveGenValue(s, p int, g uint64) float64 { return float64(g)*1000 + float64(s)*32 + float64(p) }

func liveGenPeriod(p int) int64 { return liveDay("2026-01-01") + int64(p)*86400 }

func liveGenID(s int) string { return fmt.Sprintf("S%d", s) }

// liveGenBase is generation 0, as a snapshot.
func liveGenBase() *format.Table {
	tb := &format.Table{}
	for s := range liveGenSeries {
		tb.Series = append(tb.Series, format.SeriesMeta{ID: liveGenID(s), Name: "g0", Frequency: format.Daily})
		for p := 0; p <= liveGenPeriods; p++ {
			tb.Append(uint32(s), liveGenPeriod(p), liveGenValue(s, p, 0))
		}
	}
	return tb
}

// liveGenBatch is generation g >= 1; its seqs are (g-1)*liveGenRecords+1
// through g*liveGenRecords.
func liveGenBatch(g uint64) []format.Record {
	out := make([]format.Record, 0, liveGenRecords)
	seq := (g - 1) * liveGenRecords
	for s := range liveGenSeries {
		for p := 0; p <= liveGenPeriods; p++ {
			seq++
			r := format.Record{Seq: seq, Op: format.Upsert, SeriesID: liveGenID(s), Period: liveGenPeriod(p) + int64(g*3607%86400), Value: liveGenValue(s, p, g)}
			if p == 0 {
				r.Meta = &format.RecordMeta{Name: fmt.Sprint("g", g), Frequency: format.Daily}
			}
			if p == liveGenPeriods && g%2 == 1 {
				r.Op = format.Delete
			}
			out = append(out, r)
		}
	}
	return out
}

// liveGenCheck reads series s in full (and a sub-range, and its Info) and
// returns the generation it saw, or an error if the read mixes
// generations or is not whole.
func liveGenCheck(st *Store, s int, rng *rand.Rand) (uint64, error) {
	id := liveGenID(s)
	res, err := st.Get(id, snapshot.MinTime, snapshot.MaxTime)
	if err != nil {
		return 0, err
	}
	defer res.Release()
	pts := res.Points
	if pts.Len() < liveGenPeriods {
		return 0, fmt.Errorf("%s: %d points", id, pts.Len())
	}
	g := uint64(pts.Values[0]) / 1000
	want := liveGenPeriods
	if g%2 == 0 {
		want++
	}
	if pts.Len() != want {
		return g, fmt.Errorf("%s: generation %d with %d points, want %d", id, g, pts.Len(), want)
	}
	for p := range want {
		if pts.Unix(p) != liveGenPeriod(p) || pts.Values[p] != liveGenValue(s, p, g) {
			return g, fmt.Errorf("%s: point %d is (%d, %v), generation %d wants (%d, %v)", id, p, pts.Unix(p), pts.Values[p], g, liveGenPeriod(p), liveGenValue(s, p, g))
		}
	}
	// A sub-range, which may cut through the extra point.
	a := rng.IntN(liveGenPeriods + 1)
	b := a + rng.IntN(liveGenPeriods+1-a)
	sub, err := st.Get(id, liveGenPeriod(a)-int64(rng.IntN(86400)), liveGenPeriod(b)+int64(rng.IntN(86400)))
	if err != nil {
		return g, err
	}
	defer sub.Release()
	if sub.Points.Len() > 0 {
		sg := uint64(sub.Points.Values[0]) / 1000
		if sg < g {
			return g, fmt.Errorf("%s: a later read saw generation %d after %d", id, sg, g)
		}
		hi := b
		if b == liveGenPeriods && sg%2 == 1 {
			hi = b - 1
		}
		if sub.Points.Len() != hi-a+1 {
			return g, fmt.Errorf("%s: range %d..%d of generation %d has %d points", id, a, b, sg, sub.Points.Len())
		}
		for i := range sub.Points.Len() {
			if sub.Points.Unix(i) != liveGenPeriod(a+i) || sub.Points.Values[i] != liveGenValue(s, a+i, sg) {
				return g, fmt.Errorf("%s: range %d..%d point %d: (%d, %v), generation %d", id, a, b, i, sub.Points.Unix(i), sub.Points.Values[i], sg)
			}
		}
	}
	in, err := st.Info(id)
	if err != nil {
		return g, err
	}
	ig := uint64(in.LatestValue) / 1000
	last := liveGenPeriods - 1
	if ig%2 == 0 {
		last++
	}
	if in.Name != fmt.Sprint("g", ig) || in.Count != last+1 || in.Last != liveGenPeriod(last) || in.LatestValue != liveGenValue(s, last, ig) || in.First != liveGenPeriod(0) {
		return g, fmt.Errorf("%s: info of two generations or half of one: name %q count %d first %d last %d latest %v", id, in.Name, in.Count, in.First, in.Last, in.LatestValue)
	}
	return g, nil
}

// TestLiveSwapUnderLoad: readers hammer the store while it applies,
// compacts, installs and swaps; no read may fail, mix two generations, or
// go back in time, and every replaced snapshot must be released.
func TestLiveSwapUnderLoad(t *testing.T) {
	swaps := 100
	if liveRace() || testing.Short() {
		swaps = 30
	}
	if liveLong() {
		swaps = 1000
	}
	seed := liveSeed(t)
	home, other := liveTempDir(t), liveTempDir(t)
	liveCook(t, home, "d", liveGenBase(), format.WriteOptions{Epoch: 1})
	liveCook(t, other, "d", liveGenBase(), format.WriteOptions{Epoch: 1})
	opts := &Options{CompactRows: -1, CompactBytes: -1}
	s := liveOpen(t, home, opts)
	defer s.Close()
	s2 := liveOpen(t, other, opts)
	defer s2.Close()
	d, err := s.Dataset("d")
	if err != nil {
		t.Fatal(err)
	}

	var stop atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for r := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(r)))
			seen := make([]uint64, liveGenSeries)
			for !stop.Load() {
				sr := rng.IntN(liveGenSeries)
				g, err := liveGenCheck(s, sr, rng)
				if err == nil && g < seen[sr] {
					err = fmt.Errorf("%s went back from generation %d to %d", liveGenID(sr), seen[sr], g)
				}
				if err != nil {
					errs <- err
					return
				}
				seen[sr] = g
				reads.Add(1)
				// Let the writer run on small machines: the point is reads
				// during swaps, not starving the swaps.
				time.Sleep(20 * time.Microsecond)
			}
		})
	}
	// A reader of everything else the store serves.
	wg.Go(func() {
		for !stop.Load() {
			if hits, err := s.Search("S", 20); err != nil || len(hits) != liveGenSeries {
				errs <- fmt.Errorf("search: %d hits, %v", len(hits), err)
				return
			}
			if _, err := s.Status(); err != nil {
				errs <- err
				return
			}
			time.Sleep(time.Millisecond)
		}
	})

	rng := rand.New(rand.NewPCG(seed, 99))
	var replaced []*snapshot.Snapshot
	g := uint64(0)
	start := time.Now()
	for i := 0; i < swaps && len(errs) == 0; i++ {
		for range 1 + rng.IntN(3) {
			g++
			b := liveGenBatch(g)
			if n, err := s.Apply("d", b); err != nil || n != len(b) {
				t.Fatalf("apply generation %d: %d %v", g, n, err)
			}
			if _, err := s2.Apply("d", b); err != nil {
				t.Fatal(err)
			}
		}
		old := d.cur.Load().snap
		if i%5 == 4 {
			if _, err := s2.Compact("d"); err != nil {
				t.Fatal(err)
			}
			st, _ := s2.Status()
			if _, err := s.Install("d", st[0].Dir); err != nil {
				t.Fatalf("install %d: %v", i, err)
			}
		} else {
			// Applies keep flowing while the snapshot is written.
			var cwg sync.WaitGroup
			var cerr error
			cwg.Go(func() { _, cerr = s.Compact("d") })
			if rng.IntN(2) == 0 {
				g++
				if _, err := s.Apply("d", liveGenBatch(g)); err != nil {
					t.Fatal(err)
				}
				s2.Apply("d", liveGenBatch(g))
			}
			cwg.Wait()
			if cerr != nil {
				t.Fatalf("compact %d: %v", i, cerr)
			}
		}
		if cur := d.cur.Load().snap; cur != old {
			replaced = append(replaced, old)
		}
	}
	elapsed := time.Since(start)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	if reads.Load() < int64(swaps) {
		t.Errorf("only %d reads during %d swaps", reads.Load(), swaps)
	}
	t.Logf("%d generations, %d swaps, %d reads in %v", g, len(replaced), reads.Load(), elapsed)
	if len(replaced) < swaps*9/10 {
		t.Errorf("only %d of %d compactions swapped", len(replaced), swaps)
	}
	for _, old := range replaced {
		if n := old.Refs(); n != 0 {
			t.Errorf("replaced snapshot %s still has %d references", old.ID(), n)
		}
	}
	if seq, _ := s.LastSeq("d"); seq != g*liveGenRecords {
		t.Errorf("last seq %d, want %d", seq, g*liveGenRecords)
	}
	// Retention: the default keeps 2 snapshots.
	if ents, _ := os.ReadDir(filepath.Join(home, DatasetsDir, "d", format.SnapshotsDir)); len(ents) != 2 {
		t.Errorf("%d snapshot directories, want 2", len(ents))
	}
	s.Close()
	s = liveOpen(t, home, nil)
	for sr := range liveGenSeries {
		if got, err := liveGenCheck(s, sr, rng); err != nil || got != g {
			t.Errorf("after reopen: generation %d, want %d: %v", got, g, err)
		}
	}
}

func liveSnapDirs(t *testing.T, home string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(home, DatasetsDir, "d", format.SnapshotsDir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestLiveRetention: Options.Keep snapshots stay on disk, the one in
// service included; a replaced snapshot stays mapped (and on disk, when
// beyond Keep) until its last reader lets go; the log keeps nothing the
// snapshot covers.
func TestLiveRetention(t *testing.T) {
	for _, keep := range []int{1, 2, 3} {
		t.Run(fmt.Sprint("keep ", keep), func(t *testing.T) {
			home, other := liveTempDir(t), liveTempDir(t)
			liveCook(t, home, "d", liveGenBase(), format.WriteOptions{Epoch: 1})
			liveCook(t, other, "d", liveGenBase(), format.WriteOptions{Epoch: 1})
			s := liveOpen(t, home, &Options{Keep: keep, CompactRows: -1, CompactBytes: -1})
			defer s.Close()
			s2 := liveOpen(t, other, nil)
			defer s2.Close()
			// A download in progress is not a snapshot to retire.
			staging := s.stagingDir("d", "e1-s99999-000000000000")
			if err := os.MkdirAll(staging, 0o755); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(staging, format.DataFile), []byte("partial"), 0o644)
			for g := uint64(1); g <= 6; g++ {
				if _, err := s.Apply("d", liveGenBatch(g)); err != nil {
					t.Fatal(err)
				}
				s2.Apply("d", liveGenBatch(g))
				if g%2 == 0 {
					if _, err := s.Compact("d"); err != nil {
						t.Fatal(err)
					}
				} else {
					s2.Compact("d")
					st2, _ := s2.Status()
					if _, err := s.Install("d", st2[0].Dir); err != nil {
						t.Fatal(err)
					}
				}
				if n := len(liveSnapDirs(t, home)) - 1; n != min(keep, int(g)+1) {
					t.Fatalf("after %d compactions and installs: %d snapshots on disk %v, want %d", g, n, liveSnapDirs(t, home), min(keep, int(g)+1))
				}
			}
			if _, err := os.Stat(filepath.Join(staging, format.DataFile)); err != nil {
				t.Fatalf("retention deleted a download in progress: %v", err)
			}
			os.RemoveAll(staging)
			st, _ := s.Status()
			if ents, _ := os.ReadDir(filepath.Join(home, DatasetsDir, "d", WALDir)); len(ents) != 1 || st[0].WALBytes != 8 || st[0].DeltaRecords != 0 {
				t.Fatalf("log after compaction: %d segments, %d bytes, %d records", len(ents), st[0].WALBytes, st[0].DeltaRecords)
			}

			// A reader holds points of the snapshot in service (a slice of
			// its mapping) across two compactions.
			d, _ := s.Dataset("d")
			held, err := s.Get("S3", snapshot.MinTime, snapshot.MaxTime)
			if err != nil {
				t.Fatal(err)
			}
			heldSnap := d.cur.Load().snap
			heldDir := heldSnap.Dir
			for g := uint64(7); g <= 8; g++ {
				s.Apply("d", liveGenBatch(g))
				if _, err := s.Compact("d"); err != nil {
					t.Fatal(err)
				}
			}
			if heldSnap.Refs() != 1 {
				t.Fatalf("held snapshot has %d references, want the reader's 1", heldSnap.Refs())
			}
			if _, err := os.Stat(heldDir); err != nil {
				t.Fatalf("snapshot deleted while a reader holds it: %v", err)
			}
			for p := range held.Points.Len() {
				if held.Points.Values[p] != liveGenValue(3, p, 6) {
					t.Fatalf("held points changed: %v", held.Points.Values)
				}
			}
			held.Release()
			if heldSnap.Refs() != 0 {
				t.Fatalf("released snapshot has %d references", heldSnap.Refs())
			}
			// It is the third newest now.
			if _, err := os.Stat(heldDir); (err == nil) != (keep >= 3) {
				t.Fatalf("Keep %d: the third newest snapshot on disk: %v (%v)", keep, err == nil, liveSnapDirs(t, home))
			}
			if n := len(liveSnapDirs(t, home)); n != keep {
				t.Fatalf("%d snapshots on disk %v, want %d", n, liveSnapDirs(t, home), keep)
			}
		})
	}
}

func liveCopyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(liveTempDir(t), filepath.Base(src))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// liveFingerprint is what a store serves of dataset "d", to compare
// before and after something that must change nothing.
func liveFingerprint(t *testing.T, s *Store) string {
	t.Helper()
	var b strings.Builder
	st, err := s.Status()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(&b, st[0].Manifest.SnapshotID, st[0].Seq, st[0].DeltaRecords)
	for sr := range liveGenSeries {
		p, v, err := s.Copy(liveGenID(sr), snapshot.MinTime, snapshot.MaxTime)
		if err != nil {
			t.Fatal(err)
		}
		in, _ := s.Info(liveGenID(sr))
		fmt.Fprintln(&b, p, v, in.Name, in.Count)
	}
	return b.String()
}

// TestLiveInstallRefused: a snapshot with a flipped byte, a truncated or
// missing file, of another dataset, or older than the one in service is
// refused; the store keeps serving what it served and leaves nothing
// behind.
func TestLiveInstallRefused(t *testing.T) {
	home, src := liveTempDir(t), liveTempDir(t)
	liveCook(t, home, "d", liveGenBase(), format.WriteOptions{Epoch: 1})
	liveCook(t, src, "d", liveGenBase(), format.WriteOptions{Epoch: 1})
	s := liveOpen(t, home, nil)
	defer s.Close()
	s2 := liveOpen(t, src, nil)
	defer s2.Close()
	for g := uint64(1); g <= 3; g++ {
		s2.Apply("d", liveGenBatch(g))
	}
	s2.Compact("d")
	st2, _ := s2.Status()
	good := liveCopyDir(t, st2[0].Dir)

	// The store has compacted past generation 1 and has generation 2 and 3
	// pending on top.
	older := liveTempDir(t)
	liveCook(t, older, "d", liveGenBase(), format.WriteOptions{Epoch: 1})
	so := liveOpen(t, older, nil)
	so.Apply("d", liveGenBatch(1))
	mo, _ := so.Compact("d")
	sto, _ := so.Status()
	olderDir := liveCopyDir(t, sto[0].Dir)
	so.Close()
	oldEpoch := liveTempDir(t)
	liveCook(t, oldEpoch, "d", liveGenBase(), format.WriteOptions{Epoch: 0, CoversThroughSeq: 1000})
	otherDS := liveTempDir(t)
	liveCook(t, otherDS, "e", liveGenBase(), format.WriteOptions{Epoch: 1, CoversThroughSeq: 5000})

	s.Apply("d", liveGenBatch(1))
	s.Apply("d", liveGenBatch(2))
	if m, err := s.Compact("d"); err != nil || m.CoversThroughSeq <= mo.CoversThroughSeq {
		t.Fatalf("compact: %v", err)
	}
	s.Apply("d", liveGenBatch(3))

	m, err := format.ReadManifest(good)
	if err != nil {
		t.Fatal(err)
	}
	variant := func(edit func(dir string)) string {
		dir := liveCopyDir(t, good)
		edit(dir)
		return dir
	}
	editManifest := func(f func(*format.Manifest)) func(string) {
		return func(dir string) {
			c := *m
			c.Files = slices.Clone(m.Files)
			f(&c)
			b, err := json.MarshalIndent(&c, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, format.ManifestFile), b, 0o644)
		}
	}
	cases := map[string]string{
		"missing directory": filepath.Join(liveTempDir(t), "nope"),
		"empty directory":   liveTempDir(t),
		"older snapshot":    olderDir,
		"older epoch":       liveCopyDir(t, filepath.Join(oldEpoch, DatasetsDir, "d", format.SnapshotsDir, liveCurrent(t, oldEpoch, "d"))),
		"other dataset":     liveCopyDir(t, filepath.Join(otherDS, DatasetsDir, "e", format.SnapshotsDir, liveCurrent(t, otherDS, "e"))),
		"truncated data":    variant(func(dir string) { liveTruncate(t, filepath.Join(dir, format.DataFile), -1) }),
		"grown data":        variant(func(dir string) { liveTruncate(t, filepath.Join(dir, format.DataFile), +1) }),
		"empty index":       variant(func(dir string) { os.WriteFile(filepath.Join(dir, format.IndexFile), nil, 0o644) }),
		"missing hash":      variant(func(dir string) { os.Remove(filepath.Join(dir, format.HashFile)) }),
		"missing manifest":  variant(func(dir string) { os.Remove(filepath.Join(dir, format.ManifestFile)) }),
		"torn manifest":     variant(func(dir string) { liveTruncate(t, filepath.Join(dir, format.ManifestFile), -10) }),
		"manifest covers more": variant(editManifest(func(c *format.Manifest) {
			c.CoversThroughSeq += 1000
		})),
		"manifest of a later epoch": variant(editManifest(func(c *format.Manifest) { c.Epoch++ })),
		"manifest hash edited": variant(editManifest(func(c *format.Manifest) {
			c.Files[0].SHA256 = strings.Repeat("0", 64)
		})),
	}
	for _, f := range []string{format.DataFile, format.IndexFile, format.HashFile} {
		st, _ := os.Stat(filepath.Join(good, f))
		for _, off := range []int64{0, 7, st.Size() / 3, st.Size() / 2, st.Size() - 1} {
			cases[fmt.Sprintf("%s byte %d flipped", f, off)] = variant(func(dir string) { flipByte(t, filepath.Join(dir, f), off) })
		}
	}
	want := liveFingerprint(t, s)
	dirs := liveSnapDirs(t, home)
	for name, dir := range cases {
		if m, err := s.Install("d", dir); err == nil {
			t.Errorf("%s: installed %s", name, m.SnapshotID)
			continue
		}
		if got := liveFingerprint(t, s); got != want {
			t.Fatalf("%s: refused install changed what is served:\n%s\n%s", name, want, got)
		}
		if got := liveSnapDirs(t, home); !slices.Equal(got, dirs) {
			t.Fatalf("%s: refused install left %v (had %v)", name, got, dirs)
		}
	}
	// The good one installs (it covers generation 3, which was pending)
	// and survives a reopen.
	if _, err := s.Install("d", good); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for sr := range liveGenSeries {
		if g, err := liveGenCheck(s, sr, rng); err != nil || g != 3 {
			t.Fatalf("after install: generation %d %v", g, err)
		}
	}
	want = liveFingerprint(t, s)
	if st, _ := s.Status(); st[0].Manifest.SnapshotID != m.SnapshotID || st[0].DeltaRecords != 0 {
		t.Fatalf("after install: %+v", st[0])
	}
	s.Close()
	s = liveOpen(t, home, nil)
	if got := liveFingerprint(t, s); got != want {
		t.Fatalf("after install and reopen:\n%s\n%s", want, got)
	}
}

func liveCurrent(t *testing.T, home, ds string) string {
	t.Helper()
	id, err := format.ReadCurrent(filepath.Join(home, DatasetsDir, ds))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func liveTruncate(t *testing.T, path string, by int64) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()+by); err != nil {
		t.Fatal(err)
	}
}

// TestLiveReadOnlyReader: a read-only store opened while the writer
// applies and compacts sees, on open, the writer's latest acknowledged
// state: a whole generation, never older than what was acknowledged
// before the open began.
func TestLiveReadOnlyReader(t *testing.T) {
	home := liveTempDir(t)
	liveCook(t, home, "d", liveGenBase(), format.WriteOptions{Epoch: 1})
	w := liveOpen(t, home, &Options{CompactRows: -1, CompactBytes: -1})
	defer w.Close()
	var acked atomic.Uint64
	var stop atomic.Bool
	werr := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		for g := uint64(1); !stop.Load(); g++ {
			if _, err := w.Apply("d", liveGenBatch(g)); err != nil {
				werr <- err
				return
			}
			acked.Store(g)
			if g%4 == 0 {
				if _, err := w.Compact("d"); err != nil {
					werr <- err
					return
				}
			}
		}
	})
	rng := rand.New(rand.NewPCG(2, 2))
	opens := 40
	if liveRace() {
		opens = 15
	}
	for i := 0; i < opens && len(werr) == 0; i++ {
		before := acked.Load()
		r, err := Open(home, &Options{ReadOnly: true})
		if err != nil {
			t.Errorf("read-only open %d: %v", i, err)
			continue
		}
		seq, _ := r.LastSeq("d")
		g := seq / liveGenRecords
		if seq%liveGenRecords != 0 || g < before {
			t.Errorf("read-only open %d: last seq %d (generation %d), acknowledged before the open: generation %d", i, seq, g, before)
		}
		for sr := range liveGenSeries {
			if sg, err := liveGenCheck(r, sr, rng); err != nil || sg != g {
				t.Errorf("read-only open %d: %s at generation %d, last seq says %d: %v", i, liveGenID(sr), sg, g, err)
			}
		}
		if _, err := r.Apply("d", liveGenBatch(g+1)); !errors.Is(err, ErrReadOnly) {
			t.Errorf("read-only apply: %v", err)
		}
		if _, err := r.Compact("d"); !errors.Is(err, ErrReadOnly) {
			t.Errorf("read-only compact: %v", err)
		}
		r.Close()
		time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	close(werr)
	for err := range werr {
		t.Fatal(err)
	}
	t.Logf("writer reached generation %d", acked.Load())
}

// TestLiveSweepTemp: unfinished snapshots and CURRENT.tmp left by a crash
// are removed when a writer opens the home (with a warning), never by a
// read-only open.
func TestLiveSweepTemp(t *testing.T) {
	home := liveTempDir(t)
	liveCook(t, home, "d", liveGenBase(), format.WriteOptions{Epoch: 1})
	dsDir := filepath.Join(home, DatasetsDir, "d")
	tmp := filepath.Join(dsDir, format.SnapshotsDir, format.TempPrefix+"crashed")
	os.MkdirAll(tmp, 0o755)
	os.WriteFile(filepath.Join(tmp, format.DataFile), []byte("half"), 0o644)
	os.WriteFile(filepath.Join(dsDir, format.CurrentFile+".tmp"), []byte("e1-s0-"), 0o644)
	r := liveOpen(t, home, &Options{ReadOnly: true})
	r.Close()
	if _, err := os.Stat(tmp); err != nil {
		t.Fatal("a read-only open swept")
	}
	log, buf := liveLogger()
	s := liveOpen(t, home, &Options{Logger: log})
	defer s.Close()
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatal("temporary snapshot not swept")
	}
	if _, err := os.Stat(filepath.Join(dsDir, format.CurrentFile+".tmp")); !os.IsNotExist(err) {
		t.Fatal("CURRENT.tmp not swept")
	}
	if !strings.Contains(buf.String(), "level=WARN") {
		t.Fatalf("no warning: %q", buf.String())
	}
	if err := liveCheck(s, liveModelOf(liveGenBase()), nil); err != nil {
		t.Fatal(err)
	}
}

// TestLiveAutoCompact: the delta is compacted in the background once it
// holds Options.CompactRows rows or CompactBytes bytes, and never with
// both triggers off.
func TestLiveAutoCompact(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want bool
	}{
		{"rows", Options{CompactRows: liveGenRecords / 2, CompactBytes: -1}, true},
		{"bytes", Options{CompactRows: -1, CompactBytes: 2000}, true},
		{"off", Options{CompactRows: -1, CompactBytes: -1}, false},
		{"defaults", Options{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := liveTempDir(t)
			liveCook(t, home, "d", liveGenBase(), format.WriteOptions{Epoch: 1})
			log, buf := liveLogger()
			tc.o.Logger = log
			s := liveOpen(t, home, &tc.o)
			defer s.Close()
			model := liveModelOf(liveGenBase())
			for g := uint64(1); g <= 3; g++ {
				b := liveGenBatch(g)
				model.apply(b)
				if _, err := s.Apply("d", b); err != nil {
					t.Fatal(err)
				}
			}
			deadline := time.Now().Add(10 * time.Second)
			var st []DatasetStatus
			for {
				st, _ = s.Status()
				if st[0].Manifest.CoversThroughSeq > 0 || time.Now().After(deadline) || !tc.want {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			if !tc.want {
				time.Sleep(50 * time.Millisecond)
				st, _ = s.Status()
			}
			if compacted := st[0].Manifest.CoversThroughSeq > 0; compacted != tc.want {
				t.Fatalf("compacted %v, want %v (log: %s)", compacted, tc.want, buf.String())
			}
			if err := liveCheck(s, model, nil); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(buf.String(), "level=ERROR") {
				t.Fatalf("errors logged: %s", buf.String())
			}
		})
	}
}

// TestLiveApplyEdges: seqs at or below the last applied one are skipped
// (a batch straddling it applies its tail), a batch may create a series
// with metadata and delete points, and Apply to a closed store fails.
func TestLiveApplyEdges(t *testing.T) {
	home := liveTempDir(t)
	base := liveGenBase()
	liveCook(t, home, "d", base, format.WriteOptions{Epoch: 1, CoversThroughSeq: 10})
	s := liveOpen(t, home, nil)
	model := liveModelOf(base)
	model.last = 10
	if seq, _ := s.LastSeq("d"); seq != 10 {
		t.Fatalf("last seq %d, want the snapshot's 10", seq)
	}
	mk := func(seqs ...uint64) []format.Record {
		var out []format.Record
		for _, q := range seqs {
			out = append(out, format.Record{Seq: q, Op: format.Upsert, SeriesID: "S1", Period: liveGenPeriod(int(q % 30)), Value: float64(q)})
		}
		return out
	}
	for _, tc := range []struct {
		batch []format.Record
		want  int
	}{
		{mk(3, 9, 10), 0},
		{mk(8, 11, 12), 2},
		{mk(12), 0},
		{mk(13, 20, 21), 3},
		{[]format.Record{
			{Seq: 22, Op: format.Upsert, SeriesID: "new", Period: liveDay("2026-05-17"), Value: 1, Meta: &format.RecordMeta{Name: "New", Unit: "t", Source: "x", Frequency: "monthly"}},
			{Seq: 23, Op: format.Delete, SeriesID: "S2", Period: liveGenPeriod(4) + 3600},
			{Seq: 24, Op: format.Delete, SeriesID: "S2", Period: liveGenPeriod(40)}, // nothing there
			{Seq: 25, Op: format.Delete, SeriesID: "ghost", Period: liveGenPeriod(1)},
		}, 4},
		{nil, 0},
	} {
		if n, err := s.Apply("d", tc.batch); err != nil || n != tc.want {
			t.Fatalf("apply %v: %d %v, want %d", tc.batch, n, err, tc.want)
		}
		model.apply(tc.batch)
	}
	if err := liveCheck(s, model, nil); err != nil {
		t.Fatal(err)
	}
	if in, _ := s.Info("new"); in.Frequency != format.Monthly || in.First != liveDay("2026-05-01") || in.Name != "New" {
		t.Fatalf("new series: %+v", in)
	}
	if in, _ := s.Info("ghost"); in.Count != 0 || !math.IsNaN(in.LatestValue) {
		t.Fatalf("series created by a delete: %+v", in)
	}
	s.Compact("d")
	if err := liveCheck(s, model, nil); err != nil {
		t.Fatalf("after compaction: %v", err)
	}
	s.Close()
	if _, err := s.Apply("d", mk(30)); err == nil {
		t.Fatal("apply to a closed store")
	}
	s = liveOpen(t, home, nil)
	defer s.Close()
	if err := liveCheck(s, model, nil); err != nil {
		t.Fatalf("after reopen: %v", err)
	}
}

// TestLiveOpenCorruptSnapshot: a snapshot in service whose files are
// damaged makes Open fail with an error (never a panic, never served
// half-checked).
func TestLiveOpenCorruptSnapshot(t *testing.T) {
	for _, tc := range []struct {
		file   string
		damage func(t *testing.T, path string)
	}{
		{format.DataFile, func(t *testing.T, p string) { liveTruncate(t, p, -3) }},
		{format.IndexFile, func(t *testing.T, p string) { liveTruncate(t, p, 1) }},
		{format.HashFile, func(t *testing.T, p string) { os.Remove(p) }},
		// Same sizes, so only the structure checks of snapshot.Open (after
		// the manifest's) can catch these.
		{format.DataFile, func(t *testing.T, p string) { liveFlipLast(t, p) }},
		{format.IndexFile, func(t *testing.T, p string) { liveFlipLast(t, p) }},
		{format.HashFile, func(t *testing.T, p string) { flipByte(t, p, 0) }},
	} {
		t.Run(tc.file, func(t *testing.T) {
			home := liveTempDir(t)
			m := liveCook(t, home, "d", liveGenBase(), format.WriteOptions{Epoch: 1})
			tc.damage(t, filepath.Join(home, DatasetsDir, "d", format.SnapshotsDir, m.SnapshotID, tc.file))
			var s *Store
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("Open panicked instead of returning an error: %v", p)
					}
				}()
				s, err = Open(home, nil)
			}()
			if err != nil {
				t.Fatalf("one damaged dataset failed Open: %v", err)
			}
			defer s.Close()
			var de *DamageError
			if err := s.Damaged("d"); !errors.As(err, &de) || !errors.Is(err, ErrDamaged) {
				t.Fatalf("Damaged(d) = %v, want a *DamageError", err)
			}
			if _, err := s.Get("d:"+liveGenID(0), snapshot.MinTime, snapshot.MaxTime); !errors.Is(err, ErrDamaged) {
				t.Fatalf("a lookup in the damaged dataset: %v, want ErrDamaged", err)
			}
		})
	}
}

// liveFlipLast flips the last byte of a file (an Arrow file's closing
// magic, which Open checks; it does not hash the files).
func liveFlipLast(t *testing.T, path string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	flipByte(t, path, st.Size()-1)
}

// TestLiveInstallNewEpoch: a snapshot of a later epoch (the server
// replaced the dataset) replaces everything, pending records included,
// and the store goes on from there.
func TestLiveInstallNewEpoch(t *testing.T) {
	home, src := liveTempDir(t), liveTempDir(t)
	liveCook(t, home, "d", liveGenBase(), format.WriteOptions{Epoch: 1})
	s := liveOpen(t, home, nil)
	defer func() { s.Close() }()
	s.Apply("d", liveGenBatch(1))
	s.Compact("d")
	s.Apply("d", liveGenBatch(2))
	repl := &format.Table{Series: []format.SeriesMeta{
		{ID: "R", Name: "replacement", Frequency: format.Monthly},
		{ID: "S0", Name: "s0 again", Frequency: format.Daily},
	}}
	repl.Append(0, liveDay("2020-01-01"), 1)
	repl.Append(1, liveDay("2020-01-01"), 2)
	m := liveCook(t, src, "d", repl, format.WriteOptions{Epoch: 2, CoversThroughSeq: 2 * liveGenRecords})
	if _, err := s.Install("d", filepath.Join(src, DatasetsDir, "d", format.SnapshotsDir, m.SnapshotID)); err != nil {
		t.Fatal(err)
	}
	model := liveModelOf(repl)
	model.last = 2 * liveGenRecords
	check := func(what string) {
		t.Helper()
		if err := liveCheck(s, model, nil); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if _, err := s.Get("S1", snapshot.MinTime, snapshot.MaxTime); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: a series of the old epoch is still served: %v", what, err)
		}
	}
	check("after install")
	if st, _ := s.Status(); st[0].DeltaRecords != 0 || st[0].Manifest.Epoch != 2 {
		t.Fatalf("after install: %+v", st[0])
	}
	b := liveGenBatch(3)[:liveGenPeriods+1] // S0 only
	model.apply(b)
	if n, err := s.Apply("d", b); err != nil || n != len(b) {
		t.Fatalf("apply after install: %d %v", n, err)
	}
	check("after apply")
	s.Close()
	s = liveOpen(t, home, nil)
	check("after reopen")
	if _, err := s.Compact("d"); err != nil {
		t.Fatal(err)
	}
	check("after compaction")
}
