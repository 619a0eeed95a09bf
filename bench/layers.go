//go:build probe

package main

import (
	"slices"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

func init() { heavyModes["layers"] = childLayers }

// childLayers times one lookup at each layer in one process: the store's
// Get (its Result returned), the store's GetInto (written into the
// caller's Result), the snapshot's own Find + GetIntoRec, the resident
// path, and the id's lookup alone in the snapshot and the resident map,
// each over its own fresh set of queries (drawn with seeds seed*1000+k),
// so that no layer finds the lines of another's queries in the CPU's
// caches. Every series is read once through the
// store and the snapshot first, as in the get child, and every layer
// reads the points it gets (BENCHMARKS.md "Returning the Result").
func childLayers(a childArgs) (map[string]any, error) {
	res, st, sum, closePeers, err := openPeers(a)
	if err != nil {
		return nil, err
	}
	defer closePeers()
	s, err := snapshot.Open(a.snap)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	for row := range uint32(s.NumSeries()) {
		p, err := s.Get(row, snapshot.MinTime, snapshot.MaxTime)
		if err != nil {
			return nil, err
		}
		sum += sumValues(p.Values)
	}
	// The same snapshot serving from its copy of index.hash in 2 MiB pages
	// (snapshot.Options.HugeIndex, when index.hash is 64 MiB or more),
	// the copy complete before the passes.
	sc, err := snapshot.OpenOptions(a.snap, snapshot.Options{HugeIndex: true})
	if err != nil {
		return nil, err
	}
	defer sc.Close()
	if err := sc.WaitIndexCopy(); err != nil {
		return nil, err
	}
	out := map[string]any{"layers_index": sc.IndexCopy().String()}
	for row := range uint32(sc.NumSeries()) {
		p, err := sc.Get(row, snapshot.MinTime, snapshot.MaxTime)
		if err != nil {
			return nil, err
		}
		sum += sumValues(p.Values)
	}
	var r localcache.Result
	defer r.Release()
	layers := []struct {
		name string
		get  func(q *query) (float64, error)
	}{
		{"store_get", func(q *query) (float64, error) {
			r, err := st.Get(q.ID, q.From, q.To)
			x := sumValues(r.Points.Values) + sumPeriods(r.Points)
			r.Release()
			return x, err
		}},
		{"store_getinto", func(q *query) (float64, error) {
			err := st.GetInto(q.ID, q.From, q.To, &r)
			x := sumValues(r.Points.Values) + sumPeriods(r.Points)
			r.Release()
			return x, err
		}},
		{"snapshot", func(q *query) (float64, error) {
			row, rec, _ := s.Find(q.ID)
			var p snapshot.Points
			_, err := s.GetIntoRec(row, rec, q.From, q.To, &p)
			return sumValues(p.Values) + sumPeriods(p), err
		}},
		{"snapshot_copy", func(q *query) (float64, error) {
			row, rec, _ := sc.Find(q.ID)
			var p snapshot.Points
			_, err := sc.GetIntoRec(row, rec, q.From, q.To, &p)
			return sumValues(p.Values) + sumPeriods(p), err
		}},
		{"resident", func(q *query) (float64, error) {
			x, _ := res.get(q)
			return x, nil
		}},
		// The id's lookup alone: the snapshot's Find (index.hash) against
		// the resident path's map. Back-to-back lookups with no points
		// to wait for may overlap in the CPU: a throughput as much as a
		// latency (BENCHMARKS.md "Where the time goes").
		{"snapshot_find", func(q *query) (float64, error) {
			row, rec, _ := s.Find(q.ID)
			return float64(row + rec), nil
		}},
		{"resident_find", func(q *query) (float64, error) {
			rr := res.idx[q.ID]
			return float64(rr.off + rr.n), nil
		}},
	}
	lat := make([]time.Duration, a.n)
	for pass := range 2 {
		for k, l := range layers {
			qs, err := queriesFromSnapshot(a.snap, a.n, a.seed*1000+uint64(pass*len(layers)+k))
			if err != nil {
				return nil, err
			}
			for i := range qs {
				t0 := time.Now()
				x, err := l.get(&qs[i])
				if err != nil {
					return nil, err
				}
				lat[i] = time.Since(t0)
				sum += x
			}
			sorted := slices.Clone(lat[:len(qs)])
			slices.Sort(sorted)
			out["layers_"+l.name+"_p50_us"] = us(pct(sorted, 50)) // the second pass's stays
		}
	}
	out["layers_checksum"] = sum
	return out, nil
}
