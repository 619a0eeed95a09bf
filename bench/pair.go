package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// pairBlock is how many queries childPair runs on one side before it
// switches to the other.
const pairBlock = 1000

// childPair times the store's Get and the resident path on the same
// queries in one process, alternating blocks of pairBlock queries between
// the two: whatever else the machine runs slows both sides alike
// (separate children's p50s differ by ±20% from run to run at load). Each side reads every point and period of its
// range, as timeGets and resident.get do; every series is read once
// through the store and every queried one through the resident path
// before the timed passes (the steady state of childGet's second pass).
//
// It is not the comparison: one process holding both the
// resident heap and the snapshot's mappings slows the resident side more
// than the store's (measured: resident p50 0.99 µs here vs 0.76 in its own
// child, store 0.99 vs 0.99), so the ratio flatters the store. It is for
// comparing two builds of the store on a loaded machine.
func childPair(a childArgs) (map[string]any, error) {
	var r localcache.Result
	defer r.Release()
	qs, err := queriesFromSnapshot(a.snap, a.n, a.seed)
	if err != nil {
		return nil, err
	}
	if len(qs) == 0 {
		return nil, fmt.Errorf("no queries")
	}
	res, st, sum, closePeers, err := openPeers(a)
	if err != nil {
		return nil, err
	}
	defer closePeers()
	for i := range qs {
		q := qs[i]
		q.From, q.To = snapshot.MinTime/2, snapshot.MaxTime/2
		v, _ := res.get(&q)
		sum += v
	}
	var storeLat, resLat []time.Duration
	for pass := range 2 {
		for b := 0; b < len(qs); b += pairBlock {
			block := qs[b:min(b+pairBlock, len(qs))]
			for side := range 2 {
				if (b/pairBlock+side)%2 == 0 { // alternate which side goes first
					for i := range block {
						q := &block[i]
						t0 := time.Now()
						err := st.GetInto(q.ID, q.From, q.To, &r)
						if err != nil {
							return nil, err
						}
						sum += sumValues(r.Points.Values) + sumPeriods(r.Points)
						r.Release()
						if pass == 1 {
							storeLat = append(storeLat, time.Since(t0))
						}
					}
				} else {
					for i := range block {
						t0 := time.Now()
						v, _ := res.get(&block[i])
						sum += v
						if pass == 1 {
							resLat = append(resLat, time.Since(t0))
						}
					}
				}
			}
		}
	}
	slices.Sort(storeLat)
	slices.Sort(resLat)
	out := map[string]any{
		"pair_queries":         len(qs),
		"pair_get_p50_us":      us(pct(storeLat, 50)),
		"pair_get_p99_us":      us(pct(storeLat, 99)),
		"pair_resident_p50_us": us(pct(resLat, 50)),
		"pair_resident_p99_us": us(pct(resLat, 99)),
		"pair_checksum":        sum,
	}
	if b, err := os.ReadFile("/proc/self/smaps_rollup"); err == nil {
		// Huge pages would make the two sides' TLB costs differ: say so.
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && (f[0] == "AnonHugePages:" || f[0] == "FilePmdMapped:") {
				out["pair_"+strings.TrimSuffix(f[0], ":")+"_kb"] = f[1]
			}
		}
	}
	out["pair_get_vs_resident_p50_x"] = pct(storeLat, 50).Seconds() / pct(resLat, 50).Seconds()
	return out, nil
}

// readEvery reads every series of the snapshot at snapDir once through
// st (its whole range), so that a timed pass meets warm mappings, and
// returns the sum of the values (kept live against the optimizer).
// openPeers loads the resident path of a.snap and opens the store of
// a.home read-only, every series read once through it (readEvery); sum is
// that read's. closePeers releases both.
func openPeers(a childArgs) (res *resident, st *localcache.Store, sum float64, closePeers func(), err error) {
	if res, err = loadResident(a.snap); err != nil {
		return nil, nil, 0, nil, err
	}
	if st, err = localcache.Open(a.home, &localcache.Options{ReadOnly: true, MappedIndex: a.mapped}); err != nil {
		res.release()
		return nil, nil, 0, nil, err
	}
	closePeers = func() { st.Close(); res.release() }
	if sum, err = readEvery(st, a.snap); err != nil {
		closePeers()
		return nil, nil, 0, nil, err
	}
	return res, st, sum, closePeers, nil
}

func readEvery(st *localcache.Store, snapDir string) (float64, error) {
	var r localcache.Result
	defer r.Release()
	s, err := snapshot.Open(snapDir)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	var sum float64
	for row := range uint32(s.NumSeries()) {
		err := st.GetInto(s.SeriesID(row), snapshot.MinTime, snapshot.MaxTime, &r)
		if err != nil {
			return 0, err
		}
		sum += sumValues(r.Points.Values)
		r.Release()
	}
	return sum, nil
}
