package snapshot

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/energyscope/energyscope/internal/synth"
	"github.com/energyscope/energyscope/localcache/format"
)

// genTable is the synthetic EIA-style set of internal/synth as a table:
// ns series and rows rows from seed (plus hourly series when intraday),
// with synth's frequency mix, heavy-tailed lengths, stale series and
// two-decimal values. The callers' options are constants, so an error is
// a bug in the test: it panics.
func genTable(seed uint64, ns int, rows int64, intraday bool) *format.Table {
	tb := &format.Table{}
	o := synth.Options{Series: ns, Rows: rows, Seed: seed, Intraday: intraday}
	_, err := synth.Each(o, func(s synth.SeriesSpec, periods []int64, values []float64) error {
		i := uint32(len(tb.Series))
		tb.Series = append(tb.Series, format.SeriesMeta{ID: s.ID, Frequency: format.Frequency(s.Frequency), Unit: s.Unit, Name: s.Name, Source: s.Source})
		for j, p := range periods {
			tb.Append(i, p, values[j])
		}
		return nil
	})
	if err != nil {
		panic(fmt.Sprintf("genTable(%d, %d, %d, %v): %v", seed, ns, rows, intraday, err))
	}
	return tb
}

// longest is the most rows any series of tb has.
func longest(tb *format.Table) int {
	n := make([]int, len(tb.Series))
	for _, s := range tb.SeriesIdx {
		n[s]++
	}
	return slices.Max(n)
}

