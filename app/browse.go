package app

import (
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/energyscope/energyscope/localcache"
)

// BrowseLimit is how many series Browse lists (the first by id).
const BrowseLimit = 200

// FacetValue is one value of a facet and how many series have it.
type FacetValue struct {
	Value string `json:"value"`
	Count int    `json:"count"`
}

// Facets are the values the Explorer browses by, with series counts over
// the whole store.
type Facets struct {
	Series      int          `json:"series"`
	Datasets    []FacetValue `json:"datasets"`
	Sources     []FacetValue `json:"sources"`
	Frequencies []FacetValue `json:"frequencies"`
	Units       []FacetValue `json:"units"`
	Error       string       `json:"error,omitempty"`
}

// BrowseRequest chooses series by facet; an empty field matches any.
type BrowseRequest struct {
	Dataset   string `json:"dataset"`
	Source    string `json:"source"`
	Frequency string `json:"frequency"`
	Unit      string `json:"unit"`
}

// BrowseResult is the first BrowseLimit series that match, by id, and how
// many match in all.
type BrowseResult struct {
	Hits  []SearchHit `json:"hits"`
	Total int         `json:"total"`
	More  bool        `json:"more"` // Total > len(Hits)
	Error string      `json:"error,omitempty"`
}

// facetCache holds each dataset's localcache.Facets for the snapshot in
// service: computed on first use (one pass over the index, never per
// keystroke), dropped when the store swaps the snapshot (the store watch
// names no ids) and recomputed when Browse finds it stale.
type facetCache struct {
	mu    sync.Mutex // guards store, byDS
	store *localcache.Store
	byDS  map[string]*localcache.Facets
}

func (c *facetCache) drop(dataset string) {
	c.mu.Lock()
	delete(c.byDS, dataset)
	c.mu.Unlock()
}

// get returns the dataset's facets, computing them if needed. Two callers
// may compute the same facets at once; both results are equal.
func (c *facetCache) get(st *localcache.Store, dataset string, fresh bool) (*localcache.Facets, error) {
	c.mu.Lock()
	if c.store != st {
		c.store, c.byDS = st, map[string]*localcache.Facets{}
	}
	f := c.byDS[dataset]
	c.mu.Unlock()
	if f != nil && !fresh {
		return f, nil
	}
	f, err := st.Facets(dataset)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.store == st {
		c.byDS[dataset] = f
	}
	c.mu.Unlock()
	return f, nil
}

// Facets lists the datasets, sources, frequencies and units of the series
// in the store, each with how many series have it (most first). Series
// that only the delta holds are not counted until the next snapshot.
func (v *ExplorerView) Facets() Facets {
	out := Facets{Datasets: []FacetValue{}, Sources: []FacetValue{}, Frequencies: []FacetValue{}, Units: []FacetValue{}}
	st, err := v.store()
	if err != nil {
		out.Error = words(err)
		return out
	}
	src, frq, unt := map[string]int{}, map[string]int{}, map[string]int{}
	for _, ds := range st.DatasetNames() {
		f, err := v.facets.get(st, ds, false)
		if err != nil {
			continue // a damaged dataset: Status says why
		}
		out.Series += f.Series
		out.Datasets = append(out.Datasets, FacetValue{ds, f.Series})
		for _, x := range []struct {
			m  map[string]int
			vs []localcache.FacetValue
		}{{src, f.Sources}, {frq, f.Freqs}, {unt, f.Units}} {
			for _, v := range x.vs {
				x.m[v.Value] += v.Count
			}
		}
	}
	out.Sources, out.Frequencies, out.Units = facetList(src), facetList(frq), facetList(unt)
	return out
}

func facetList(m map[string]int) []FacetValue {
	out := make([]FacetValue, 0, len(m))
	for v, n := range m {
		if v != "" {
			out = append(out, FacetValue{v, n})
		}
	}
	slices.SortFunc(out, func(x, y FacetValue) int {
		if x.Count != y.Count {
			return y.Count - x.Count
		}
		return strings.Compare(x.Value, y.Value)
	})
	return out
}

// Browse lists the series that have every chosen facet value, without a
// query: the first BrowseLimit by id (then dataset), and how many match.
func (v *ExplorerView) Browse(req BrowseRequest) BrowseResult {
	out := BrowseResult{Hits: []SearchHit{}}
	st, err := v.store()
	if err != nil {
		out.Error = words(err)
		return out
	}
	flt := localcache.FacetFilter{Source: req.Source, Freq: req.Frequency, Unit: req.Unit}
	var hits []localcache.SearchHit
	for _, ds := range st.DatasetNames() {
		if req.Dataset != "" && ds != req.Dataset {
			continue
		}
		f, err := v.facets.get(st, ds, false)
		if err != nil {
			continue
		}
		h, n, err := st.Browse(f, flt, BrowseLimit)
		if errors.Is(err, localcache.ErrFacetsStale) {
			if f, err = v.facets.get(st, ds, true); err == nil {
				h, n, err = st.Browse(f, flt, BrowseLimit)
			}
		}
		if err != nil {
			continue
		}
		hits = append(hits, h...)
		out.Total += n
	}
	slices.SortFunc(hits, func(x, y localcache.SearchHit) int {
		if c := strings.Compare(x.ID, y.ID); c != 0 {
			return c
		}
		return strings.Compare(x.Dataset, y.Dataset)
	})
	if len(hits) > BrowseLimit {
		hits = hits[:BrowseLimit]
	}
	for _, h := range hits {
		hit := SearchHit{ID: h.ID, Dataset: h.Dataset, Name: h.Name}
		if in, err := st.Info(h.Dataset + ":" + h.ID); err == nil {
			hit.Unit, hit.Frequency, hit.Source = in.Unit, string(in.Frequency), in.Source
		}
		out.Hits = append(out.Hits, hit)
	}
	out.More = out.Total > len(out.Hits)
	return out
}
