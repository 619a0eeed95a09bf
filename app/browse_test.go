package app_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/energyscope/energyscope/app"
	"github.com/energyscope/energyscope/internal/testhome"
	"github.com/energyscope/energyscope/server/cook"
)

// TestBrowse: the Explorer's facets come from the store (every series,
// not the hits of a query) and browse without one: a facet value lists
// the series that have it, by id, the first BrowseLimit with the count of
// all; two facets narrow.
func TestBrowse(t *testing.T) {
	home := t.TempDir()
	testhome.CookSamples(t, home)
	// 250 series written in reverse id order, so that "by id" is not the
	// order of the file.
	var b strings.Builder
	b.WriteString("series_id,period,value\n")
	for i := 249; i >= 0; i-- {
		fmt.Fprintf(&b, "S%03d,2020-01-01,%d\n", i, i)
	}
	csv := filepath.Join(t.TempDir(), "many.csv")
	if err := os.WriteFile(csv, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	testhome.CookFile(t, home, "zmany", csv, cook.InputOptions{})
	a := openTestApp(t, home)

	f := a.Facets()
	str := func(vs []app.FacetValue) string {
		var parts []string
		for _, v := range vs {
			parts = append(parts, fmt.Sprintf("%s=%d", v.Value, v.Count))
		}
		return strings.Join(parts, ",")
	}
	if f.Error != "" || f.Series != 261 || str(f.Datasets) != "iowa=3,seattle=3,stocks=5,zmany=250" {
		t.Fatalf("facets: %d series, datasets %s (%s)", f.Series, str(f.Datasets), f.Error)
	}
	if str(f.Units) != "USD=5,thousand MWh=3" || !strings.Contains(str(f.Sources), "vega-datasets=5") || !strings.Contains(str(f.Sources), "U.S. EIA=3") || !strings.Contains(str(f.Frequencies), "A=3") {
		t.Fatalf("facets: units %s, sources %s, frequencies %s", str(f.Units), str(f.Sources), str(f.Frequencies))
	}

	ids := func(r app.BrowseResult) string {
		var out []string
		for _, h := range r.Hits {
			out = append(out, h.Dataset+":"+h.ID)
		}
		return strings.Join(out, ",")
	}
	// One facet: every series with that unit, by id, with their metadata.
	r := a.Browse(app.BrowseRequest{Unit: "USD"})
	if r.Error != "" || r.Total != 5 || r.More || ids(r) != "stocks:AAPL,stocks:AMZN,stocks:GOOG,stocks:IBM,stocks:MSFT" {
		t.Fatalf("unit USD: %+v", r)
	}
	for _, h := range r.Hits {
		if h.Unit != "USD" || h.Source != "vega-datasets" || h.Frequency != "M" {
			t.Fatalf("hit %+v", h)
		}
	}
	r = a.Browse(app.BrowseRequest{Frequency: "A"})
	if r.Total != 3 || len(r.Hits) != 3 || r.Hits[0].Dataset != "iowa" {
		t.Fatalf("annual: %+v", r)
	}
	// Two facets narrow: USD and monthly is the stocks; USD and annual none.
	if r := a.Browse(app.BrowseRequest{Unit: "USD", Frequency: "M", Source: "vega-datasets"}); r.Total != 5 {
		t.Fatalf("USD monthly: %+v", r)
	}
	if r := a.Browse(app.BrowseRequest{Unit: "USD", Frequency: "A"}); r.Total != 0 || len(r.Hits) != 0 || r.Error != "" {
		t.Fatalf("USD annual: %+v", r)
	}
	if r := a.Browse(app.BrowseRequest{Dataset: "iowa", Unit: "USD"}); r.Total != 0 || len(r.Hits) != 0 {
		t.Fatalf("iowa USD: %+v", r)
	}
	if r := a.Browse(app.BrowseRequest{Unit: "no such unit"}); r.Total != 0 || len(r.Hits) != 0 || r.Error != "" {
		t.Fatalf("unknown unit: %+v", r)
	}
	// A dataset of 250: the first BrowseLimit by id and the count of all.
	r = a.Browse(app.BrowseRequest{Dataset: "zmany"})
	if r.Error != "" || r.Total != 250 || !r.More || len(r.Hits) != app.BrowseLimit {
		t.Fatalf("zmany: total %d, %d hits, more %v (%s)", r.Total, len(r.Hits), r.More, r.Error)
	}
	want := make([]string, app.BrowseLimit)
	for i := range want {
		want[i] = fmt.Sprintf("S%03d", i)
	}
	got := make([]string, len(r.Hits))
	for i, h := range r.Hits {
		got[i] = h.ID
	}
	if !slices.Equal(got, want) {
		t.Fatalf("zmany ids not the first %d by id: %v…", app.BrowseLimit, got[:5])
	}
	// Every facet empty: every series.
	if r := a.Browse(app.BrowseRequest{}); r.Total != 261 || len(r.Hits) != app.BrowseLimit {
		t.Fatalf("all: total %d, %d hits", r.Total, len(r.Hits))
	}
}
