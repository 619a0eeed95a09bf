package localcache

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
)

// Benchmarks of the live path (issue "Liveness"), side by side in one run:
//
//	go test ./localcache -run '^$' -bench 'Live' -benchtime 2s
//
// The dataset: 20,000 daily series x 75 points (1.5M rows).
const (
	liveBenchSeries = 20_000
	liveBenchPoints = 75
)

var liveBenchDay0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix()

func liveBenchTable(series int) *format.Table {
	t := &format.Table{}
	for s := 0; s < series; s++ {
		t.Series = append(t.Series, format.SeriesMeta{ID: fmt.Sprintf("BENCH.S%05d.D", s), Frequency: format.Daily})
		for p := 0; p < liveBenchPoints; p++ {
			t.Append(uint32(s), liveBenchDay0+int64(p)*86400, float64(s+p))
		}
	}
	return t
}

// liveBenchStore is a store over a fresh snapshot of liveBenchTable(series)
// with automatic compaction off.
func liveBenchStore(b *testing.B, series int) *Store {
	b.Helper()
	home := b.TempDir()
	liveCook(b, home, "bench", liveBenchTable(series), format.WriteOptions{Epoch: 1})
	s := liveOpen(b, home, &Options{CompactRows: -1, CompactBytes: -1})
	b.Cleanup(func() { s.Close() })
	return s
}

// applyRows applies n upserts to the given series (spread over their
// range), in batches of 1,000.
func applyRows(b *testing.B, s *Store, ids []string, n int) {
	b.Helper()
	seq, _ := s.LastSeq("bench")
	batch := make([]format.Record, 0, 1000)
	for i := 0; i < n; i++ {
		seq++
		batch = append(batch, format.Record{Seq: seq, Op: format.Upsert, SeriesID: ids[i%len(ids)], Period: liveBenchDay0 + int64(i%(liveBenchPoints+30))*86400, Value: float64(i)})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := s.Apply("bench", batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

func liveBenchGet(b *testing.B, s *Store, ids []string) {
	rng := rand.New(rand.NewPCG(1, 2))
	from, to := liveBenchDay0+10*86400, liveBenchDay0+60*86400
	b.ResetTimer()
	var pts int
	for i := 0; i < b.N; i++ {
		r, err := s.Get(ids[rng.IntN(len(ids))], from, to)
		if err != nil {
			b.Fatal(err)
		}
		pts += r.Points.Len()
		r.Release()
	}
	b.ReportMetric(float64(pts)/float64(b.N), "points/op")
}

func seriesIDs(from, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("BENCH.S%05d.D", from+i)
	}
	return ids
}

// BenchmarkLiveGet compares Get on series without pending rows (the
// plain slice path), on series with a few pending rows (merge), and on
// untouched series while the delta holds 1M rows elsewhere.
func BenchmarkLiveGet(b *testing.B) {
	s := liveBenchStore(b, liveBenchSeries)
	pending := seriesIDs(0, 1000)
	applyRows(b, s, pending, 5000) // 5 pending rows per series
	plain := seriesIDs(10_000, 10_000)
	b.Run("plain", func(b *testing.B) { liveBenchGet(b, s, plain) })
	b.Run("pending", func(b *testing.B) { liveBenchGet(b, s, pending) })
	applyRows(b, s, seriesIDs(1000, 9000), 1_000_000)
	b.Run("plain-with-1M-delta", func(b *testing.B) { liveBenchGet(b, s, plain) })
}

// BenchmarkLiveApply measures durable Apply throughput: batches of 1,000
// rows, one fsync per batch.
func BenchmarkLiveApply(b *testing.B) {
	s := liveBenchStore(b, liveBenchSeries)
	ids := seriesIDs(0, liveBenchSeries)
	runtime.GC() // the garbage of building the store is not Apply's
	b.ResetTimer()
	c0 := processCPU()
	applyRows(b, s, ids, b.N*1000)
	cpu := processCPU() - c0
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "rows/s")
	// CPU per row, the part of Apply that is not waiting for the fsync.
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*1000), "cpu-ns/row")
}

