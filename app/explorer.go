package app

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/energyscope/energyscope/functions"
	"github.com/energyscope/energyscope/internal/wiring"
)

// ExplorerView is bound for the Explorer: search and browse the series,
// one series' details and points, several compared on one chart, and the
// =ES.Get formula that gives them in Excel (browse.go has the facets).
type ExplorerView struct{ *core }

// Search finds series by id or name across every dataset.
func (v *ExplorerView) Search(q string) SearchResult {
	out := SearchResult{Query: q, Hits: []SearchHit{}}
	st, err := v.store()
	if err != nil {
		out.Error = words(err)
		return out
	}
	if strings.TrimSpace(q) == "" {
		return out
	}
	start := time.Now()
	hits, err := st.Search(q, SearchLimit+1)
	if err != nil {
		out.Error = words(err)
		return out
	}
	if len(hits) > SearchLimit {
		hits, out.More = hits[:SearchLimit], true
	}
	for _, h := range hits {
		hit := SearchHit{ID: h.ID, Dataset: h.Dataset, Name: h.Name}
		if in, err := st.Info(h.Dataset + ":" + h.ID); err == nil {
			hit.Unit, hit.Frequency, hit.Source = in.Unit, string(in.Frequency), in.Source
		}
		out.Hits = append(out.Hits, hit)
	}
	out.Micros = time.Since(start).Microseconds()
	return out
}

// Info describes one series ("id" or "dataset:id").
func (v *ExplorerView) Info(id string) Info {
	id = strings.TrimSpace(id)
	out := Info{ID: id, Latest: Float(math.NaN())}
	st, err := v.store()
	if err != nil {
		out.Error = words(err)
		return out
	}
	in, err := st.Info(id)
	if err != nil {
		out.Error = seriesWords(id, err)
		return out
	}
	out = Info{
		ID: in.ID, Dataset: in.Dataset, Name: in.Name, Unit: in.Unit, Source: in.Source,
		Frequency: string(in.Frequency), FreqName: freqName(string(in.Frequency)),
		Count: in.Count, Latest: Float(in.LatestValue), SnapshotID: in.SnapshotID, Seq: in.Seq, Pending: in.Pending,
		UpdatedMS: in.Updated * 1000,
	}
	if in.Count > 0 {
		out.First, out.Last = in.First, in.Last
	}
	out.Ref = in.ID
	if bare, err := st.Info(in.ID); err != nil || bare.Dataset != in.Dataset {
		out.Ref = in.Dataset + ":" + in.ID
	}
	out.Formula = formulaText(out.Ref, "", "", nil)
	return out
}

// getArgs reads dates and options as ES.Get does.
func (c *core) getArgs(from, to string, o GetOptions) (int64, int64, functions.Options, error) {
	now := c.opts.Now()
	f, err := functions.ParseDate(from, now, false)
	if err != nil {
		return 0, 0, functions.Options{}, fmt.Errorf("From: %w", err)
	}
	t, err := functions.ParseDate(to, now, true)
	if err != nil {
		return 0, 0, functions.Options{}, fmt.Errorf("To: %w", err)
	}
	if f > t {
		return 0, 0, functions.Options{}, fmt.Errorf("the start %s is after the end %s", strings.TrimSpace(from), strings.TrimSpace(to))
	}
	opts, err := functions.ParseOptions([]any{optionList(o)})
	if err != nil {
		return 0, 0, functions.Options{}, err
	}
	return f, t, opts, nil
}

// optionList is o as ES.Get's key=value arguments, in a fixed order.
func optionList(o GetOptions) []any {
	var out []any
	add := func(k, v string) {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, k+"="+v)
		}
	}
	add("per", o.Per)
	if strings.TrimSpace(o.Per) != "" && !strings.EqualFold(strings.TrimSpace(o.Agg), "last") {
		add("agg", o.Agg)
	}
	if !strings.EqualFold(strings.TrimSpace(o.Fill), "none") {
		add("fill", o.Fill)
	}
	if o.Desc {
		add("order", "desc")
	}
	if o.Headers {
		add("headers", "y")
	}
	if o.Last > 0 {
		add("last", fmt.Sprint(o.Last))
	}
	return out
}

