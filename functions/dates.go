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

// The bounds of every time this package hands to a Source. An omitted start is MinTime
// and an omitted end MaxTime, rather than the extremes of int64, so that a store which
// converts to days or to date32 cannot overflow.
const (
	MinTime int64 = -62135596800 // 0001-01-01T00:00:00Z
	MaxTime int64 = 253402300799 // 9999-12-31T23:59:59Z
)

// Excel's 1900 date system counts days from 1899-12-31 = 0 and believes 1900 was a leap
// year (serial 60 is the nonexistent 1900-02-29, a Lotus 1-2-3 compatibility bug). From
// 1900-03-01 (serial 61) on, serial = unix days + 25569; before it, + 25568.
const (
	serialEpoch     = 25569   // serial of 1970-01-01
	serialMar1900   = 61      // first serial after the phantom leap day
	dayMar1900      = -25508  // unix day of 1900-03-01
	minSerial       = -693594 // 0001-01-01 (Excel itself shows nothing below 1)
	maxSerial       = 2958466 // 10000-01-01, exclusive: 2958465 is 9999-12-31
	maxDateInputLen = 64
)

// ExcelSerial converts unix seconds (UTC) to an Excel serial number of the 1900 date
// system: whole days since 1899-12-30 (1970-01-01 is 25569) with the time of day as
// the fraction. Dates before 1900-03-01 get Excel's own numbering (1900-01-01 is 1);
// dates before 1900 give serials below 1, which Excel cannot display.
func ExcelSerial(unix int64) float64 {
	day := calendar.FloorDiv(unix, secondsPerDay)
	sec := unix - day*secondsPerDay
	off := int64(serialEpoch)
	if day < dayMar1900 {
		off--
	}
	s := float64(day + off)
	if sec != 0 {
		s += float64(sec) / secondsPerDay
	}
	return s
}

// FromSerial converts an Excel serial number to unix seconds (UTC), rounding the time of
// day to the nearest second. Serial 60 (the phantom 1900-02-29) reads as 1900-03-01.
// Input outside the serials of years 1..9999 is clamped to [MinTime, MaxTime]; NaN gives
// MinTime. FromSerial(ExcelSerial(t)) == t for every t in that range.
func FromSerial(f float64) int64 {
	switch {
	case math.IsNaN(f), f < minSerial:
		return MinTime
	case f >= maxSerial:
		return MaxTime
	}
	fd := math.Floor(f)
	sec := int64(math.Round((f - fd) * secondsPerDay))
	sd := int64(fd)
	if sec >= secondsPerDay {
		sd++
		sec -= secondsPerDay
	}
	day := sd - serialEpoch
	if sd < serialMar1900 {
		day++
	}
	return min(max(day*secondsPerDay+sec, MinTime), MaxTime)
}

// datePrec is how much of the calendar a date names: an end date covers all of it.
type datePrec int8

const (
	precYear datePrec = iota
	precQuarter
	precMonth
	precDay
	precInstant
)

// spanEnd is the last second of the period of precision p that starts at start.
func spanEnd(start int64, p datePrec) int64 {
	switch p {
	case precInstant:
		return start
	case precDay:
		return start + secondsPerDay - 1
	}
	y, m, _ := calendar.CivilFromDays(calendar.FloorDiv(start, secondsPerDay))
	n := int64(1)
	switch p {
	case precYear:
		n = 12
	case precQuarter:
		n = 3
	}
	ny, nm, _ := calendar.AddMonths(y, m, 1, n)
	return calendar.DaysFromCivil(ny, nm, 1)*secondsPerDay - 1
}

func bound(start int64, p datePrec, isEnd bool) int64 {
	if isEnd {
		return spanEnd(start, p)
	}
	return start
}

// errNotISO tells ParseDate to try the next form; it never reaches a caller.
var errNotISO = errors.New("not an ISO date")

func errUnreadable(s string) error { return fmt.Errorf("cannot read date %q", clip(s)) }
func errOutOfRange(s string) error {
	return fmt.Errorf("date %q out of range: years 1 to 9999", clip(s))
}

// clip keeps user text in messages short.
func clip(s string) string {
	if len(s) > maxDateInputLen {
		return s[:maxDateInputLen] + "..."
	}
	return s
}

