package main

import (
	"fmt"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// childCG is the lookup loop of childGet alone, for an instruction and
// simulated-cache count that the machine's load does not change:
//
//	valgrind --tool=callgrind --cache-sim=yes --toggle-collect='main.cgStore' \
//	  bench-probe --child cg --engine store --home H --snap S --gets 20000
//
// (--engine resident and --toggle-collect='main.cgResident' for the
// resident path). Every series is read once before the loop (the steady
// state of childGet's second pass), then the loop runs the queries
// --cg-passes times.
func childCG(a childArgs) (map[string]any, error) {
	qs, err := queriesFromSnapshot(a.snap, a.n, a.seed)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"cg_queries": len(qs) * a.cgPasses, "cg_engine": a.engine}
	var sum float64
	switch a.engine {
	case "store":
		st, err := localcache.Open(a.home, &localcache.Options{ReadOnly: true})
		if err != nil {
			return nil, err
		}
		defer st.Close()
		if sum, err = readEvery(st, a.snap); err != nil {
			return nil, err
		}
		for range a.cgPasses {
			if sum, err = cgStore(st, qs, sum); err != nil {
				return nil, err
			}
		}
	case "resident":
		res, err := loadResident(a.snap)
		if err != nil {
			return nil, err
		}
		defer res.release()
		for i := range qs { // every queried series once
			q := qs[i]
			q.From, q.To = snapshot.MinTime/2, snapshot.MaxTime/2
			s, _ := res.get(&q)
			sum += s
		}
		for range a.cgPasses {
			sum = cgResident(res, qs, sum)
		}
	default:
		return nil, fmt.Errorf("--engine %q: store or resident", a.engine)
	}
	out["cg_checksum"] = sum
	return out, nil
}

// cgStore is the collected loop over the store: Get, read every point and
// period, Release (timeGets without the clock).
//
//go:noinline
func cgStore(st *localcache.Store, qs []query, sum float64) (float64, error) {
	var r localcache.Result
	defer r.Release()
	for i := range qs {
		q := &qs[i]
		err := st.GetInto(q.ID, q.From, q.To, &r)
		if err != nil {
			return 0, err
		}
		sum += sumValues(r.Points.Values) + sumPeriods(r.Points)
		r.Release()
	}
	return sum, nil
}

// cgResident is the collected loop over the resident path.
//
//go:noinline
func cgResident(res *resident, qs []query, sum float64) float64 {
	for i := range qs {
		s, _ := res.get(&qs[i])
		sum += s
	}
	return sum
}