// Series returns the points of series id in [from, to] (any date form
// ES.Get reads; empty is unbounded), re-sampled to per (D W M Q A, empty
// as stored) with agg, exactly as ES.Get computes them.
func (v *ExplorerView) Series(id, from, to, per, agg string) Series {
	id = strings.TrimSpace(id)
	out := Series{ID: id, Per: strings.ToUpper(strings.TrimSpace(per)), Agg: strings.ToLower(strings.TrimSpace(agg)), Times: []int64{}, Values: Floats{}}
	st, err := v.store()
	if err != nil {
		out.Error = words(err)
		return out
	}
	if id == "" {
		out.Error = "Choose a series first."
		return out
	}
	in, err := st.Info(id)
	if err != nil {
		out.Error = seriesWords(id, err)
		return out
	}
	out.ID, out.Name, out.Unit, out.Frequency = in.ID, in.Name, in.Unit, string(in.Frequency)
	f, t, opts, err := v.getArgs(from, to, GetOptions{Per: per, Agg: agg})
	if err != nil {
		out.Error = words(err)
		return out
	}
	if opts.Per != 0 {
		out.Frequency = string(opts.Per)
		if out.Agg == "" {
			out.Agg = "last"
		}
	}
	eng := &functions.Engine{Src: wiring.Source{Store: st}, Now: v.opts.Now}
	fr, err := eng.Frame([]string{id}, f, t, opts)
	if errors.Is(err, functions.ErrNoData) {
		out.Note = "No data in this range."
		return out
	} else if err != nil {
		out.Error = seriesWords(id, err)
		return out
	}
	n := min(len(fr.Dates), MaxPoints)
	out.Times = make([]int64, 0, n)
	out.Values = make(Floats, 0, n)
	out.Truncated, out.Note = recent(fr, "points", func(date int64, row []float64) {
		out.Times = append(out.Times, date)
		out.Values = append(out.Values, row[0])
	})
	return out
}

// recent calls row for the most recent MaxPoints dates of fr, oldest
// first, so that the chart and the table stay responsive; when it leaves
// older dates out it says so in note (what names them: "points", "dates").
func recent(fr *functions.Frame, what string, row func(date int64, values []float64)) (truncated bool, note string) {
	n := len(fr.Dates)
	skip := max(n-MaxPoints, 0)
	if skip > 0 {
		note = fmt.Sprintf("Showing the most recent %d of %d %s; narrow the range or choose a coarser frequency.", MaxPoints, n, what)
	}
	fr.Rows(func(i int, date int64, values []float64) error {
		if i >= skip {
			row(date, values)
		}
		return nil
	})
	return skip > 0, note
}

// MaxCompare is the most series the Explorer compares on one chart.
const MaxCompare = 8

// Compare is series refs ("id" or "dataset:id", at most MaxCompare) over the
// same dates and options, aligned on the union of their dates as ES.Get
// aligns them: one column of values per series, nulls where a series has no
// point. The chart draws the first unit on the left axis and the second on
// the right; Units lists them in that order.
func (v *ExplorerView) Compare(refs []string, from, to, per, agg string) Comparison {
	out := Comparison{Times: []int64{}, Series: []Compared{}, Units: []string{}}
	st, err := v.store()
	if err != nil {
		out.Error = words(err)
		return out
	}
	var ids []string
	seen := map[string]bool{}
	for _, r := range refs {
		if r = strings.TrimSpace(r); r != "" && !seen[r] {
			seen[r] = true
			ids = append(ids, r)
		}
	}
	switch {
	case len(ids) == 0:
		out.Error = "Choose a series first."
		return out
	case len(ids) > MaxCompare:
		out.Error = fmt.Sprintf("%d series: the chart compares at most %d.", len(ids), MaxCompare)
		return out
	}
	f, t, opts, err := v.getArgs(from, to, GetOptions{Per: per, Agg: agg})
	if err != nil {
		out.Error = words(err)
		return out
	}
	for _, id := range ids {
		in, err := st.Info(id)
		if err != nil {
			out.Error = seriesWords(id, err)
			return out
		}
		c := Compared{Ref: id, ID: in.ID, Dataset: in.Dataset, Name: in.Name, Unit: in.Unit, Values: Floats{}}
		if !slices.Contains(out.Units, in.Unit) {
			out.Units = append(out.Units, in.Unit)
		}
		c.Axis = min(slices.Index(out.Units, in.Unit), 1)
		out.Series = append(out.Series, c)
	}
	eng := &functions.Engine{Src: wiring.Source{Store: st}, Now: v.opts.Now}
	fr, err := eng.Frame(ids, f, t, opts)
	if errors.Is(err, functions.ErrNoData) {
		out.Note = "No data in this range."
		return out
	} else if err != nil {
		out.Error = words(err)
		return out
	}
	out.Truncated, out.Note = recent(fr, "dates", func(date int64, row []float64) {
		out.Times = append(out.Times, date)
		for j, x := range row {
			out.Series[j].Values = append(out.Series[j].Values, x)
		}
	})
	if len(out.Units) > 2 {
		out.Note = strings.TrimSpace(out.Note + " More than two units: the third and later share the right-hand axis.")
	}
	return out
}