// ParseDate reads a start (isEnd false) or end (isEnd true) date as typed in a cell and
// returns unix seconds UTC. A start is the first second of the period the text names and
// an end its last second, so ends are inclusive: "2020" is 2020-01-01T00:00:00 as a start
// and 2020-12-31T23:59:59 as an end.
//
// Forms (case-insensitive, surrounding spaces ignored):
//
//	""                      unbounded: MinTime as a start, MaxTime as an end
//	2020-03-15, 2020/03/15  a day; also 20200315, "Mar 15 2020", "15 Mar 2020", "15-Mar-2020"
//	2020-03-15T14:30[:05[.9]][Z|+02:00]  an instant (space for T allowed; no zone = UTC)
//	2020-03, 202003, "Mar 2020"  a month
//	2020-Q1, 2020Q1         a quarter
//	2020                    a year
//	today, now              today's date (in now's location), the instant now
//	ytd, qtd, mtd           the first day of this year, quarter, month
//	-1Y +2Q -6M -10W -30D   today moved by whole years, quarters, months (day clamped to
//	                        the month's end), weeks or days; the sign is required
//	43905, 43905.5          an Excel serial: five digits, or any number with a fraction,
//	                        read as the same number in a cell would be (a whole serial
//	                        names a day, a fractional one an instant)
//	2020M03, 2020 Q1        a month and a quarter as statistics offices write them
//
// Years must lie in 1..9999. Other digit strings are a year (4 digits), a year-month (6)
// or a day (8), as numbers of those sizes are in cells. This is the one date grammar of
// the project: ES.Get, the bridge, es get, es export and the desktop app all read dates
// here, so a range means the same rows everywhere.
func ParseDate(s string, now time.Time, isEnd bool) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		if isEnd {
			return MaxTime, nil
		}
		return MinTime, nil
	}
	if len(s) > maxDateInputLen {
		return 0, errUnreadable(s)
	}
	ty, tm, td := now.Date()
	today := calendar.DaysFromCivil(int64(ty), int64(tm), int64(td)) * secondsPerDay
	switch {
	case strings.EqualFold(s, "today"):
		return bound(today, precDay, isEnd), nil
	case strings.EqualFold(s, "now"):
		return min(max(now.Unix(), MinTime), MaxTime), nil
	case strings.EqualFold(s, "ytd"):
		return bound(calendar.DaysFromCivil(int64(ty), 1, 1)*secondsPerDay, precDay, isEnd), nil
	case strings.EqualFold(s, "qtd"):
		return bound(calendar.DaysFromCivil(int64(ty), (int64(tm)-1)/3*3+1, 1)*secondsPerDay, precDay, isEnd), nil
	case strings.EqualFold(s, "mtd"):
		return bound(calendar.DaysFromCivil(int64(ty), int64(tm), 1)*secondsPerDay, precDay, isEnd), nil
	case s[0] == '+' || s[0] == '-':
		return parseRelative(s, int64(ty), int64(tm), int64(td), isEnd)
	}
	if allDigits(s) {
		if len(s) == 5 {
			return parseTextSerial(s, isEnd)
		}
		return parseDigits(s, isEnd)
	}
	if isDecimal(s) {
		return parseTextSerial(s, isEnd)
	}
	if t, p, err := parseISO(s); err != errNotISO {
		if err != nil {
			return 0, err
		}
		return bound(t, p, isEnd), nil
	}
	if t, p, ok := parseTextual(s); ok {
		return bound(t, p, isEnd), nil
	}
	return 0, errUnreadable(s)
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return len(s) > 0
}

// parseRelative reads [+-]N[DWMQY] relative to today (ty-tm-td).
func parseRelative(s string, ty, tm, td int64, isEnd bool) (int64, error) {
	if len(s) < 3 {
		return 0, errUnreadable(s)
	}
	body := s[1 : len(s)-1]
	if !allDigits(body) {
		return 0, errUnreadable(s)
	}
	if len(body) > 7 {
		return 0, errOutOfRange(s)
	}
	n, _ := strconv.ParseInt(body, 10, 64)
	if s[0] == '-' {
		n = -n
	}
	y, m, d := ty, tm, td
	day := calendar.DaysFromCivil(y, m, d)
	switch s[len(s)-1] | 0x20 { // ASCII lower case
	case 'd':
		day += n
	case 'w':
		day += 7 * n
	case 'm':
		day = calendar.DaysFromCivil(calendar.AddMonths(y, m, d, n))
	case 'q':
		day = calendar.DaysFromCivil(calendar.AddMonths(y, m, d, 3*n))
	case 'y':
		day = calendar.DaysFromCivil(calendar.AddMonths(y, m, d, 12*n))
	default:
		return 0, errUnreadable(s)
	}
	t := day * secondsPerDay
	if t < MinTime || t > MaxTime {
		return 0, errOutOfRange(s)
	}
	return bound(t, precDay, isEnd), nil
}

// isDecimal reports whether s is digits, a point and digits ("43905.5").
func isDecimal(s string) bool {
	i := strings.IndexByte(s, '.')
	return i > 0 && i < len(s)-1 && allDigits(s[:i]) && allDigits(s[i+1:])
}

