package functions

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// enumName is the String of the option enums: names[v], or typ(v) for a
// value without a name.
func enumName(names []string, v uint8, typ string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return typ + "(" + strconv.Itoa(int(v)) + ")"
}

// Agg says how the points of one re-sampling bucket become one value.
type Agg uint8

const (
	AggLast Agg = iota // the default, as Bloomberg's BDH reports a period's close
	AggFirst
	AggAvg
	AggSum
	AggMin
	AggMax
)

var aggNames = [...]string{"last", "first", "avg", "sum", "min", "max"}

func (a Agg) String() string { return enumName(aggNames[:], uint8(a), "Agg") }

// Fill says what a date without a value shows in a series' column.
type Fill uint8

const (
	FillNone Fill = iota // an empty cell (nil)
	FillPrev             // the series' previous value in the result, if any
	FillNA               // a #N/A error cell
	FillZero             // 0
)

var fillNames = [...]string{"none", "prev", "na", "zero"}

func (f Fill) String() string { return enumName(fillNames[:], uint8(f), "Fill") }

// Change says how a value compares with an earlier one (chg=, yoy=).
type Change uint8

const (
	ChangeNone Change = iota
	ChangeDiff        // x - earlier
	ChangePct         // (x / earlier - 1) * 100: percent
	ChangeLog         // ln(x / earlier): a log return (chg= only)
)

var changeNames = [...]string{"none", "diff", "pct", "log"}

func (c Change) String() string { return enumName(changeNames[:], uint8(c), "Change") }

// Days is the calendar days=all|weekdays up-samples onto.
type Days uint8

const (
	DaysAsStored Days = iota // no calendar: the series' own dates (the default)
	DaysAll                  // every day (or week, month, ... with per=)
	DaysWeekdays             // Monday to Friday; a weekend point shows on the Monday after
)

var daysNames = [...]string{"stored", "all", "weekdays"}

func (d Days) String() string { return enumName(daysNames[:], uint8(d), "Days") }

// HeaderRows says which header rows ES.Get shows, a set of bits.
type HeaderRows uint8

const (
	HeaderID   HeaderRows = 1 << iota // the ids as typed (headers=y)
	HeaderName                        // the series' names
	HeaderUnit                        // their units
	HeaderAll  = HeaderID | HeaderName | HeaderUnit
)

// Count is how many header rows h shows.
func (h HeaderRows) Count() int {
	return int(h&HeaderID) + int(h&HeaderName)>>1 + int(h&HeaderUnit)>>2
}

// Limits of the option values.
const (
	MaxLast = 1_000_000_000 // last=N; any N above the number of rows keeps them all
	MaxMA   = 10_000        // ma=N
)

// Options are ES.Get's key=value options. The zero value is not the default: use
// DefaultOptions (Dates is on unless dates=n).
//
// They apply in this order: the range (start, end), re-sampling (Per, Agg, Days),
// alignment of several series on one date column, Fill, the transforms (Chg, YoY, MA,
// Rebase, Scale, in that order), then Last and the layout (Desc, Headers, Dates,
// Transpose). Changes, moving averages and Fill=prev look back before the start for
// the points they need.
type Options struct {
	Per       byte // 0: as stored; else 'D', 'W', 'M', 'Q' or 'A' (weeks start Monday)
	Agg       Agg  // with Per; AggLast by default
	Days      Days // with Per (days= alone implies per=D): up-sample onto a calendar
	Fill      Fill
	Chg       Change // change from the previous point: diff, pct or log
	YoY       Change // change from the same period a year earlier: diff or pct
	MA        int    // trailing mean of MA points; 0: none
	Rebase    float64
	HasRebase bool // rebase=X: values scaled so that the first in the range is Rebase
	Scale     float64
	HasScale  bool       // scale=X: values multiplied by Scale
	Desc      bool       // order=desc: newest first
	Headers   HeaderRows // header rows: ids, names, units
	Dates     bool       // the date column (true by default)
	Transpose bool       // one row per series instead of one column
	Last      int        // keep only the Last most recent dates; 0 keeps all
	// AsOf (asof=WHEN) reads the series as the vintage WHEN names held them; the zero
	// AsOf reads the current data. See ParseAsOf and VintageSource.
	AsOf AsOf
}

// DefaultOptions returns the options of an ES.Get without any.
func DefaultOptions() Options { return Options{Dates: true} }

// transforms reports whether o changes values after alignment (chg, yoy, ma, rebase,
// scale).
func (o *Options) transforms() bool {
	return o.Chg != ChangeNone || o.YoY != ChangeNone || o.MA > 0 || o.HasRebase || o.HasScale
}