func cook(t testing.TB, tb *format.Table, rule *format.TailRule) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "snap")
	if _, _, err := format.Write(dir, tb, format.WriteOptions{Dataset: "t", Created: time.Unix(1, 0), BatchRows: 50_000, Tail: rule}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func open(t testing.TB, dir string, o Options) *Snapshot {
	t.Helper()
	s, err := OpenOptions(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func equalPoints(a, b Points) bool {
	if a.Len() != b.Len() {
		return false
	}
	for i := range a.Len() {
		if a.Unix(i) != b.Unix(i) || math.Float64bits(a.Values[i]) != math.Float64bits(b.Values[i]) {
			return false
		}
	}
	return true
}

// randomRange picks a range around a series' bounds: open ends, empty,
// inside, outside, single points, off-bucket bounds.
func randomRange(rng *rand.Rand, in Info) (int64, int64) {
	span := in.Last - in.First + 1
	pick := func() int64 {
		switch rng.IntN(6) {
		case 0:
			return MinTime
		case 1:
			return MaxTime
		case 2:
			return in.First
		case 3:
			return in.Last
		}
		return in.First - span/4 + rng.Int64N(span+span/2+1)
	}
	from, to := pick(), pick()
	if rng.IntN(8) == 0 {
		from, to = to, from
	}
	return from, to
}

// TestColdGetMatchesHot: Get answers the same from either tier, over
// random ranges, for both period types.
func TestColdGetMatchesHot(t *testing.T) {
	for _, intraday := range []bool{false, true} {
		t.Run(fmt.Sprint("intraday=", intraday), func(t *testing.T) {
			tb := genTable(1, 400, 150_000, intraday)
			rule, err := format.ParseTailRule("fraction=0.6")
			if err != nil {
				t.Fatal(err)
			}
			hot := open(t, cook(t, tb, nil), Options{})
			// A small cache, so that reads evict and re-decode.
			mixed := open(t, cook(t, tb, rule), Options{TailCacheBytes: 200_000})
			if mixed.Manifest.HotSeries >= mixed.Manifest.Series || hot.Manifest.HotSeries != hot.Manifest.Series {
				t.Fatalf("hot series: %d/%d and %d/%d", mixed.Manifest.HotSeries, mixed.Manifest.Series, hot.Manifest.HotSeries, hot.Manifest.Series)
			}
			rng := rand.New(rand.NewPCG(2, 2))
			colds := 0
			for range 4000 {
				row := uint32(rng.IntN(hot.NumSeries()))
				in := mixed.Info(row)
				if in.Tier == format.Cold {
					colds++
				}
				from, to := randomRange(rng, in)
				want, err := hot.Get(row, from, to)
				if err != nil {
					t.Fatal(err)
				}
				got, err := mixed.Get(row, from, to)
				if err != nil {
					t.Fatal(err)
				}
				if !equalPoints(got, want) || (got.Secs != nil) != intraday && got.Len() > 0 {
					t.Fatalf("%s (tier %d) [%d, %d]: %d points, want %d", in.ID, in.Tier, from, to, got.Len(), want.Len())
				}
			}
			if colds < 1000 {
				t.Fatalf("only %d cold reads", colds)
			}
			// A block is cut at a series boundary: at most TailBlockRows
			// plus the longest series, 16 bytes a row.
			if _, used := mixed.TailCacheStats(); used > 200_000+int64(format.TailBlockRows+longest(tb))*16 {
				t.Fatalf("cache holds %d bytes", used)
			}
		})
	}
}

// Many readers on a cache of one block: every answer right, under -race.
func TestColdConcurrentReaders(t *testing.T) {
	tb := genTable(3, 300, 100_000, false)
	rule, _ := format.ParseTailRule("fraction=1")
	hot := open(t, cook(t, tb, nil), Options{})
	for _, budget := range []int64{1, -1, 0} {
		cold := open(t, cook(t, tb, rule), Options{TailCacheBytes: budget})
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(g), 9))
				for range 300 {
					row := uint32(rng.IntN(hot.NumSeries()))
					from, to := randomRange(rng, hot.Info(row))
					want, _ := hot.Get(row, from, to)
					got, err := cold.Get(row, from, to)
					if err != nil || !equalPoints(got, want) {
						errs <- fmt.Errorf("row %d: %v, %d points, want %d", row, err, got.Len(), want.Len())
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		blocks, _ := cold.TailCacheStats()
		if budget < 0 && blocks != 0 || budget == 1 && blocks > 1 {
			t.Fatalf("budget %d: %d blocks cached", budget, blocks)
		}
	}
}

// Open does not read tail.parquet: a corrupt one is reported by the cold
// read that needs it, as corruption, and hot reads are unaffected.
func TestColdCorruptTail(t *testing.T) {
	tb := genTable(4, 100, 20_000, false)
	rule, _ := format.ParseTailRule("fraction=0.5")
	dir := cook(t, tb, rule)
	path := filepath.Join(dir, format.TailFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The last 8 bytes are the footer length and the magic: a flip there
	// must be reported; elsewhere it may go unnoticed by the decoder (that
	// is what Verify's SHA-256 is for) but must not crash a reader.
	for _, pos := range []int{len(b) - 1, len(b) - 5, len(b) - 20, len(b) / 3, 10} {
		bad := slices.Clone(b)
		bad[pos] ^= 0xff
		if err := os.WriteFile(path, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir)
		if err != nil {
			t.Fatalf("flip at %d: Open read the tail: %v", pos, err)
		}
		var coldErr error
		for row := uint32(0); row < uint32(s.NumSeries()); row++ {
			_, err := s.Get(row, MinTime, MaxTime)
			if s.Info(row).Tier == format.Hot && err != nil {
				t.Fatalf("hot read failed: %v", err)
			}
			if err != nil && coldErr == nil {
				coldErr = err
			}
		}
		var ce *format.CorruptionError
		if pos >= len(b)-8 && !errors.As(coldErr, &ce) {
			t.Fatalf("flip at %d: cold reads gave %v", pos, coldErr)
		}
		s.Close()
	}
}

// The cold tier's size per row against the hot tier's, on realistic data:
// the issue asks for at most 0.3.
func TestColdTierSize(t *testing.T) {
	for _, intraday := range []bool{false, true} {
		tb := genTable(5, 2000, 400_000, intraday)
		hotDir := cook(t, tb, nil)
		rule, _ := format.ParseTailRule("fraction=1")
		coldDir := cook(t, tb, rule)
		hot, cold := bytesPerRow(t, hotDir, format.DataFile), bytesPerRow(t, coldDir, format.TailFile)
		t.Logf("intraday=%v: hot %.2f B/row, cold %.2f B/row, ratio %.3f", intraday, hot, cold, cold/hot)
		if cold/hot > 0.3 {
			t.Errorf("cold tier %.3fx the hot tier's size per row", cold/hot)
		}
	}
}

func bytesPerRow(t testing.TB, dir, name string) float64 {
	m, err := format.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return float64(m.File(name).Size) / float64(m.Rows)
}

// Benchmarks over one realistic set: 20K series, 4M rows, 60% of the
// series (the least recently updated) cold.
var bench struct {
	once     sync.Once
	root     string
	hotDir   string
	coldDir  string
	coldRows []uint32
	hotRows  []uint32
}

func benchSnap(b *testing.B) {
	bench.once.Do(func() {
		root, err := os.MkdirTemp("", "es-snapshot-bench-")
		if err != nil {
			b.Fatal(err)
		}
		bench.root = root
		tb := genTable(6, 20_000, 4_000_000, false)
		rule, _ := format.ParseTailRule("fraction=0.6")
		bench.hotDir, bench.coldDir = filepath.Join(root, "hot"), filepath.Join(root, "cold")
		if _, _, err := format.Write(bench.hotDir, tb, format.WriteOptions{Dataset: "b"}); err != nil {
			b.Fatal(err)
		}
		if _, _, err := format.Write(bench.coldDir, tb, format.WriteOptions{Dataset: "b", Tail: rule}); err != nil {
			b.Fatal(err)
		}
		s, err := Open(bench.coldDir)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		for r := uint32(0); r < uint32(s.NumSeries()); r++ {
			if in := s.Info(r); in.Count > 0 {
				if in.Tier == format.Cold {
					bench.coldRows = append(bench.coldRows, r)
				} else {
					bench.hotRows = append(bench.hotRows, r)
				}
			}
		}
	})
	if bench.root == "" {
		b.Skip("fixture failed")
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bench.root != "" {
		os.RemoveAll(bench.root)
	}
	os.Exit(code)
}

// oneYear is the query of the benchmarks: the last year of a series.
func oneYear(s *Snapshot, row uint32) (int64, int64) {
	last := s.Info(row).Last
	return last - 365*86400, last
}

// runTimed times f per call and reports the median in µs beside ns/op.
func runTimed(b *testing.B, f func(i int)) {
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st := time.Now()
		f(i)
		ds = append(ds, time.Since(st))
	}
	b.StopTimer()
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds())/1000, "p50-µs")
	b.ReportMetric(float64(ds[len(ds)*99/100].Nanoseconds())/1000, "p99-µs")
}

// BenchmarkColdGetFirstTouch: a cold series whose row group is not cached
// (the cache is dropped before every call; the footer was parsed once).
func BenchmarkColdGetFirstTouch(b *testing.B) {
	benchSnap(b)
	s := open(b, bench.coldDir, Options{})
	rng := rand.New(rand.NewPCG(7, 7))
	rows := make([]uint32, 1024)
	for i := range rows {
		rows[i] = bench.coldRows[rng.IntN(len(bench.coldRows))]
	}
	if _, err := s.Get(rows[0], MinTime, MaxTime); err != nil { // parse the footer
		b.Fatal(err)
	}
	ds := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		s.DropTailCache()
		row := rows[i%len(rows)]
		from, to := oneYear(s, row)
		st := time.Now()
		p, err := s.Get(row, from, to)
		ds = append(ds, time.Since(st))
		if err != nil || p.Len() == 0 {
			b.Fatal(err, p.Len())
		}
	}
	b.StopTimer()
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds())/1000, "p50-µs")
	b.ReportMetric(float64(ds[len(ds)*99/100].Nanoseconds())/1000, "p99-µs")
}

