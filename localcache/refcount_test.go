package localcache_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// versionTable has n daily series "S<i>" of 30 days whose every value is
// version: a reader can tell which snapshot a result came from.
func versionTable(n int, version float64) *format.Table {
	tb := &format.Table{}
	for i := range n {
		tb.Series = append(tb.Series, format.SeriesMeta{ID: fmt.Sprintf("S%d", i), Frequency: format.Daily})
		for d := range 30 {
			tb.Append(uint32(i), utc("2024-01-01")+int64(d)*86400, version)
		}
	}
	return tb
}

func allEqual(p snapshot.Points, v float64, n int) bool {
	if p.Len() != n {
		return false
	}
	for i := range n {
		if p.Values[i] != v || p.Unix(i) != utc("2024-01-01")+int64(i)*86400 {
			return false
		}
	}
	return true
}

// A Result holds its snapshot: it reads correct values across a swap to a
// new snapshot and across Close of the store, and the old mapping goes
// away after the last Release.
func TestResultOutlivesSwapAndClose(t *testing.T) {
	home := t.TempDir()
	_, dirA := publish(t, home, "ds", versionTable(3, 1), format.WriteOptions{Epoch: 1})
	st, err := localcache.Open(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	wantMapped(t, dirA, true)

	ra, err := st.Get("S1", snapshot.MinTime, snapshot.MaxTime)
	if err != nil {
		t.Fatal(err)
	}
	ra2, err := st.Get("ds:S2", utc("2024-01-01"), utc("2024-01-10"))
	if err != nil {
		t.Fatal(err)
	}

	_, dirB := publish(t, home, "ds", versionTable(3, 2), format.WriteOptions{Epoch: 2})
	if err := st.Refresh(); err != nil {
		t.Fatal(err)
	}
	rb, err := st.Get("S1", snapshot.MinTime, snapshot.MaxTime)
	if err != nil {
		t.Fatal(err)
	}
	if !allEqual(rb.Points, 2, 30) {
		t.Fatalf("after the swap Get reads %v", rb.Points.Values)
	}
	if in, _ := st.Info("S1"); in.Epoch != 2 {
		t.Fatalf("after the swap Info says epoch %d", in.Epoch)
	}
	// The old results still read the old snapshot, which is still mapped.
	if !allEqual(ra.Points, 1, 30) || !allEqual(ra2.Points, 1, 10) {
		t.Fatalf("held results changed: %v / %v", ra.Points.Values, ra2.Points.Values)
	}
	wantMapped(t, dirA, true)
	ra.Release()
	wantMapped(t, dirA, true) // ra2 still holds it
	ra2.Release()
	ra2.Release() // idempotent
	wantMapped(t, dirA, false)

	// Close of the store: the result keeps B mapped and readable.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if !allEqual(rb.Points, 2, 30) {
		t.Fatalf("result read %v after Close", rb.Points.Values)
	}
	wantMapped(t, dirB, true)
	if _, err := st.Get("S1", snapshot.MinTime, snapshot.MaxTime); !errors.Is(err, localcache.ErrClosed) {
		t.Errorf("Get after Close: %v, want ErrClosed", err)
	}
	if _, err := st.Info("ds:S1"); !errors.Is(err, localcache.ErrClosed) {
		t.Errorf("Info after Close: %v, want ErrClosed", err)
	}
	if _, err := st.Search("S", 10); !errors.Is(err, localcache.ErrClosed) {
		t.Errorf("Search after Close: %v, want ErrClosed", err)
	}
	if err := st.Refresh(); !errors.Is(err, localcache.ErrClosed) && err != nil {
		t.Errorf("Refresh after Close: %v", err)
	}
	rb.Release()
	wantMapped(t, dirB, false)
	if err := st.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestSwapUnderLoad (meant for -race) publishes versions while readers
// Get, hold some results for a while and check them. Every result must be
// one whole version: all values equal, never a mix, never a version that
// was not yet published. At the end all but the served snapshot are
// unmapped.
func TestSwapUnderLoad(t *testing.T) {
	home := t.TempDir()
	const series = 8
	var dirs []string
	_, d := publish(t, home, "ds", versionTable(series, 1), format.WriteOptions{Epoch: 1})
	dirs = append(dirs, d)
	st := openStore(t, home)

	var published atomic.Int64
	published.Store(1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			var held []localcache.Result
			var heldV []float64
			for n := 0; ; n++ {
				select {
				case <-stop:
					for _, r := range held {
						r.Release()
					}
					return
				default:
				}
				ref := fmt.Sprintf("S%d", rng.IntN(series))
				if rng.IntN(2) == 0 {
					ref = "ds:" + ref
				}
				r, err := st.Get(ref, snapshot.MinTime, snapshot.MaxTime)
				if err != nil {
					t.Errorf("Get(%s): %v", ref, err)
					return
				}
				v := 0.0
				if r.Points.Len() > 0 {
					v = r.Points.Values[0]
				}
				if v < 1 || v > float64(published.Load()) || !allEqual(r.Points, v, 30) {
					t.Errorf("Get(%s) read version %v (published %d): %v", ref, v, published.Load(), r.Points.Values)
				}
				held, heldV = append(held, r), append(heldV, v)
				if len(held) > 5 || rng.IntN(3) == 0 {
					k := rng.IntN(len(held))
					if !allEqual(held[k].Points, heldV[k], 30) {
						t.Errorf("held result of version %v now reads %v", heldV[k], held[k].Points.Values)
					}
					held[k].Release()
					held = append(held[:k], held[k+1:]...)
					heldV = append(heldV[:k], heldV[k+1:]...)
				}
				if n%50 == 0 {
					if _, err := st.Info(ref); err != nil {
						t.Errorf("Info(%s): %v", ref, err)
					}
				}
				runtime.Gosched() // leave the publisher some CPU
			}
		}()
	}
	versions := 8
	if raceEnabled {
		versions = 5
	}
	for v := 2; v <= versions; v++ {
		_, d := publish(t, home, "ds", versionTable(series, float64(v)), format.WriteOptions{Epoch: uint64(v)})
		dirs = append(dirs, d)
		published.Store(int64(v))
		if err := st.Refresh(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	r, err := st.Get("S0", snapshot.MinTime, snapshot.MaxTime)
	if err != nil || !allEqual(r.Points, float64(versions), 30) {
		t.Fatalf("final Get: %v %v", r.Points.Values, err)
	}
	r.Release()
	if m, ok := mappedDirs(t, dirs...); ok {
		for i, dir := range dirs {
			if want := i == len(dirs)-1; m[dir] != want {
				t.Errorf("version %d: mapped %v, want %v", i+1, m[dir], want)
			}
		}
	}
}

// GetInto releases what its Result held before it writes the new one: a
// loop reusing one Result keeps only the snapshot of its last lookup
// mapped, and a failed lookup leaves the zero Result, holding nothing.
func TestGetIntoReleasesWhatItHeld(t *testing.T) {
	home := t.TempDir()
	_, dirA := publish(t, home, "ds", versionTable(3, 1), format.WriteOptions{Epoch: 1})
	st, err := localcache.Open(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var r localcache.Result
	if err := st.GetInto("S1", snapshot.MinTime, snapshot.MaxTime, &r); err != nil {
		t.Fatal(err)
	}
	if !allEqual(r.Points, 1, 30) || r.Dataset != "ds" || r.Frequency != format.Daily {
		t.Fatalf("GetInto read %+v", r)
	}
	_, dirB := publish(t, home, "ds", versionTable(3, 2), format.WriteOptions{Epoch: 2})
	if err := st.Refresh(); err != nil {
		t.Fatal(err)
	}
	wantMapped(t, dirA, true) // r holds it
	if err := st.GetInto("ds:S2", utc("2024-01-01"), utc("2024-01-10"), &r); err != nil {
		t.Fatal(err)
	}
	if !allEqual(r.Points, 2, 10) {
		t.Fatalf("GetInto after the swap read %v", r.Points.Values)
	}
	wantMapped(t, dirA, false) // released by the second GetInto
	if err := st.GetInto("nope", snapshot.MinTime, snapshot.MaxTime, &r); !errors.Is(err, localcache.ErrNotFound) {
		t.Fatalf("GetInto(nope) = %v, want ErrNotFound", err)
	}
	if r.Points.Len() != 0 || r.Dataset != "" {
		t.Fatalf("a failed GetInto left %+v", r)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	wantMapped(t, dirB, false) // r held nothing after the failed lookup
	r.Release()                // harmless on the zero Result
}

// Get and GetInto of a series without pending rows allocate nothing: the
// Result stays on the caller's stack (a Result reachable from the fault
// guard's record once made every Get a 128-byte heap allocation).
func TestGetAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	home := t.TempDir()
	publish(t, home, "ds", versionTable(3, 1), format.WriteOptions{Epoch: 1})
	st, err := localcache.Open(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	from, to := utc("2024-01-02"), utc("2024-01-20")
	if n := testing.AllocsPerRun(200, func() {
		r, err := st.Get("S1", from, to)
		if err != nil || r.Points.Len() != 19 {
			t.Fatalf("Get: %d points, %v", r.Points.Len(), err)
		}
		r.Release()
	}); n != 0 {
		t.Errorf("Get allocates %.1f times a call", n)
	}
	var r localcache.Result
	if n := testing.AllocsPerRun(200, func() {
		if err := st.GetInto("S2", from, to, &r); err != nil || r.Points.Len() != 19 {
			t.Fatalf("GetInto: %d points, %v", r.Points.Len(), err)
		}
	}); n != 0 {
		t.Errorf("GetInto allocates %.1f times a call", n)
	}
	r.Release()
}
