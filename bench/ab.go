package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/energyscope/energyscope/localcache"
)

// childAB times the store's Get over two homes holding the same rows
// (e.g. cooked as two format versions: --home/--snap and --home2/--snap2)
// in one process, alternating blocks of pairBlock queries between them as
// childPair does: a comparison of two snapshot layouts with one build that
// the machine's load slows alike. The queries are drawn from --snap; every
// series of both is read once before the timed pass.
//
//	bench-probe --child ab --home H2 --snap S2 --home2 H3 --snap2 S3 --gets 100000
func childAB(a childArgs) (map[string]any, error) {
	var r localcache.Result
	defer r.Release()
	qs, err := queriesFromSnapshot(a.snap, a.n, a.seed)
	if err != nil {
		return nil, err
	}
	if len(qs) == 0 {
		return nil, fmt.Errorf("no queries")
	}
	var stores [2]*localcache.Store
	var sum float64
	for side, hs := range [2][2]string{{a.home, a.snap}, {a.home2, a.snap2}} {
		st, err := localcache.Open(hs[0], &localcache.Options{ReadOnly: true})
		if err != nil {
			return nil, err
		}
		defer st.Close()
		stores[side] = st
		v, err := readEvery(st, hs[1])
		if err != nil {
			return nil, err
		}
		sum += v
	}
	var lat [2][]time.Duration
	for pass := range 2 {
		for b := 0; b < len(qs); b += pairBlock {
			block := qs[b:min(b+pairBlock, len(qs))]
			for k := range 2 {
				side := (b/pairBlock + k) % 2 // alternate which side goes first
				for i := range block {
					q := &block[i]
					t0 := time.Now()
					err := stores[side].GetInto(q.ID, q.From, q.To, &r)
					if err != nil {
						return nil, err
					}
					sum += sumValues(r.Points.Values) + sumPeriods(r.Points)
					r.Release()
					if pass == 1 {
						lat[side] = append(lat[side], time.Since(t0))
					}
				}
			}
		}
	}
	slices.Sort(lat[0])
	slices.Sort(lat[1])
	return map[string]any{
		"ab_queries":  len(qs),
		"ab_a_p50_us": us(pct(lat[0], 50)),
		"ab_a_p99_us": us(pct(lat[0], 99)),
		"ab_b_p50_us": us(pct(lat[1], 50)),
		"ab_b_p99_us": us(pct(lat[1], 99)),
		"ab_b_vs_a_x": pct(lat[1], 50).Seconds() / pct(lat[0], 50).Seconds(),
		"ab_checksum": sum,
	}, nil
}
