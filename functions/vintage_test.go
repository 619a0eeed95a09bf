package functions

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"testing"
	"time"
)

func TestParseAsOf(t *testing.T) {
	ok := []struct {
		in   string
		kind AsOfKind
		text string
		time int64
	}{
		{"2026-10-01", AsOfDate, "2026-10-01", time.Date(2026, 10, 1, 23, 59, 59, 0, time.UTC).Unix()},
		{" 2026-10-01 ", AsOfDate, "2026-10-01", time.Date(2026, 10, 1, 23, 59, 59, 0, time.UTC).Unix()},
		{"2026-10-01T12:30:00+02:00", AsOfTime, "2026-10-01T10:30:00Z", time.Date(2026, 10, 1, 10, 30, 0, 0, time.UTC).Unix()},
		{"2026-10-01T12:30:00.75Z", AsOfTime, "2026-10-01T12:30:00Z", time.Date(2026, 10, 1, 12, 30, 0, 0, time.UTC).Unix()},
		{"e3-s120-0123456789ab", AsOfSnapshot, "e3-s120-0123456789ab", 0},
		{"8412345678901234567", AsOfIceberg, "8412345678901234567", 0},
		{"q3-close", AsOfTag, "q3-close", 0},
		{"Release_2.1", AsOfTag, "Release_2.1", 0},
	}
	for _, c := range ok {
		a, err := ParseAsOf(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if a.Kind != c.kind || a.Text != c.text || a.Time != c.time {
			t.Errorf("%q: got %v %q %d, want %v %q %d", c.in, a.Kind, a.Text, a.Time, c.kind, c.text, c.time)
		}
		if a.Stable() != (c.kind != AsOfDate && c.kind != AsOfTime) {
			t.Errorf("%q: Stable() = %v", c.in, a.Stable())
		}
	}
	for _, in := range []string{"", "  ", "2026-13-01", "2026-02-30", "2026-10-01T25:00:00Z", "2026-10-01 12:00", "0", "-5",
		"99999999999999999999", "1e9", "_tag", "tag with space", "tag/slash", "x" + string(make([]byte, 70)), "2026-10", "héllo"} {
		_, err := ParseAsOf(in)
		if !errors.Is(err, ErrBadAsOf) {
			t.Errorf("%q: got %v, want ErrBadAsOf", in, err)
		}
	}
}

// vintageMem is a VintageSource over memSource: each vintage is a scale factor of the
// current values (vintage i holds value * (1 + i/10)), committed a day apart from
// 2010-01-01; a series not in `in` is missing from every vintage.
type vintageMem struct {
	*memSource
	vintages []Vintage
	err      error // returned by every call when set
	asked    []AsOf
}

func (v *vintageMem) pick(a AsOf) (int, error) {
	v.asked = append(v.asked, a)
	if v.err != nil {
		return 0, v.err
	}
	for i := len(v.vintages) - 1; i >= 0; i-- {
		vi := v.vintages[i]
		switch a.Kind {
		case AsOfSnapshot:
			if vi.Snapshot == a.Text {
				return i, nil
			}
		case AsOfDate, AsOfTime:
			if vi.CommittedAt.Unix() <= a.Time {
				return i, nil
			}
		}
	}
	if a.Kind == AsOfDate || a.Kind == AsOfTime {
		return 0, &VintageError{AsOf: a.Text, Err: ErrBeforeFirstVintage}
	}
	return 0, &VintageError{AsOf: a.Text, Err: ErrUnknownVintage}
}

func (v *vintageMem) GetAsOf(id string, a AsOf, from, to int64) ([]int64, []float64, error) {
	i, err := v.pick(a)
	if err != nil {
		return nil, nil, err
	}
	p, vals, err := v.memSource.Get(id, from, to)
	for k := range vals {
		vals[k] *= 1 + float64(i)/10
	}
	return p, vals, err
}

func (v *vintageMem) Revisions(id string, period int64) ([]Revision, error) {
	if v.err != nil {
		return nil, v.err
	}
	p, vals, err := v.memSource.Get(id, period, period)
	if err != nil {
		return nil, err
	}
	var out []Revision
	for i, vi := range v.vintages {
		r := Revision{Vintage: vi}
		if len(p) == 1 && i > 0 { // vintage 0 did not have the period yet
			r.Value, r.Present = vals[0]*(1+float64(i)/10), true
		}
		out = append(out, r)
	}
	return out, nil
}

func newVintageEngine(t testing.TB) (*Engine, *vintageMem) {
	v := &vintageMem{memSource: loadSamples(t)}
	for i := range 3 {
		v.vintages = append(v.vintages, Vintage{Snapshot: fmt.Sprintf("e1-s%d-0123456789ab", i*10),
			CommittedAt: time.Date(2010, 1, 1+i, 6, 0, 0, 0, time.UTC)})
	}
	return &Engine{Src: v, Now: func() time.Time { return testNow }}, v
}

func TestGetAsOf(t *testing.T) {
	e, v := newVintageEngine(t)
	value := func(msg string) *CellError { return &CellError{Code: CodeValue, Message: msg} }
	runCases(t, e, []callCase{
		{name: "current", args: []any{"MSFT", "2000-01", "2000-02"}, want: [][]any{{36526, 39.81}, {36557, 36.35}}},
		{name: "asof date picks vintage 1", args: []any{"MSFT", "2000-01", "2000-02", "asof=2010-01-02"},
			want: [][]any{{36526, 39.81 * 1.1}, {36557, 36.35 * 1.1}}},
		{name: "asof snapshot id", args: []any{"MSFT", "2000-01", "2000-01", "asof=e1-s20-0123456789ab"}, want: [][]any{{36526, 39.81 * 1.2}}},
		{name: "asof with other options", args: []any{"MSFT", "2000", "2000", "per=A; asof=2010-01-01T06:00:00Z"}, want: [][]any{{36526, 17.65}}},
		{name: "asof and fill=prev look back in the vintage", args: []any{"MSFT,Renewables", "2008-02", "2008-02", "fill=prev", "asof=e1-s10-0123456789ab"},
			want: [][]any{{39479, 26.07 * 1.1, 5070 * 1.1}}},
		{name: "bad when", args: []any{"MSFT", "asof=2026-13-01"},
			wantErr: value("option asof=2026-13-01: not a date: " + ErrBadAsOf.Error())},
		{name: "empty when", args: []any{"MSFT", "asof="}, wantErr: value("option asof=: " + ErrBadAsOf.Error())},
		{name: "unknown vintage", args: []any{"MSFT", "asof=e9-s9-0123456789ab"},
			wantErr: na("MSFT: vintage asof=e9-s9-0123456789ab: unknown vintage")},
		{name: "before first", args: []any{"MSFT", "asof=2009-12-31"},
			wantErr: na("MSFT: vintage asof=2009-12-31: before the first vintage")},
		{name: "unknown series in a vintage", args: []any{"NOPE", "asof=2010-01-02"}, wantErr: na(`series "NOPE" not found`)},
	})
	// Options are read before anything is fetched: a bad WHEN asks the source nothing.
	v.asked = nil
	e.Call("ES.Get", []any{"MSFT", "asof=not a tag"})
	if len(v.asked) != 0 {
		t.Fatalf("a bad asof= reached the source: %v", v.asked)
	}
	v.err = &VintageError{AsOf: "2010-01-02", Err: ErrVintageUnreachable}
	r := e.Call("ES.Get", []any{"MSFT", "asof=2010-01-02"})
	if r.Err == nil || r.Err.Code != CodeNA || r.Err.Message != "MSFT: vintage asof=2010-01-02 is not held on this computer and the server is unreachable" {
		t.Fatalf("offline: %+v", r.Err)
	}
}

func TestGetAsOfWithoutVintages(t *testing.T) {
	e := newEngine(t) // memSource is not a VintageSource
	r := e.Call("ES.Get", []any{"MSFT", "asof=2010-01-02"})
	if r.Err == nil || r.Err.Code != CodeNA || r.Err.Message != "MSFT: vintage asof=2010-01-02: "+ErrNoVintageSource.Error() {
		t.Fatalf("got %+v", r.Err)
	}
	r = e.Call("ES.Revisions", []any{"MSFT", "2000-01"})
	if r.Err == nil || r.Err.Code != CodeNA || r.Err.Message != "MSFT: vintages: "+ErrNoVintageSource.Error() {
		t.Fatalf("got %+v", r.Err)
	}
	// The frame (xlsx export) reads as of too.
	if _, err := e.Frame([]string{"MSFT"}, MinTime, MaxTime, Options{Dates: true, AsOf: AsOf{Kind: AsOfTag, Text: "x"}}); !errors.Is(err, ErrNoVintageSource) {
		t.Fatalf("frame: %v", err)
	}
}

func TestRevisions(t *testing.T) {
	e, v := newVintageEngine(t)
	value := func(msg string) *CellError { return &CellError{Code: CodeValue, Message: msg} }
	at := func(i int) float64 { return ExcelSerial(v.vintages[i].CommittedAt.Unix()) }
	runCases(t, e, []callCase{
		{name: "monthly", fn: "ES.Revisions", args: []any{"MSFT", "2000-01"},
			want: [][]any{{"Vintage", "MSFT"}, {at(0), nil}, {at(1), 39.81 * 1.1}, {at(2), 39.81 * 1.2}}},
		{name: "a day inside the month is its bucket", fn: "revisions", args: []any{"msft", "2000-01-17"},
			want: [][]any{{"Vintage", "msft"}, {at(0), nil}, {at(1), 39.81 * 1.1}, {at(2), 39.81 * 1.2}}},
		{name: "serial period", fn: "ES.REVISIONS", args: []any{"Renewables", 39448.0},
			want: [][]any{{"Vintage", "Renewables"}, {at(0), nil}, {at(1), 5070 * 1.1}, {at(2), 5070 * 1.2}}},
		{name: "no period", fn: "ES.Revisions", args: []any{"MSFT"}, wantErr: value("period: missing; use ES.Revisions(series, period)")},
		{name: "bad period", fn: "ES.Revisions", args: []any{"MSFT", "soon"},
			wantErr: value(`period: cannot read date "soon"`)},
		{name: "two series", fn: "ES.Revisions", args: []any{"MSFT,IBM", "2000-01"}, wantErr: value("series: ES.Revisions takes one series, got 2")},
		{name: "too many", fn: "ES.Revisions", args: []any{"MSFT", "2000-01", "x"},
			wantErr: value("argument 3: ES.Revisions takes at most 2 arguments (series, period), got 3")},
		{name: "unknown series", fn: "ES.Revisions", args: []any{"NOPE", "2000-01"}, wantErr: na(`series "NOPE" not found`)},
	})
	v.err = &VintageError{Err: ErrVintageUnreachable}
	r := e.Call("ES.Revisions", []any{"MSFT", "2000-01"})
	if r.Err == nil || r.Err.Code != CodeNA || r.Err.Message != "MSFT: vintages: not held on this computer and the server is unreachable" {
		t.Fatalf("offline: %+v", r.Err)
	}
	if math.IsNaN(at(0)) {
		t.Fatal("serial")
	}
}

// The hand-written checks of WHEN's forms say what these say.
var (
	esSnapshotRE = regexp.MustCompile(`^e[0-9]+-s[0-9]+-[0-9a-f]{12}$`)
	tagRE        = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,63}$`)
	dateOnlyRE   = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)
)

func FuzzAsOfForms(f *testing.F) {
	for _, s := range []string{"2026-10-01", "2026-1-01", "e3-s120-0123456789ab", "e-s1-0123456789ab", "e3-s120-0123456789aB",
		"e3-s120-0123456789abc", "q3-close", "Q", "a_b.c-d", "1tag", "", "2026-10-01T00:00:00Z", "e12-s3-ffffffffffff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isDateOnly(s), dateOnlyRE.MatchString(s); got != want {
			t.Fatalf("isDateOnly(%q) = %v, regexp %v", s, got, want)
		}
		if got, want := isESSnapshot(s), esSnapshotRE.MatchString(s); got != want {
			t.Fatalf("isESSnapshot(%q) = %v, regexp %v", s, got, want)
		}
		if got, want := isTag(s), tagRE.MatchString(s); got != want {
			t.Fatalf("isTag(%q) = %v, regexp %v", s, got, want)
		}
		a, err := ParseAsOf(s)
		if (err == nil) == errors.Is(err, ErrBadAsOf) || (err == nil && (a.Kind == 0 || a.Text == "")) {
			t.Fatalf("ParseAsOf(%q) = %+v, %v", s, a, err)
		}
	})
}
