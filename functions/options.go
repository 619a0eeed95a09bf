package functions

import (
	"fmt"
	"strconv"
	"strings"
)

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

func (a Agg) String() string {
	if int(a) < len(aggNames) {
		return aggNames[a]
	}
	return "Agg(" + strconv.Itoa(int(a)) + ")"
}

// Fill says what a date without a value shows in a series' column.
type Fill uint8

const (
	FillNone Fill = iota // an empty cell (nil)
	FillPrev             // the series' previous value in the result, if any
	FillNA               // a #N/A error cell
)

var fillNames = [...]string{"none", "prev", "na"}

func (f Fill) String() string {
	if int(f) < len(fillNames) {
		return fillNames[f]
	}
	return "Fill(" + strconv.Itoa(int(f)) + ")"
}

// MaxLast bounds last=N; any N above the number of rows simply keeps them all.
const MaxLast = 1_000_000_000

// Options are ES.Get's key=value options. The zero value is not the default: use
// DefaultOptions (Dates is on unless dates=n).
type Options struct {
	Per       byte // 0: as stored; else 'D', 'W', 'M', 'Q' or 'A' (weeks start Monday)
	Agg       Agg  // with Per; AggLast by default
	Fill      Fill
	Desc      bool // order=desc: newest first
	Headers   bool // a first row "Date", id, id, ...
	Dates     bool // the date column (true by default)
	Transpose bool // one row per series instead of one column
	Last      int  // keep only the Last most recent dates; 0 keeps all
}

// DefaultOptions returns the options of an ES.Get without any.
func DefaultOptions() Options { return Options{Dates: true} }

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
	switch key {
	case "per", "period":
		key = "per"
		switch lv {
		case "d", "day", "daily":
			o.Per = 'D'
		case "w", "week", "weekly":
			o.Per = 'W'
		case "m", "month", "monthly":
			o.Per = 'M'
		case "q", "quarter", "quarterly":
			o.Per = 'Q'
		case "a", "y", "year", "yearly", "annual", "annually":
			o.Per = 'A'
		default:
			return bad("D, W, M, Q or A")
		}
	case "agg", "aggregate":
		key = "agg"
		switch lv {
		case "last":
			o.Agg = AggLast
		case "first":
			o.Agg = AggFirst
		case "avg", "mean", "average":
			o.Agg = AggAvg
		case "sum":
			o.Agg = AggSum
		case "min":
			o.Agg = AggMin
		case "max":
			o.Agg = AggMax
		default:
			return bad("last, first, avg, sum, min or max")
		}
	case "fill":
		switch lv {
		case "none":
			o.Fill = FillNone
		case "prev", "previous":
			o.Fill = FillPrev
		case "na", "n/a":
			o.Fill = FillNA
		default:
			return bad("none, prev or na")
		}
	case "order", "sort":
		key = "order"
		switch lv {
		case "asc", "ascending":
			o.Desc = false
		case "desc", "descending":
			o.Desc = true
		default:
			return bad("asc or desc")
		}
	case "headers", "header":
		key = "headers"
		b, ok := parseYesNo(lv)
		if !ok {
			return bad("y or n")
		}
		o.Headers = b
	case "dates", "date":
		key = "dates"
		b, ok := parseYesNo(lv)
		if !ok {
			return bad("y or n")
		}
		o.Dates = b
	case "transpose":
		b, ok := parseYesNo(lv)
		if !ok {
			return bad("y or n")
		}
		o.Transpose = b
	case "last":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxLast {
			return bad(fmt.Sprintf("a whole number from 1 to %d", MaxLast))
		}
		o.Last = n
	default:
		return key, fmt.Errorf("option %s: unknown; want per, agg, fill, order, headers, dates, transpose or last", clip(key))
	}
	return key, nil
}

func parseYesNo(s string) (bool, bool) {
	switch s {
	case "y", "yes", "true", "1", "on":
		return true, true
	case "n", "no", "false", "0", "off":
		return false, true
	}
	return false, false
}