// ParseOptions reads ES.Get's option arguments: each is nil (skipped), a string holding
// one or more key=value pairs separated by ';', ',' or spaces (spaces around '=' are
// allowed), or a range ([][]any or []any) of such strings. Keys and values ignore case;
// a later key overrides an earlier one. Errors name the option: `option per=X: want D,
// W, M, Q or A`.
func ParseOptions(args []any) (Options, error) {
	o := DefaultOptions()
	aggSet := ""
	for _, a := range args {
		if err := forEachOptionCell(a, func(s string) error {
			return splitOptions(s, func(tok string) error {
				k, err := o.set(tok)
				if k == "agg" {
					aggSet = tok
				}
				return err
			})
		}); err != nil {
			return o, err
		}
	}
	if aggSet != "" && o.Per == 0 {
		return o, fmt.Errorf("option %s: needs per=D, W, M, Q or A", clip(strings.TrimSpace(aggSet)))
	}
	if o.Days != DaysAsStored && o.Per == 0 {
		o.Per = 'D'
	}
	return o, nil
}

// forEachOptionCell calls fn for every string in a, which is a scalar or a range.
func forEachOptionCell(a any, fn func(string) error) error {
	switch v := a.(type) {
	case nil:
		return nil
	case string:
		return fn(v)
	case [][]any:
		for _, row := range v {
			for _, c := range row {
				if err := forEachOptionCell(scalarOnly(c), fn); err != nil {
					return err
				}
			}
		}
		return nil
	case []any:
		for _, c := range v {
			if err := forEachOptionCell(scalarOnly(c), fn); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("option %s: want key=value text", describe(a))
}

// scalarOnly keeps a range inside a range from recursing: it becomes an error value.
func scalarOnly(c any) any {
	switch c.(type) {
	case [][]any, []any:
		return rangeInRange{}
	}
	return c
}

type rangeInRange struct{}

func isOptionSep(c byte) bool { return c == ';' || c == ',' || isSpace(c) }
func isSpace(c byte) bool     { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// splitOptions cuts s into key=value tokens. Spaces separate tokens except next to '=',
// so "per = M last=3" is two tokens.
func splitOptions(s string, fn func(string) error) error {
	n := len(s)
	for i := 0; i < n; {
		for i < n && isOptionSep(s[i]) {
			i++
		}
		if i >= n {
			break
		}
		start := i
		var last byte // last non-space byte of the token so far
		for i < n {
			c := s[i]
			if c == ';' || c == ',' {
				break
			}
			if isSpace(c) {
				j := i
				for j < n && isSpace(s[j]) {
					j++
				}
				if last == '=' || (j < n && s[j] == '=') {
					i = j
					continue
				}
				break
			}
			last = c
			i++
		}
		if err := fn(s[start:i]); err != nil {
			return err
		}
	}
	return nil
}

// set applies one key=value token and returns the canonical key it set.
func (o *Options) set(tok string) (string, error) {
	k, v, ok := strings.Cut(tok, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return "", fmt.Errorf("option %q: want key=value, e.g. per=M", clip(tok))
	}
	key := strings.ToLower(strings.TrimSpace(k))
	v = strings.TrimSpace(v)
	lv := strings.ToLower(v)
	bad := func(want string) (string, error) {
		return key, fmt.Errorf("option %s=%s: want %s", clip(key), clip(v), want)
	}
	if e, ok := enumByKey[key]; ok {
		key = e.keys[0]
		if !e.set(o, lv) {
			return bad(e.want)
		}
		return key, nil
	}
	switch key {
	case "ma":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxMA {
			return bad(fmt.Sprintf("a whole number from 1 to %d", MaxMA))
		}
		o.MA = n
		if n == 1 { // the mean of one point is the point
			o.MA = 0
		}
	case "rebase", "scale":
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || (key == "rebase" && x == 0) {
			if key == "rebase" {
				return bad("a number other than 0, e.g. 100")
			}
			return bad("a number, e.g. 0.001")
		}
		if key == "rebase" {
			o.Rebase, o.HasRebase = x, true
		} else {
			o.Scale, o.HasScale = x, true
		}
	case "headers", "header":
		key = "headers"
		h, ok := parseHeaders(lv)
		if !ok {
			return bad("id, name, unit, all (or several joined by +), y or n")
		}
		o.Headers = h
	case "asof", "as_of", "vintage":
		a, err := ParseAsOf(v)
		if err != nil {
			return key, fmt.Errorf("option %w", err)
		}
		o.AsOf = a
	case "last":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxLast {
			return bad(fmt.Sprintf("a whole number from 1 to %d", MaxLast))
		}
		o.Last = n
	default:
		return key, fmt.Errorf("option %s: unknown%s; want per, agg, days, fill, chg, yoy, ma, rebase, scale, order, headers, dates, transpose, last or asof", clip(key), DidYouMean(Nearest(key, optionKeys, 1)))
	}
	return key, nil
}

// choice is one value of an option and the words (lower case) that name it.
type choice[T any] struct {
	v     T
	words []string
}

// wordMap is an option's values by the words that name them, made once
// from its choices (a lookup per option parsed, not a scan).
func wordMap[T any](cs []choice[T]) map[string]T {
	m := map[string]T{}
	for _, c := range cs {
		for _, w := range c.words {
			m[w] = c.v
		}
	}
	return m
}

// choose sets *dst to the value that word names and reports whether one
// does.
func choose[T any](word string, words map[string]T, dst *T) bool {
	v, ok := words[word]
	if ok {
		*dst = v
	}
	return ok
}

// The words each enumerated option takes.
var (
	perWords = wordMap([]choice[byte]{
		{'D', []string{"d", "day", "daily"}}, {'W', []string{"w", "week", "weekly"}},
		{'M', []string{"m", "month", "monthly"}}, {'Q', []string{"q", "quarter", "quarterly"}},
		{'A', []string{"a", "y", "year", "yearly", "annual", "annually"}},
	})
	aggWords = wordMap([]choice[Agg]{
		{AggLast, []string{"last"}}, {AggFirst, []string{"first"}}, {AggAvg, []string{"avg", "mean", "average"}},
		{AggSum, []string{"sum"}}, {AggMin, []string{"min"}}, {AggMax, []string{"max"}},
	})
	fillWords = wordMap([]choice[Fill]{
		{FillNone, []string{"none"}}, {FillPrev, []string{"prev", "previous"}},
		{FillNA, []string{"na", "n/a"}}, {FillZero, []string{"zero", "0"}},
	})
	daysWords = wordMap([]choice[Days]{
		{DaysAll, []string{"all", "c", "calendar"}}, {DaysWeekdays, []string{"weekdays", "weekday", "w", "business", "b"}},
	})
	chgWords = wordMap([]choice[Change]{
		{ChangeDiff, []string{"diff"}}, {ChangePct, []string{"pct", "%"}}, {ChangeLog, []string{"log"}}, {ChangeNone, []string{"none"}},
	})
	yoyWords = wordMap([]choice[Change]{
		{ChangeDiff, []string{"diff"}}, {ChangePct, []string{"pct", "%"}}, {ChangeNone, []string{"none"}},
	})
	orderWords = wordMap([]choice[bool]{
		{false, []string{"asc", "ascending"}}, {true, []string{"desc", "descending"}},
	})
	yesNoWords = wordMap([]choice[bool]{
		{true, []string{"y", "yes", "true", "1", "on"}}, {false, []string{"n", "no", "false", "0", "off"}},
	})
)

// enumOptions are the options whose value is one of a few words: the keys
// that name one (the canonical key first), what the error says it wants,
// and how a word sets it.
var enumOptions = []enumOption{
	{[]string{"per", "period"}, "D, W, M, Q or A", func(o *Options, w string) bool { return choose(w, perWords, &o.Per) }},
	{[]string{"agg", "aggregate"}, "last, first, avg, sum, min or max", func(o *Options, w string) bool { return choose(w, aggWords, &o.Agg) }},
	{[]string{"fill"}, "none, prev, na or zero", func(o *Options, w string) bool { return choose(w, fillWords, &o.Fill) }},
	{[]string{"days", "calendar"}, "all or weekdays", func(o *Options, w string) bool { return choose(w, daysWords, &o.Days) }},
	{[]string{"chg", "change"}, "diff, pct or log", func(o *Options, w string) bool { return choose(w, chgWords, &o.Chg) }},
	{[]string{"yoy"}, "diff or pct", func(o *Options, w string) bool { return choose(w, yoyWords, &o.YoY) }},
	{[]string{"order", "sort"}, "asc or desc", func(o *Options, w string) bool { return choose(w, orderWords, &o.Desc) }},
	{[]string{"dates", "date"}, "y or n", func(o *Options, w string) bool { return choose(w, yesNoWords, &o.Dates) }},
	{[]string{"transpose"}, "y or n", func(o *Options, w string) bool { return choose(w, yesNoWords, &o.Transpose) }},
}

type enumOption struct {
	keys []string
	want string
	set  func(o *Options, word string) bool
}

// enumByKey is enumOptions by each of their keys.
var enumByKey = func() map[string]*enumOption {
	m := map[string]*enumOption{}
	for i := range enumOptions {
		for _, k := range enumOptions[i].keys {
			m[k] = &enumOptions[i]
		}
	}
	return m
}()

var optionKeys = []string{"per", "agg", "days", "fill", "chg", "yoy", "ma", "rebase", "scale", "order", "headers", "dates", "transpose", "last", "asof"}

// parseHeaders reads headers=: y/n, or id, name, unit and all joined by '+'.
func parseHeaders(s string) (HeaderRows, bool) {
	if b, ok := parseYesNo(s); ok {
		if b {
			return HeaderID, true
		}
		return 0, true
	}
	var h HeaderRows
	for part := range strings.SplitSeq(s, "+") {
		switch strings.TrimSpace(part) {
		case "id", "ids":
			h |= HeaderID
		case "name", "names":
			h |= HeaderName
		case "unit", "units":
			h |= HeaderUnit
		case "all":
			h |= HeaderAll
		default:
			return 0, false
		}
	}
	return h, true
}

func parseYesNo(s string) (b, ok bool) {
	ok = choose(s, yesNoWords, &b)
	return b, ok
}