// Formula is the =ES.Get(...) text that gives series id in Excel with
// these dates and options, checked by evaluating it as the bridge would.
func (v *ExplorerView) Formula(id, from, to string, o GetOptions) Formula {
	return v.formula([]string{id}, from, to, o)
}

// CompareFormula is the one =ES.Get(...) that gives the series of a
// comparison side by side, their ids as one comma-separated text.
func (v *ExplorerView) CompareFormula(refs []string, from, to string, o GetOptions) Formula {
	return v.formula(refs, from, to, o)
}

// formula writes and checks =ES.Get for ids (one, or several joined by
// commas, as ES.Get reads a list).
func (c *core) formula(ids []string, from, to string, o GetOptions) Formula {
	var list []string
	for _, id := range ids {
		id = strings.TrimSpace(id)
		if id == "" {
			continue
		}
		if strings.ContainsAny(id, ",;\"") || len(id) > 255 {
			return Formula{Error: fmt.Sprintf("The id %q cannot be typed into a formula as text; type it into a cell and give ES.Get that cell.", id)}
		}
		list = append(list, id)
	}
	if len(list) == 0 {
		return Formula{Error: "Choose a series first."}
	}
	id := strings.Join(list, ",")
	if len(id) > 255 {
		return Formula{Error: "The ids are longer together than a formula's text may be (255 characters); type them into cells and give ES.Get that range."}
	}
	if _, _, _, err := c.getArgs(from, to, o); err != nil {
		return Formula{Error: words(err)}
	}
	st, err := c.store()
	if err != nil {
		return Formula{Error: words(err)}
	}
	out := Formula{Text: formulaText(id, from, to, optionList(o))}
	args := []any{id, nilIfEmpty(from), nilIfEmpty(to)}
	args = append(args, optionList(o)...)
	eng := &functions.Engine{Src: wiring.Source{Store: st}, Now: c.opts.Now}
	res := eng.Call("ES.Get", args)
	if res.Err != nil {
		out.Error = strings.TrimSuffix(res.Err.Message, ".") + "."
		return out
	}
	out.Rows = len(res.Value)
	if out.Rows > 0 {
		out.Cols = len(res.Value[0])
	}
	return out
}

func nilIfEmpty(s string) any {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return strings.TrimSpace(s)
}

// formulaText writes =ES.Get("id", from, to, "opt", ...) the way the
// workbook export writes its formulas: dates as typed (relative ones stay
// relative), trailing empty arguments left out.
func formulaText(id, from, to string, opts []any) string {
	var b strings.Builder
	b.WriteString("=ES.Get(" + quote(id))
	from, to = strings.TrimSpace(from), strings.TrimSpace(to)
	switch {
	case to != "":
		b.WriteString(",")
		if from != "" {
			b.WriteString(quote(from))
		}
		b.WriteString("," + quote(to))
	case from != "":
		b.WriteString("," + quote(from))
	}
	for _, o := range opts {
		b.WriteString("," + quote(o.(string)))
	}
	b.WriteString(")")
	return b.String()
}

// quote writes s as an Excel text literal.
func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func freqName(f string) string {
	switch f {
	case "H":
		return "hourly"
	case "D":
		return "daily"
	case "W":
		return "weekly"
	case "M":
		return "monthly"
	case "Q":
		return "quarterly"
	case "A":
		return "annual"
	}
	return f
}