// parseTextSerial reads an Excel serial typed as text, as parseNumberDate reads the
// number, except that 0 is not "omitted" (only an empty cell is).
func parseTextSerial(s string, isEnd bool) (int64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, errUnreadable(s)
	}
	if f < 1 {
		return 0, errOutOfRange(s)
	}
	t, err := parseNumberDate(f, isEnd)
	if err != nil {
		return 0, fmt.Errorf("date %q out of range: years 1 to 9999", clip(s))
	}
	return t, nil
}

// parseDigits reads YYYY, YYYYMM or YYYYMMDD.
func parseDigits(s string, isEnd bool) (int64, error) {
	atoi := func(a string) int64 { n, _ := strconv.ParseInt(a, 10, 64); return n }
	switch len(s) {
	case 4, 6, 8:
	case 5:
		return 0, errOutOfRange(s)
	default:
		return 0, errUnreadable(s)
	}
	y := atoi(s[:4])
	if y < 1 {
		return 0, errOutOfRange(s)
	}
	if len(s) == 4 {
		return bound(calendar.DaysFromCivil(y, 1, 1)*secondsPerDay, precYear, isEnd), nil
	}
	m := atoi(s[4:6])
	if m < 1 || m > 12 {
		return 0, errUnreadable(s)
	}
	if len(s) == 6 {
		return bound(calendar.DaysFromCivil(y, m, 1)*secondsPerDay, precMonth, isEnd), nil
	}
	d := atoi(s[6:8])
	if d < 1 || d > calendar.DaysInMonth(y, m) {
		return 0, errUnreadable(s)
	}
	return bound(calendar.DaysFromCivil(y, m, d)*secondsPerDay, precDay, isEnd), nil
}

// scanner is a cursor over ASCII date text.
type scanner struct {
	s string
	i int
}

func (c *scanner) done() bool { return c.i >= len(c.s) }

func (c *scanner) peek() byte {
	if c.i < len(c.s) {
		return c.s[c.i]
	}
	return 0
}

// num reads between lo and hi digits; ok is false if fewer than lo are there.
func (c *scanner) num(lo, hi int) (v int64, n int, ok bool) {
	for c.i < len(c.s) && n < hi && c.s[c.i] >= '0' && c.s[c.i] <= '9' {
		v = v*10 + int64(c.s[c.i]-'0')
		c.i++
		n++
	}
	return v, n, n >= lo
}

// parseISO reads YYYY-MM[-DD[(T| )hh:mm[:ss[.f]][zone]]] and YYYY-Qn (with '-' or '/'
// as the date separator). err is errNotISO if s does not look like one of them at all.
func parseISO(s string) (t int64, p datePrec, err error) {
	c := scanner{s: s}
	y, n, _ := c.num(4, 18)
	if n < 4 {
		return 0, 0, errNotISO
	}
	bad := func() (int64, datePrec, error) { return 0, 0, errUnreadable(s) }
	sep := c.peek()
	if (sep == 'M' || sep == 'm') && n == 4 && y >= 1 { // "2020M03", Eurostat's month
		c.i++
		m, _, ok := c.num(2, 2)
		if !ok || m < 1 || m > 12 || !c.done() {
			return bad()
		}
		return calendar.DaysFromCivil(y, m, 1) * secondsPerDay, precMonth, nil
	}
	if sep == 'Q' || sep == 'q' {
		sep = 0
	} else if sep == ' ' && len(s) > c.i+1 && (s[c.i+1] == 'Q' || s[c.i+1] == 'q') { // "2020 Q1"
		c.i++
		sep = 0
	} else if sep == '-' || sep == '/' {
		c.i++
	} else {
		return 0, 0, errNotISO
	}
	if n > 4 || y < 1 {
		return 0, 0, errOutOfRange(s)
	}
	if q := c.peek(); q == 'Q' || q == 'q' {
		c.i++
		qn, _, ok := c.num(1, 1)
		if !ok || qn < 1 || qn > 4 || !c.done() {
			return bad()
		}
		return calendar.DaysFromCivil(y, (qn-1)*3+1, 1) * secondsPerDay, precQuarter, nil
	}
	if sep == 0 {
		return bad()
	}
	m, _, ok := c.num(1, 2)
	if !ok || m < 1 || m > 12 {
		return bad()
	}
	if c.done() {
		return calendar.DaysFromCivil(y, m, 1) * secondsPerDay, precMonth, nil
	}
	if c.peek() != sep {
		return bad()
	}
	c.i++
	d, _, ok := c.num(1, 2)
	if !ok || d < 1 || d > calendar.DaysInMonth(y, m) {
		return bad()
	}
	t = calendar.DaysFromCivil(y, m, d) * secondsPerDay
	if c.done() {
		return t, precDay, nil
	}
	if b := c.peek(); b != 'T' && b != 't' && b != ' ' {
		return bad()
	}
	c.i++
	hh, _, ok1 := c.num(1, 2)
	if !ok1 || hh > 23 || c.peek() != ':' {
		return bad()
	}
	c.i++
	mm, _, ok2 := c.num(2, 2)
	if !ok2 || mm > 59 {
		return bad()
	}
	var ss int64
	if c.peek() == ':' {
		c.i++
		var ok3 bool
		ss, _, ok3 = c.num(2, 2)
		if !ok3 || ss > 59 {
			return bad()
		}
		if c.peek() == '.' || c.peek() == ',' {
			c.i++
			if _, _, ok := c.num(1, 9); !ok { // fractions of a second are dropped
				return bad()
			}
		}
	}
	t += hh*3600 + mm*60 + ss
	switch z := c.peek(); z {
	case 0:
	case 'Z', 'z':
		c.i++
	case '+', '-':
		c.i++
		zh, _, okh := c.num(2, 2)
		if c.peek() == ':' {
			c.i++
		}
		zm, _, okm := c.num(2, 2)
		if !okh || !okm || zh > 23 || zm > 59 {
			return bad()
		}
		off := zh*3600 + zm*60
		if z == '+' {
			off = -off
		}
		t += off
	default:
		return bad()
	}
	if !c.done() {
		return bad()
	}
	if t < MinTime || t > MaxTime {
		return 0, 0, errOutOfRange(s)
	}
	return t, precInstant, nil
}

