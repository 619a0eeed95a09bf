package functions

import (
	"errors"
	"slices"
	"testing"
)

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{
		{"", "", 0}, {"MSFT", "MSFT", 0}, {"msft", "MSFT", 0}, {"MSTF", "MSFT", 1}, {"MSF", "MSFT", 1},
		{"MSFTX", "MSFT", 1}, {"NSFT", "MSFT", 1}, {"gte", "get", 1}, {"abc", "", 3}, {"kitten", "sitting", 3},
	} {
		if got := EditDistance(c.a, c.b); got != c.d {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
		if got := EditDistance(c.b, c.a); got != c.d {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", c.b, c.a, got, c.d)
		}
	}
	if got := Nearest("gte", []string{"gen", "get", "put", "get"}, 3); !slices.Equal(got, []string{"get"}) {
		t.Errorf("Nearest(gte) = %v", got)
	}
	if got := Nearest("zzzz", []string{"get", "search"}, 3); len(got) != 0 {
		t.Errorf("Nearest(zzzz) = %v", got)
	}
}

// TestUnknownIDs: an id that differs only by case is that series; a typo names the
// nearest ids; an id folding to several names them and resolves to none.
func TestUnknownIDs(t *testing.T) {
	e := newEngine(t)
	same := func(a, b []any) {
		t.Helper()
		ra, rb := e.Call("ES.Get", a), e.Call("ES.Get", b)
		if ra.Err != nil || rb.Err != nil {
			t.Fatalf("%v: %v; %v: %v", a, ra.Err, b, rb.Err)
		}
		if err := sameCells(ra.Value, rb.Value); err != nil {
			t.Fatal(err)
		}
	}
	same([]any{"msft", "2005", "2005"}, []any{"MSFT", "2005", "2005"})
	same([]any{"Msft,ibm", "2005", "2005", "per=Q"}, []any{"MSFT,IBM", "2005", "2005", "per=Q"})
	same([]any{"renewables", "2010"}, []any{"Renewables", "2010"})
	// The header keeps the id as typed.
	r := e.Call("ES.Get", []any{"msft", "2005-01", "2005-01", "headers=y"})
	if r.Err != nil || r.Value[0][1] != "msft" {
		t.Fatalf("header: %v %v", r.Err, show(r.Value))
	}
	runCases(t, e, []callCase{
		{name: "typo", args: []any{"MSTF"}, wantErr: na(`series "MSTF" not found; did you mean MSFT?`)},
		{name: "typo in a list", args: []any{"MSFT,IMB", "2005-01", "2005-01"}, want: [][]any{{serial(t, "2005-01-01"), 24.11, na(`series "IMB" not found; did you mean IBM?`)}}},
		{name: "nothing near", args: []any{"NOPE"}, wantErr: na(`series "NOPE" not found`)},
		{name: "latest", fn: "ES.Latest", args: []any{"ibm"}, want: [][]any{{125.55}}},
		{name: "info typo", fn: "ES.Info", args: []any{"GOGL", "unit"}, wantErr: na(`series "GOGL" not found; did you mean GOOG?`)},
	})

	// Two ids folding to the same text: neither is taken, both are named.
	m := &memSource{series: map[string]*memSeries{}}
	m.add("Gas", SeriesInfo{}, 0, 1)
	m.add("GAS", SeriesInfo{}, 0, 2)
	m.finish()
	e2 := &Engine{Src: m}
	r = e2.Call("ES.Get", []any{"gas"})
	if r.Err == nil || r.Err.Message != `series "gas" not found; did you mean GAS or Gas?` {
		t.Fatalf("ambiguous case: %+v", r.Err)
	}
	// Frame keeps ErrNotFound under the words.
	if _, err := e.Frame([]string{"MSTF"}, MinTime, MaxTime, DefaultOptions()); !errors.Is(err, ErrNotFound) || err.Error() != `series "MSTF" not found; did you mean MSFT?` {
		t.Fatalf("Frame: %v", err)
	}
}

// TestSuggestBudget: past SuggestPerCall unknown ids in one call, the rest still resolve
// by case but name no near ids (each suggestion may cost scans of every id).
func TestSuggestBudget(t *testing.T) {
	e := newEngine(t)
	ids := make([][]any, SuggestPerCall+2)
	for i := range ids {
		ids[i] = []any{"MSTF"}
	}
	ids[len(ids)-1] = []any{"ibm"} // resolved by case even after the budget
	r := e.Call("ES.Get", []any{ids, "2005-01", "2005-01"})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	row := r.Value[0]
	for j := 1; j <= SuggestPerCall; j++ {
		if c, ok := row[j].(*CellError); !ok || c.Message != `series "MSTF" not found; did you mean MSFT?` {
			t.Fatalf("column %d: %s", j, showCell(row[j]))
		}
	}
	if c, ok := row[SuggestPerCall+1].(*CellError); !ok || c.Message != `series "MSTF" not found` {
		t.Fatalf("past the budget: %s", showCell(row[SuggestPerCall+1]))
	}
	if row[SuggestPerCall+2] != 86.39 {
		t.Fatalf("ibm past the budget: %s", showCell(row[SuggestPerCall+2]))
	}
	// ES.Latest and ES.Info have their own budget per call.
	r = e.Call("ES.Latest", []any{ids})
	if c, ok := r.Value[SuggestPerCall][0].(*CellError); !ok || c.Message != `series "MSTF" not found` {
		t.Fatalf("ES.Latest past the budget: %v", show(r.Value))
	}
	if c, ok := r.Value[0][0].(*CellError); !ok || c.Message != `series "MSTF" not found; did you mean MSFT?` {
		t.Fatalf("ES.Latest: %v", show(r.Value))
	}
}
