package app_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/app"
	"github.com/energyscope/energyscope/internal/synth"
	"github.com/energyscope/energyscope/internal/testhome"
	"github.com/energyscope/energyscope/server/cook"
)

// BenchmarkSearch is the Explorer's search-as-you-type over 175K series
// (the PET-shaped synthetic set): one ExplorerView.Search per keystroke of a few
// typed queries, hits enriched with unit and frequency as the results list
// shows them. The figure to watch is ms/keystroke (target <= 20 ms).
//
//	go test -run '^$' -bench BenchmarkSearch -benchtime 200x ./app/
func BenchmarkSearch(b *testing.B) {
	home := b.TempDir()
	src := filepath.Join(b.TempDir(), "synth.csv")
	start := time.Now()
	if _, err := synth.WriteFile(src, synth.Options{Series: 175_000, Rows: 2_000_000, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	testhome.CookFile(b, home, "pet", src, cook.InputOptions{})
	os.Remove(src)
	b.Logf("generated and cooked 175K series in %v", time.Since(start).Round(time.Millisecond))

	ta := openTestApp(b, home)
	if st := ta.Status(); len(st.Datasets) != 1 || st.Series != 175_000 {
		b.Fatalf("status %+v", st)
	}
	// The first search builds the snapshot's search index (lazily, once).
	t0 := time.Now()
	first := ta.Search("p")
	b.Logf("first search (builds the index): %v", time.Since(t0).Round(time.Millisecond))

	// Keystrokes: every prefix of each query, as typed.
	var keys []string
	for _, q := range []string{first.Hits[0].ID, "crude oil", "ng.n30", "elec gen", "weekly"} {
		for i := 1; i <= len(q); i++ {
			if strings.TrimSpace(q[:i]) != "" {
				keys = append(keys, q[:i])
			}
		}
	}
	var worst time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q := keys[i%len(keys)]
		t := time.Now()
		r := ta.Search(q)
		if d := time.Since(t); d > worst {
			worst = d
		}
		if r.Error != "" {
			b.Fatal(r.Error)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/keystroke")
	b.ReportMetric(float64(worst.Microseconds())/1000, "ms/worst-keystroke")
	_ = app.SearchLimit
}

// BenchmarkBrowse is the Explorer's facets over the same 175K series:
// the first ExplorerView.Facets (one pass over the index, once per snapshot), then
// ExplorerView.Browse per facet choice, with ExplorerView.Search for one keystroke measured
// in the same loop as the peer. The figures: ms/first-facets,
// ms/browse and ms/search.
//
//	go test -run '^$' -bench BenchmarkBrowse -benchtime 50x ./app/
func BenchmarkBrowse(b *testing.B) {
	home := b.TempDir()
	src := filepath.Join(b.TempDir(), "synth.csv")
	if _, err := synth.WriteFile(src, synth.Options{Series: 175_000, Rows: 2_000_000, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	testhome.CookFile(b, home, "pet", src, cook.InputOptions{})
	os.Remove(src)
	ta := openTestApp(b, home)
	ta.Search("p") // the search index, built once, out of the figures

	t0 := time.Now()
	f := ta.Facets()
	first := time.Since(t0)
	if f.Error != "" || f.Series != 175_000 || len(f.Units) == 0 || len(f.Frequencies) == 0 {
		b.Fatalf("facets: %d series, %d units, %d frequencies (%s)", f.Series, len(f.Units), len(f.Frequencies), f.Error)
	}
	var reqs []app.BrowseRequest
	for _, u := range f.Units[:min(3, len(f.Units))] {
		reqs = append(reqs, app.BrowseRequest{Unit: u.Value})
		for _, fr := range f.Frequencies[:min(2, len(f.Frequencies))] {
			reqs = append(reqs, app.BrowseRequest{Unit: u.Value, Frequency: fr.Value})
		}
	}
	var browse, search time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		r := ta.Browse(reqs[i%len(reqs)])
		browse += time.Since(t)
		if r.Error != "" {
			b.Fatal(r.Error)
		}
		t = time.Now()
		ta.Search("crude o")
		search += time.Since(t)
	}
	b.StopTimer()
	b.ReportMetric(float64(first.Microseconds())/1000, "ms/first-facets")
	b.ReportMetric(float64(browse.Microseconds())/1000/float64(b.N), "ms/browse")
	b.ReportMetric(float64(search.Microseconds())/1000/float64(b.N), "ms/search")
}
