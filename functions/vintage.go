package functions

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/energyscope/energyscope/internal/calendar"
)

// Vintages (issue 12): every snapshot the server publishes is a vintage of its dataset.
// ES.Get(..., "asof=WHEN") reads a series as one vintage held it, and
// ES.Revisions(series, period) lists every value one period has had across the
// vintages the server retains. Both go through VintageSource, which a Source
// implements when it can answer them (the companion's does; a Source without vintages
// answers #N/A).

// AsOf is a parsed WHEN of asof=: exactly one kind of reference to a vintage, in the
// canonical text the server resolves (Text). ParseAsOf makes it.
type AsOf struct {
	Kind AsOfKind
	// Text is WHEN as sent to the server: a date as YYYY-MM-DD, a time as RFC 3339 in
	// UTC, an es snapshot id, an Iceberg snapshot id or a tag as typed.
	Text string
	// Time is the instant a date or time names, unix seconds UTC (a date: the end of
	// that day, 23:59:59); zero for the other kinds.
	Time int64
}

// AsOfKind says what an AsOf names.
type AsOfKind uint8

const (
	AsOfTime     AsOfKind = iota + 1 // an RFC 3339 time: the latest vintage committed at or before it
	AsOfDate                         // a date: the latest vintage committed on or before that day (UTC)
	AsOfSnapshot                     // an es snapshot id (e3-s120-0123456789ab)
	AsOfIceberg                      // an Iceberg snapshot id (a whole number)
	AsOfTag                          // a tag given with es tag
)

var asOfKindNames = [...]string{"", "time", "date", "snapshot", "iceberg", "tag"}

func (k AsOfKind) String() string { return enumName(asOfKindNames[:], uint8(k), "AsOfKind") }

// Stable reports whether the vintage a names can never change: an es snapshot id, an
// Iceberg id or a tag. A time or date names the latest vintage at or before it, which
// stays the same only once a later vintage exists (the companion checks that).
func (a AsOf) Stable() bool {
	return a.Kind == AsOfSnapshot || a.Kind == AsOfIceberg || a.Kind == AsOfTag
}

func (a AsOf) String() string { return "asof=" + a.Text }

// The forms of WHEN, checked by hand: asof= is parsed on every call of
// ES.Get that has it, and a regexp costs more than the read it selects.