// BenchmarkColdGetCached: cold series whose row groups are cached.
func BenchmarkColdGetCached(b *testing.B) {
	benchSnap(b)
	s := open(b, bench.coldDir, Options{TailCacheBytes: 1 << 30})
	rng := rand.New(rand.NewPCG(8, 8))
	rows := make([]uint32, 1024)
	for i := range rows {
		rows[i] = bench.coldRows[rng.IntN(len(bench.coldRows))]
		if _, err := s.Get(rows[i], MinTime, MaxTime); err != nil {
			b.Fatal(err)
		}
	}
	runTimed(b, func(i int) {
		row := rows[i%len(rows)]
		from, to := oneYear(s, row)
		if p, err := s.Get(row, from, to); err != nil || p.Len() == 0 {
			b.Fatal(err)
		}
	})
}

// BenchmarkHotGet is the same query on hot series, for comparison.
func BenchmarkHotGet(b *testing.B) {
	benchSnap(b)
	s := open(b, bench.coldDir, Options{})
	rng := rand.New(rand.NewPCG(9, 9))
	rows := make([]uint32, 1024)
	for i := range rows {
		rows[i] = bench.hotRows[rng.IntN(len(bench.hotRows))]
		s.Get(rows[i], MinTime, MaxTime)
	}
	runTimed(b, func(i int) {
		row := rows[i%len(rows)]
		from, to := oneYear(s, row)
		if p, err := s.Get(row, from, to); err != nil || p.Len() == 0 {
			b.Fatal(err)
		}
	})
}

// BenchmarkColdTierSize reports bytes per row of each tier on the
// benchmark set (the whole set cooked hot, and the cold 60% in
// tail.parquet).
func BenchmarkColdTierSize(b *testing.B) {
	benchSnap(b)
	m, err := format.ReadManifest(bench.coldDir)
	if err != nil {
		b.Fatal(err)
	}
	s := open(b, bench.coldDir, Options{})
	var coldRows int64
	for _, r := range bench.coldRows {
		coldRows += int64(s.Info(r).Count)
	}
	for i := 0; i < b.N; i++ {
	}
	hot := bytesPerRow(b, bench.hotDir, format.DataFile)
	cold := float64(m.File(format.TailFile).Size) / float64(coldRows)
	b.ReportMetric(hot, "hot-B/row")
	b.ReportMetric(cold, "cold-B/row")
	b.ReportMetric(cold/hot, "cold/hot")
}