// textualLayouts are the forms with a month name that analysts type or paste (the
// sample data itself says "Jan 1 2000"). time.Parse matches month names ignoring case.
var textualLayouts = [...]struct {
	layout string
	prec   datePrec
}{
	{"Jan 2 2006", precDay},
	{"Jan 2, 2006", precDay},
	{"January 2 2006", precDay},
	{"January 2, 2006", precDay},
	{"2 Jan 2006", precDay},
	{"2 January 2006", precDay},
	{"2-Jan-2006", precDay},
	{"2-Jan-06", precDay},
	{"Jan 2006", precMonth},
	{"January 2006", precMonth},
	{"Jan-2006", precMonth},
}

func parseTextual(s string) (int64, datePrec, bool) {
	for _, l := range textualLayouts {
		if tt, err := time.Parse(l.layout, s); err == nil {
			return tt.Unix(), l.prec, true
		}
	}
	return 0, 0, false
}

// parseNumberDate reads a date given as a number, as a cell holding a date gives it:
//
//	0              omitted (an empty cell referenced as a date reads as 0)
//	1000..9999     a year (whole numbers only; as serials these would be days of 1902-1927)
//	10000101..99991231  YYYYMMDD (whole numbers; far above the largest serial)
//	otherwise      an Excel serial from 1 (1900-01-01) to 2958465 (9999-12-31); a whole
//	               serial as an end covers the whole day, a fractional one is an instant
func parseNumberDate(f float64, isEnd bool) (int64, error) {
	text := formatNumber(f)
	whole := f == math.Trunc(f)
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return 0, errUnreadable(text)
	case f == 0:
		if isEnd {
			return MaxTime, nil
		}
		return MinTime, nil
	case whole && f >= 1000 && f <= 9999:
		return bound(calendar.DaysFromCivil(int64(f), 1, 1)*secondsPerDay, precYear, isEnd), nil
	case whole && f >= 10000101 && f <= 99991231:
		return parseDigits(strconv.FormatInt(int64(f), 10), isEnd)
	case f >= 1 && f < maxSerial:
		t := FromSerial(f)
		if whole {
			return bound(t, precDay, isEnd), nil
		}
		return t, nil
	}
	return 0, errOutOfRange(text)
}

// formatTime shows a bound in messages: a day when it is a whole day (or the last second
// of one, for ends), else a date and time.
func formatTime(t int64) string {
	day := calendar.FloorDiv(t, secondsPerDay)
	sec := t - day*secondsPerDay
	y, m, d := calendar.CivilFromDays(day)
	if sec == 0 || sec == secondsPerDay-1 {
		return fmt.Sprintf("%04d-%02d-%02d", y, m, d)
	}
	if sec%60 == 0 {
		return fmt.Sprintf("%04d-%02d-%02d %02d:%02d", y, m, d, sec/3600, sec/60%60)
	}
	return fmt.Sprintf("%04d-%02d-%02d %02d:%02d:%02d", y, m, d, sec/3600, sec/60%60, sec%60)
}