// BenchmarkLiveCompact compares a compaction with 1% of the series
// updated against a fresh format.Write of the same rows.
func BenchmarkLiveCompact(b *testing.B) {
	// cpu-ms/op is the process's CPU time in the timed part (GC and
	// helper goroutines included): unlike wall time it does not swing with
	// other processes' disk traffic.
	b.Run("compact-1pct", func(b *testing.B) {
		var cpu time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			s := liveBenchStore(b, liveBenchSeries)
			applyRows(b, s, seriesIDs(0, liveBenchSeries/100), 20_000)
			runtime.GC()
			b.StartTimer()
			c0 := processCPU()
			if _, err := s.Compact("bench"); err != nil {
				b.Fatal(err)
			}
			cpu += processCPU() - c0
		}
		b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
	})
	b.Run("fresh-write", func(b *testing.B) {
		var cpu time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			t := liveBenchTable(liveBenchSeries)
			dir := filepath.Join(b.TempDir(), "s")
			runtime.GC()
			b.StartTimer()
			c0 := processCPU()
			if _, _, err := format.Write(dir, t, format.WriteOptions{Dataset: "bench"}); err != nil {
				b.Fatal(err)
			}
			cpu += processCPU() - c0
		}
		b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
	})
}

// BenchmarkLiveSwapLatency measures Get latency of 8 reader goroutines in
// steady state and while 100 compactions (each folding a small batch) are
// published and swapped in, and reports both p99s and their ratio (target
// <= 2). Every read must succeed. The dataset is smaller than the other
// live benchmarks' (2,000 series x 75 points) so that 100 compactions
// take seconds; one iteration is the whole experiment. Readers read in
// bursts of 100 with 1 ms pauses, about 25% of a core in all.
func BenchmarkLiveSwapLatency(b *testing.B) {
	const (
		series   = 2000
		readers  = 8
		compacts = 100
		steady   = time.Second
		burst    = 100 // reads between pauses
		pause    = time.Millisecond
	)
	s := liveBenchStore(b, series)
	ids := seriesIDs(0, series)
	applyRows(b, s, ids[:series/10], 1000) // some series read through the merge

	// read runs the readers until stop is closed and returns every
	// latency they saw.
	read := func(stop <-chan struct{}) []time.Duration {
		var wg sync.WaitGroup
		lat := make([][]time.Duration, readers)
		for g := range readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(g), 7))
				from, to := liveBenchDay0+10*86400, liveBenchDay0+60*86400
				out := make([]time.Duration, 0, 1<<18)
				for k := 0; ; k++ {
					if k%burst == 0 {
						// Paced, not flat out: 8 spinning readers on a
						// small machine would starve the compactions
						// (and measure the scheduler).
						select {
						case <-stop:
							lat[g] = out
							return
						case <-time.After(pause):
						}
					}
					t0 := time.Now()
					r, err := s.Get(ids[rng.IntN(len(ids))], from, to)
					if err != nil {
						b.Error(err)
						lat[g] = out
						return
					}
					n := r.Points.Len()
					r.Release()
					out = append(out, time.Since(t0))
					if n == 0 {
						b.Error("empty read")
					}
				}
			}()
		}
		wg.Wait()
		var all []time.Duration
		for _, l := range lat {
			all = append(all, l...)
		}
		return all
	}
	p99 := func(l []time.Duration) time.Duration {
		if len(l) == 0 {
			return 0
		}
		slices.Sort(l)
		return l[len(l)*99/100]
	}
	var steadyP99, swapP99 time.Duration
	var reads int
	runtime.GC()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		stop := make(chan struct{})
		var lat []time.Duration
		done := make(chan struct{})
		go func() { lat = read(stop); close(done) }()
		time.Sleep(steady)
		close(stop)
		<-done
		steadyP99 += p99(lat)

		stop = make(chan struct{})
		done = make(chan struct{})
		go func() { lat = read(stop); close(done) }()
		for range compacts {
			applyRows(b, s, ids[rand.IntN(series-50):][:50], 100)
			if _, err := s.Compact("bench"); err != nil {
				b.Fatal(err)
			}
		}
		close(stop)
		<-done
		swapP99 += p99(lat)
		reads += len(lat)
	}
	b.ReportMetric(float64(steadyP99.Nanoseconds())/float64(b.N), "steady-p99-ns")
	b.ReportMetric(float64(swapP99.Nanoseconds())/float64(b.N), "swap-p99-ns")
	b.ReportMetric(float64(swapP99)/float64(steadyP99), "p99-ratio")
	b.ReportMetric(float64(reads)/float64(b.N), "swap-reads/op")
}

