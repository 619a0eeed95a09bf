package functions

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Error codes of CellError, as Excel shows them.
const (
	CodeNA    = "#N/A"    // no such series, no data, a missing value with fill=na
	CodeValue = "#VALUE!" // an argument or option that cannot be read
	CodeNum   = "#NUM!"   // a result larger than Engine.MaxCells
)

// Limits.
const (
	DefaultMaxCells = 1_000_000 // Engine.MaxCells when zero
	MaxSeries       = 1000      // ids in one call
	DefaultSearch   = 20        // ES.Search's default limit
	MaxSearch       = 1000      // ES.Search's largest limit
)

// CellError is an Excel error value with a message, which Excel shows on the cell. It is
// the whole result of a failed call (Result.Err) and also a cell of a result (in
// Grid.Other, so in Result.Value too), as *CellError, where one column (a series that
// does not exist, in a multi-series ES.Get) or one cell (fill=na) failed and the rest
// did not.
type CellError struct {
	Code    string // CodeNA, CodeValue or CodeNum
	Message string
}

func (e *CellError) Error() string { return e.Code + " " + e.Message }

func cellErr(code, format string, args ...any) *CellError {
	return &CellError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Result is the answer to one call: either cells that spill from the calling cell
// (every row the same length, at most Engine.MaxCells cells), or Err.
//
// Eval gives the cells as Grid, typed (numbers unboxed); Call gives them also as Value,
// rows of boxed cells: float64 (numbers and dates as serials), string, bool, nil (an
// empty cell) or *CellError (an error in that cell only).
type Result struct {
	Grid  *Grid
	Value [][]any // Grid.Cells(); set by Call only
	Err   *CellError
}

// Engine evaluates ES.* calls against a Source. It holds no state between calls and is
// safe for concurrent use if Src is.
type Engine struct {
	Src      Source
	Now      func() time.Time // nil = time.Now; "today" is Now's calendar date in its location
	MaxCells int              // bound the response, default 1_000_000
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

func (e *Engine) maxCells() int {
	if e.MaxCells > 0 {
		return e.MaxCells
	}
	return DefaultMaxCells
}

// Call evaluates one function. fn is ES.Get, ES.Latest, ES.Info, ES.Search, ES.Live or ES.Revisions,
// in any case, with or without "ES."; args are as decoded from JSON (string, float64,
// bool, nil for an omitted argument, [][]any or []any of []any for a range; other Go
// numeric types are accepted as numbers). Call does not modify args and never panics on
// any argument values. The Result has both Grid and Value; Eval, which the bridge uses,
// skips boxing the cells into Value.
func (e *Engine) Call(fn string, args []any) Result {
	r := e.Eval(fn, args)
	if r.Grid != nil {
		r.Value = r.Grid.Cells()
	}
	return r
}

// Eval is Call without Result.Value: the cells are only in Result.Grid.
func (e *Engine) Eval(fn string, args []any) Result {
	name := strings.TrimSpace(fn)
	if len(name) > 3 && strings.EqualFold(name[:3], "es.") {
		name = name[3:]
	}
	args = normalizeArgs(args)
	var (
		g   *Grid
		err *CellError
	)
	switch {
	case e.Src == nil:
		err = cellErr(CodeNA, "no data source")
	case strings.EqualFold(name, "get"):
		g, err = e.get(args)
	case strings.EqualFold(name, "latest"):
		g, err = e.latest(args)
	case strings.EqualFold(name, "live"):
		g, err = e.live(args)
	case strings.EqualFold(name, "info"):
		g, err = e.info(args)
	case strings.EqualFold(name, "search"):
		g, err = e.search(args)
	case strings.EqualFold(name, "revisions"):
		g, err = e.revisions(args)
	default:
		err = cellErr(CodeValue, "unknown function %q; want ES.Get, ES.Latest, ES.Info, ES.Search, ES.Live or ES.Revisions", clip(fn))
	}
	if err != nil {
		return Result{Err: err}
	}
	return Result{Grid: g}
}

// normalizeArgs returns args with top-level numbers as float64 and 1-D ranges as
// [][]any, copying only if something changes. Trailing nils (omitted optional
// arguments, which Excel sends as null) are dropped.
func normalizeArgs(args []any) []any {
	for len(args) > 0 && args[len(args)-1] == nil {
		args = args[:len(args)-1]
	}
	var out []any
	for i, a := range args {
		n, changed := normalize(a)
		if out == nil {
			if !changed {
				continue
			}
			out = make([]any, len(args))
			copy(out, args[:i])
		}
		out[i] = n
	}
	if out == nil {
		return args
	}
	return out
}

// normalize converts other numbers to float64 and a JSON array to [][]any.
func normalize(a any) (any, bool) {
	if _, ok := a.(float64); ok {
		return a, false
	}
	if f, ok := number(a); ok {
		return f, true
	}
	v, ok := a.([]any)
	if !ok {
		return a, false
	}
	// A JSON array: rows of cells if its elements are arrays, else one row.
	rows := make([][]any, 0, len(v))
	var single []any
	for _, r := range v {
		if rr, ok := r.([]any); ok {
			rows = append(rows, rr)
		} else {
			single = append(single, r)
		}
	}
	if single != nil {
		if len(rows) > 0 {
			return mixedRange{}, true
		}
		return [][]any{single}, true
	}
	return rows, true
}

// mixedRange stands for an argument mixing arrays and scalars, which no Excel range is.
type mixedRange struct{}

// number reads any Go number (and json.Number, through its Float64 method) as float64.
func number(a any) (float64, bool) {
	switch v := a.(type) {
	case float64:
		return v, true
	case float32:
		return float64(v), true
	case int:
		return float64(v), true
	case int8:
		return float64(v), true
	case int16:
		return float64(v), true
	case int32:
		return float64(v), true
	case int64:
		return float64(v), true
	case uint:
		return float64(v), true
	case uint8:
		return float64(v), true
	case uint16:
		return float64(v), true
	case uint32:
		return float64(v), true
	case uint64:
		return float64(v), true
	case interface{ Float64() (float64, error) }:
		f, err := v.Float64()
		return f, err == nil
	}
	return 0, false
}

// describe shows an argument value in a message.
func describe(a any) string {
	if f, ok := number(a); ok {
		return formatNumber(f)
	}
	switch v := a.(type) {
	case nil:
		return "an empty cell"
	case string:
		return strconv.Quote(clip(v))
	case bool:
		if v {
			return "TRUE"
		}
		return "FALSE"
	case [][]any:
		return fmt.Sprintf("a %dx%d range", len(v), rangeCols(v))
	case rangeInRange:
		return "a range inside a range"
	case mixedRange:
		return "an array mixing rows and values"
	}
	return fmt.Sprintf("a value of type %T", a)
}

// formatNumber shows a number as Excel would in a General cell, near enough for messages.
func formatNumber(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func rangeCols(v [][]any) int {
	n := 0
	for _, r := range v {
		n = max(n, len(r))
	}
	return n
}

// single unwraps a 1x1 range to its cell, as Excel passes a one-cell reference.
func single(a any) any {
	if r, ok := a.([][]any); ok && len(r) == 1 && len(r[0]) == 1 {
		if f, ok := number(r[0][0]); ok {
			return f
		}
		return r[0][0]
	}
	return a
}

// idList is the series argument: ids in order, and where they sat in the range.
type idList struct {
	ids        []string
	rows, cols int   // the shape of the argument: 1 x len(ids) for text
	pos        []int // row-major over rows x cols: index into ids, -1 for an empty cell; nil for text
}

// readIDs reads a series argument: text with comma-separated ids, or a range of cells
// each holding one id (a cell may hold a comma: ranges are how such ids are given).
// Empty cells are skipped; numbers are ids written as numbers.
func readIDs(a any, name string, maxCells int) (idList, *CellError) {
	a = single(a)
	var l idList
	switch v := a.(type) {
	case nil:
		return l, cellErr(CodeValue, "%s: missing", name)
	case string:
		if !strings.Contains(v, ",") { // one id: the common case, without the split
			if id := strings.TrimSpace(v); id != "" {
				l.ids = []string{id}
			}
			l.rows, l.cols = 1, len(l.ids)
			break
		}
		for part := range strings.SplitSeq(v, ",") {
			if id := strings.TrimSpace(part); id != "" {
				if len(l.ids) == MaxSeries {
					return l, cellErr(CodeValue, "%s: too many ids; at most %d", name, MaxSeries)
				}
				l.ids = append(l.ids, id)
			}
		}
		l.rows, l.cols = 1, len(l.ids)
	case float64:
		id, err := idFromNumber(v, name)
		if err != nil {
			return l, err
		}
		l.ids, l.rows, l.cols = []string{id}, 1, 1
	case [][]any:
		l.rows, l.cols = len(v), rangeCols(v)
		if l.rows*l.cols > maxCells {
			return l, cellErr(CodeValue, "%s: range too large (%d cells)", name, l.rows*l.cols)
		}
		l.pos = make([]int, l.rows*l.cols)
		for r, row := range v {
			for c := range l.cols {
				k := r*l.cols + c
				l.pos[k] = -1
				if c >= len(row) {
					continue
				}
				var id string
				switch x := row[c].(type) {
				case nil:
					continue
				case string:
					id = strings.TrimSpace(x)
				default:
					f, ok := number(x)
					if !ok {
						return l, cellErr(CodeValue, "%s: want ids, got %s in row %d, column %d", name, describe(x), r+1, c+1)
					}
					var err *CellError
					if id, err = idFromNumber(f, name); err != nil {
						return l, err
					}
				}
				if id == "" {
					continue
				}
				if len(l.ids) == MaxSeries {
					return l, cellErr(CodeValue, "%s: too many ids; at most %d", name, MaxSeries)
				}
				l.pos[k] = len(l.ids)
				l.ids = append(l.ids, id)
			}
		}
	default:
		return l, cellErr(CodeValue, "%s: want a series id or a range of ids, got %s", name, describe(a))
	}
	if len(l.ids) == 0 {
		return l, cellErr(CodeValue, "%s: empty; want a series id", name)
	}
	return l, nil
}

func idFromNumber(f float64, name string) (string, *CellError) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", cellErr(CodeValue, "%s: want a series id, got %s", name, describe(f))
	}
	return strconv.FormatFloat(f, 'f', -1, 64), nil
}

// readDate reads a start (isEnd false) or end date argument.
func readDate(a any, name string, now time.Time, isEnd bool) (int64, *CellError) {
	a = single(a)
	var (
		t   int64
		err error
	)
	switch v := a.(type) {
	case nil:
		if isEnd {
			return MaxTime, nil
		}
		return MinTime, nil
	case string:
		t, err = ParseDate(v, now, isEnd)
	case float64:
		t, err = parseNumberDate(v, isEnd)
	default:
		return 0, cellErr(CodeValue, "%s: want a date, got %s", name, describe(a))
	}
	if err != nil {
		return 0, cellErr(CodeValue, "%s: %v", name, err)
	}
	return t, nil
}

// isOptionArg reports whether a is options (a key=value string, or a range whose first
// non-empty cell is one) rather than a date: ES.Get("WTI", "last=5") skips the dates.
func isOptionArg(a any) bool {
	switch v := a.(type) {
	case string:
		return strings.Contains(v, "=")
	case [][]any:
		for _, row := range v {
			for _, c := range row {
				if c == nil {
					continue
				}
				s, ok := c.(string)
				if ok && strings.TrimSpace(s) == "" {
					continue
				}
				return ok && strings.Contains(s, "=")
			}
		}
	}
	return false
}

// readWord reads an optional text argument such as a field name, lower-cased.
func readWord(a any, name string) (string, *CellError) {
	switch v := single(a).(type) {
	case nil:
		return "", nil
	case string:
		return strings.ToLower(strings.TrimSpace(v)), nil
	default:
		return "", cellErr(CodeValue, "%s: want text, got %s", name, describe(v))
	}
}

// tooMany is the error for an argument past the last one fn takes.
func tooMany(args []any, n int, fn, sig string) *CellError {
	plural := "s"
	if n == 1 {
		plural = ""
	}
	return cellErr(CodeValue, "argument %d: %s takes at most %d argument%s (%s), got %d",
		n+1, fn, n, plural, sig, len(args))
}

func tooLarge(cells int) *CellError {
	return cellErr(CodeNum, "result too large (%d cells); narrow the range or use last=", cells)
}
