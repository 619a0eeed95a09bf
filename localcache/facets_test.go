package localcache_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
)

// TestFacets: the facet values of a snapshot with their counts, Browse by
// id order with the count of all, and facets of a replaced snapshot
// refused as stale.
func TestFacets(t *testing.T) {
	home := t.TempDir()
	tb := &format.Table{Series: []format.SeriesMeta{
		{ID: "B", Unit: "x", Source: "s1", Frequency: format.Monthly},
		{ID: "A", Unit: "y", Source: "s1", Frequency: format.Daily},
		{ID: "C", Unit: "x", Source: "s2", Frequency: format.Monthly},
	}}
	for i := range 3 {
		tb.Append(uint32(i), utc("2026-01-01"), float64(i))
	}
	publish(t, home, "d", tb, format.WriteOptions{})
	s := openStore(t, home)

	f, err := s.Facets("d")
	if err != nil {
		t.Fatal(err)
	}
	str := func(vs []localcache.FacetValue) string { return fmt.Sprint(vs) }
	if f.Series != 3 || str(f.Units) != "[{x 2} {y 1}]" || str(f.Sources) != "[{s1 2} {s2 1}]" || str(f.Freqs) != "[{M 2} {D 1}]" {
		t.Fatalf("facets %+v", f)
	}
	browse := func(f *localcache.Facets, flt localcache.FacetFilter, limit int) string {
		t.Helper()
		hits, n, err := s.Browse(f, flt, limit)
		if err != nil {
			t.Fatal(err)
		}
		out := fmt.Sprint(n)
		for _, h := range hits {
			out += " " + h.ID
		}
		return out
	}
	for _, c := range []struct {
		flt   localcache.FacetFilter
		limit int
		want  string
	}{
		{localcache.FacetFilter{}, 10, "3 A B C"},
		{localcache.FacetFilter{Unit: "x"}, 10, "2 B C"},
		{localcache.FacetFilter{Unit: "x"}, 1, "2 B"},
		{localcache.FacetFilter{Unit: "x", Source: "s2"}, 10, "1 C"},
		{localcache.FacetFilter{Unit: "x", Freq: "D"}, 10, "0"},
		{localcache.FacetFilter{Unit: "nope"}, 10, "0"},
	} {
		if got := browse(f, c.flt, c.limit); got != c.want {
			t.Errorf("browse %+v limit %d: %q, want %q", c.flt, c.limit, got, c.want)
		}
	}
	if _, err := s.Facets("nope"); !errors.Is(err, localcache.ErrNoDataset) {
		t.Fatalf("facets of no dataset: %v", err)
	}

	// A new series folded into a new snapshot: the old facets are stale.
	if _, err := s.Apply("d", []format.Record{{Seq: 1, Op: format.Upsert, SeriesID: "AA", Period: utc("2026-01-01"), Value: 1,
		Meta: &format.RecordMeta{Unit: "x", Source: "s2", Frequency: format.Monthly}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Compact("d"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Browse(f, localcache.FacetFilter{}, 10); !errors.Is(err, localcache.ErrFacetsStale) {
		t.Fatalf("browse with the old snapshot's facets: %v", err)
	}
	f2, err := s.Facets("d")
	if err != nil {
		t.Fatal(err)
	}
	if f2.SnapshotID == f.SnapshotID || str(f2.Units) != "[{x 3} {y 1}]" {
		t.Fatalf("facets after compaction %+v", f2)
	}
	if got := browse(f2, localcache.FacetFilter{Unit: "x", Source: "s2"}, 10); got != "2 AA C" {
		t.Fatalf("after compaction: %q", got)
	}
}