// isDateOnly: [0-9]{4}-[0-9]{2}-[0-9]{2}.
func isDateOnly(s string) bool {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return false
	}
	for i := range len(s) {
		if i != 4 && i != 7 && !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// isESSnapshot: e[0-9]+-s[0-9]+-[0-9a-f]{12}, as format names snapshots.
func isESSnapshot(s string) bool {
	digits := func(s string) (rest string, ok bool) {
		i := 0
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		return s[i:], i > 0
	}
	if len(s) < 2 || s[0] != 'e' {
		return false
	}
	s, ok := digits(s[1:])
	if !ok || len(s) < 2 || s[0] != '-' || s[1] != 's' {
		return false
	}
	if s, ok = digits(s[2:]); !ok || len(s) != 13 || s[0] != '-' {
		return false
	}
	for i := 1; i < 13; i++ {
		if c := s[i]; !isDigit(c) && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// isTag: [A-Za-z][A-Za-z0-9_.-]{0,63}, the server's rule for es tag.
func isTag(s string) bool {
	if len(s) == 0 || len(s) > 64 || !isLetter(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isLetter(c) && !isDigit(c) && c != '_' && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// ErrBadAsOf: a WHEN that is none of a time, a date, a snapshot id or a tag (wrapped
// with the text; ES.Get shows it as #VALUE!).
var ErrBadAsOf = errors.New("want a time (2026-10-01T12:00:00Z), a date (2026-10-01), a snapshot id (e3-s120-0123456789ab) or a tag")

// ParseAsOf reads WHEN: an RFC 3339 time, a date YYYY-MM-DD, an es snapshot id
// (e<epoch>-s<seq>-<12 hex>), an Iceberg snapshot id (digits) or a tag (a letter, then
// up to 63 letters, digits, '_', '.', '-'; the server's rule for es tag). Text that
// starts like a date or time must be a valid one: 2026-13-01 is an error, not a tag.
func ParseAsOf(s string) (AsOf, error) {
	w := strings.TrimSpace(s)
	bad := func(why error) (AsOf, error) {
		return AsOf{}, fmt.Errorf("asof=%s: %w", clip(w), why)
	}
	switch {
	case w == "":
		return bad(ErrBadAsOf)
	case isDateOnly(w):
		d, err := time.Parse(time.DateOnly, w)
		if err != nil {
			return bad(fmt.Errorf("not a date: %w", ErrBadAsOf))
		}
		return AsOf{Kind: AsOfDate, Text: w, Time: d.Unix() + secondsPerDay - 1}, nil
	case isESSnapshot(w):
		return AsOf{Kind: AsOfSnapshot, Text: w}, nil
	case w[0] >= '0' && w[0] <= '9':
		if !strings.ContainsAny(w, "-:T") {
			if n, err := strconv.ParseInt(w, 10, 64); err == nil && n > 0 {
				return AsOf{Kind: AsOfIceberg, Text: w}, nil
			}
			return bad(ErrBadAsOf)
		}
		t, err := time.Parse(time.RFC3339Nano, w)
		if err != nil || t.Year() < 1 || t.Year() > 9999 {
			return bad(fmt.Errorf("not an RFC 3339 time: %w", ErrBadAsOf))
		}
		t = t.UTC().Truncate(time.Second)
		return AsOf{Kind: AsOfTime, Text: t.Format(time.RFC3339), Time: t.Unix()}, nil
	case isTag(w):
		return AsOf{Kind: AsOfTag, Text: w}, nil
	}
	return bad(ErrBadAsOf)
}

// Vintage is one published version of a dataset, as the server lists it.
type Vintage struct {
	Snapshot    string    // es snapshot id
	Iceberg     int64     // Iceberg snapshot id
	CommittedAt time.Time // when it was published
	Tags        []string
}

// Revision is the value one period had in one vintage; Present is false when the
// period had no value in it.
type Revision struct {
	Vintage Vintage
	Value   float64
	Present bool
}

// VintageSource is a Source that keeps (or can fetch) the vintages of its datasets. The
// engine uses it for asof= and ES.Revisions when its Src implements it; a Source that
// does not answers those with #N/A (ErrNoVintageSource). Errors: ErrNotFound (wrapped) for a
// series the vintage does not have, and a *VintageError for the vintage itself.
type VintageSource interface {
	Source
	// GetAsOf is Get as of the vintage asof names: the points with from <= period <=
	// to as that vintage held them (its snapshot, without later live updates).
	GetAsOf(id string, asof AsOf, from, to int64) (periods []int64, values []float64, err error)
	// Revisions returns every value the period (unix seconds UTC, the start of its
	// bucket) of series id has had across the retained vintages, oldest vintage first.
	Revisions(id string, period int64) ([]Revision, error)
}

// Why a vintage cannot be read (VintageError.Err; check with errors.Is).
var (
	// ErrUnknownVintage: the server has no vintage of that name (never published, or
	// expired).
	ErrUnknownVintage = errors.New("unknown vintage")
	// ErrBeforeFirstVintage: the time is before the dataset's first vintage.
	ErrBeforeFirstVintage = errors.New("before the first vintage")
	// ErrVintageUnreachable: the vintage is not held on this computer and the server
	// cannot be asked (offline, or the connection was lost while asking).
	ErrVintageUnreachable = errors.New("not held on this computer and the server is unreachable")
	// ErrNoVintages: the server keeps no vintages (a version 2 server, a
	// server without a lake).
	ErrNoVintages = errors.New("the server does not keep vintages")
	// ErrNoVintageSource: the Source is not a VintageSource (a home's store
	// read directly, as es get does: a server's vintages are read through
	// the companion, or with es get --asof on a server home).
	ErrNoVintageSource = errors.New("this data source keeps no vintages (es get --asof reads a server home's)")
)

// VintageError is why the vintage AsOf (empty for ES.Revisions) could not be read:
// Err is one of the sentinels above, or another error; Detail adds the server's words.
type VintageError struct {
	AsOf   string // WHEN as given, "" for revisions
	Err    error
	Detail string
}

func (e *VintageError) Error() string {
	var b strings.Builder
	if e.AsOf != "" {
		b.WriteString("vintage asof=" + clip(e.AsOf))
		if errors.Is(e.Err, ErrVintageUnreachable) {
			b.WriteString(" is ")
		} else {
			b.WriteString(": ")
		}
	} else {
		b.WriteString("vintages: ")
	}
	b.WriteString(e.Err.Error())
	if e.Detail != "" {
		b.WriteString(" (" + e.Detail + ")")
	}
	return b.String()
}

func (e *VintageError) Unwrap() error { return e.Err }

// asOfSource reads a VintageSource as of one vintage: Get goes to GetAsOf, Info and
// Search to the current data (names, units and case resolution of ids).
type asOfSource struct {
	VintageSource
	asof AsOf
}

func (s asOfSource) Get(id string, from, to int64) ([]int64, []float64, error) {
	return s.GetAsOf(id, s.asof, from, to)
}

// noVintages is a Source without vintages, read as of a vintage: every Get fails.
type noVintages struct {
	Source
	asof AsOf
}

func (s noVintages) Get(string, int64, int64) ([]int64, []float64, error) {
	return nil, nil, &VintageError{AsOf: s.asof.Text, Err: ErrNoVintageSource}
}

// asOf returns the engine that reads as of a (the same engine when a is the zero AsOf).
func (e *Engine) asOf(a AsOf) *Engine {
	if a.Kind == 0 {
		return e
	}
	c := *e
	if vs, ok := e.Src.(VintageSource); ok {
		c.Src = asOfSource{vs, a}
	} else {
		c.Src = noVintages{e.Src, a}
	}
	return &c
}

// revisions is ES.Revisions(series, period): a header row [Vintage, id], then one row
// per retained vintage, oldest first: [its commit time as an Excel date/time, the
// period's value in it]. A vintage in which the period had no value shows an empty
// cell. period is any date form; it is taken to the start of its bucket in the
// series' frequency (2024-03-15 of a monthly series is 2024-03).
func (e *Engine) revisions(args []any) (*Grid, *CellError) {
	if len(args) > 2 {
		return nil, tooMany(args, 2, "ES.Revisions", "series, period")
	}
	if len(args) == 0 {
		return nil, cellErr(CodeValue, "series: missing; use ES.Revisions(series, period)")
	}
	ids, cerr := readIDs(args[0], "series", e.maxCells())
	if cerr != nil {
		return nil, cerr
	}
	if len(ids.ids) != 1 {
		return nil, cellErr(CodeValue, "series: ES.Revisions takes one series, got %d", len(ids.ids))
	}
	if len(args) < 2 || single(args[1]) == nil {
		return nil, cellErr(CodeValue, "period: missing; use ES.Revisions(series, period)")
	}
	t, cerr := readDate(args[1], "period", e.now(), false)
	if cerr != nil {
		return nil, cerr
	}
	id := ids.ids[0]
	budget := SuggestPerCall
	info, cerr := e.lookup(id, &budget)
	if cerr != nil {
		return nil, cerr
	}
	switch f := info.Frequency; f {
	case "H", "D", "W", "M", "Q", "A":
		t, _ = calendar.Frequency(f[0]).Bucket(t)
	}
	vs, ok := e.Src.(VintageSource)
	if !ok {
		return nil, cellErr(CodeNA, "%s: %v", clip(id), &VintageError{Err: ErrNoVintageSource})
	}
	revs, err := vs.Revisions(info.ID, t)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, cellErr(CodeNA, "%v", err)
	case err != nil:
		return nil, cellErr(CodeNA, "%s: %v", clip(id), err)
	case len(revs) == 0:
		return nil, cellErr(CodeNA, "%s: no vintage has a value for %s", clip(id), formatTime(t))
	}
	if cells := 2 * (len(revs) + 1); cells > e.maxCells() {
		return nil, tooLarge(cells)
	}
	g := &Grid{Rows: len(revs) + 1, Cols: 2, Num: make([]float64, 2*(len(revs)+1))}
	g.set(0, "Vintage")
	g.set(1, id)
	for i, r := range revs {
		k := 2 * (i + 1)
		g.Num[k] = ExcelSerial(r.Vintage.CommittedAt.Unix())
		g.Num[k+1] = math.NaN() // an empty cell
		if r.Present {
			g.setNum(k+1, r.Value) // NaN and infinities stay empty
		}
	}
	return g, nil
}