// BenchmarkTrustGetGuard measures what the fault guard (SetPanicOnFault
// plus a deferred recover, see damage.go) costs a lookup: Get on a plain
// series as the store serves it, against unguardedGet, Get as it was
// before the guard. The two take turns (in rotating order) in rounds of
// 100,000 lookups within one run, timed in process CPU time (wall time on
// a machine shared with other jobs is mostly their noise):
// guarded-cpu-ns and unguarded-cpu-ns per lookup and the difference in
// percent, overhead-%. guard-cpu-ns is the guard alone.
func BenchmarkTrustGetGuard(b *testing.B) {
	s := liveBenchStore(b, liveBenchSeries)
	plain := seriesIDs(10_000, 10_000)
	from, to := liveBenchDay0+10*86400, liveBenchDay0+60*86400
	const round = 100_000
	rng := rand.New(rand.NewPCG(1, 2))
	gets := []func(string, int64, int64) (Result, error){s.unguardedGet, s.Get}
	var tot [3]time.Duration
	n := 0
	for b.Loop() {
		for k := range 3 {
			k = (k + n/round) % 3
			t := processCPU()
			if k == 2 {
				for range round {
					func() (err error) {
						var rd reading
						defer s.guard(debug.SetPanicOnFault(true), &rd, &err)
						return nil
					}()
				}
			} else {
				get := gets[k]
				for range round {
					r, err := get(plain[rng.IntN(len(plain))], from, to)
					if err != nil {
						b.Fatal(err)
					}
					r.Release()
				}
			}
			tot[k] += processCPU() - t
		}
		n += round
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(n) }
	u, g := per(tot[0]), per(tot[1])
	b.ReportMetric(g, "guarded-cpu-ns")
	b.ReportMetric(u, "unguarded-cpu-ns")
	b.ReportMetric(per(tot[2]), "guard-cpu-ns")
	b.ReportMetric(100*(g-u)/u, "overhead-%")
}

// unguardedGet is Store.Get without the fault guard (the peer of
// BenchmarkTrustGetGuard): the same plain path first, then locate.
func (s *Store) unguardedGet(ref string, from, to int64) (res Result, err error) {
	if l := s.list.Load(); l != nil && !s.isClosed.Load() && !l.mayName(ref) {
		for _, d := range l.ds {
			rs, err := d.acquire()
			if err != nil {
				break
			}
			if row, ok := rs.snap.Lookup(ref); ok && !rs.delta.Touched(row) {
				res.Dataset, res.snap = d.name, rs.snap
				if res.Frequency, err = rs.snap.GetInto(row, from, to, &res.Points); err != nil {
					res.Release()
					return Result{}, fmt.Errorf("get %s: %w", ref, err)
				}
				return res, nil
			}
			rs.snap.Unref()
			break
		}
	}
	var r reading
	var l located
	err = s.locate(ref, &r, &l)
	if err != nil {
		return Result{}, err
	}
	res = Result{Dataset: l.d.name, snap: l.rs.snap}
	if !l.pending {
		if res.Points, res.Frequency, err = l.rs.snap.GetFrequency(l.row, from, to); err != nil {
			res.Release()
			return Result{}, fmt.Errorf("get %s: %w", ref, err)
		}
		return res, nil
	}
	buf := getMergeBuf()
	pts, freq, _, err := l.merged(buf, from, to)
	if err != nil {
		buf.put()
		res.Release()
		return Result{}, fmt.Errorf("get %s: %w", ref, err)
	}
	res.Points, res.Frequency, res.buf = pts, freq, buf
	return res, nil
}
