package cook

import (
	"errors"
	"fmt"

	"github.com/energyscope/energyscope/internal/calendar"
)

// ErrBadPeriod is wrapped by every error about a period that cannot be read.
var ErrBadPeriod = errors.New("not a recognised date or period")

// ParsePeriod reads the text of a period cell and returns the start of the
// period in unix seconds, UTC. It accepts:
//
//	2001                       year
//	2001-03, 200103, 2001M03   month
//	2001Q1, 2001-Q1, 2001 Q1   quarter
//	2001-03-15, 20010315       day (ISO, EIA-style 8 digits); 2001/03/15
//	2010-01-01T01:00:00        date-time, also with a space instead of T,
//	                           without seconds, with fractional seconds
//	                           (truncated), and with Z or an offset
//	                           (+02:00, +0200, +02); 24:00:00 is next midnight
//	Jan 1 2000, January 1, 2000, 1 Jan 2000, Jan 2000
//
// Surrounding spaces are ignored. The parser is hand-rolled over bytes: it is
// on the hot path of every CSV row, and time.Parse costs ten times as much.
func ParsePeriod[T ~string | ~[]byte](s T) (int64, error) {
	if v, ok := parsePeriod(s); ok {
		return v, nil
	}
	return 0, fmt.Errorf("period %q: %w", string(s), ErrBadPeriod)
}

func parsePeriod[T ~string | ~[]byte](s T) (int64, bool) {
	// Trim ASCII blanks.
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	n := len(s)
	if n == 0 {
		return 0, false
	}
	if !isDigit(s[0]) {
		return parseMonthFirst(s)
	}
	k := 0
	for k < n && isDigit(s[k]) {
		k++
	}
	switch k {
	case 8: // YYYYMMDD
		if n != 8 {
			return 0, false
		}
		return dateSecs(digits(s[0:4]), digits(s[4:6]), digits(s[6:8]))
	case 6: // YYYYMM
		if n != 6 {
			return 0, false
		}
		return dateSecs(digits(s[0:4]), digits(s[4:6]), 1)
	case 1, 2: // 1 Jan 2000
		return parseDayFirst(s, digits(s[:k]), k)
	case 4:
	default:
		return 0, false
	}
	y := digits(s[0:4])
	if n == 4 {
		return dateSecs(y, 1, 1)
	}
	i := 4
	sep := s[4]
	switch sep {
	case 'Q', 'q':
		return quarterSecs(y, s[5:])
	case 'M', 'm':
		if n == 7 && isDigit(s[5]) && isDigit(s[6]) {
			return dateSecs(y, digits(s[5:7]), 1)
		}
		return 0, false
	case ' ':
		if n >= 6 && (s[5] == 'Q' || s[5] == 'q') {
			return quarterSecs(y, s[6:])
		}
		return 0, false
	case '-', '/':
	default:
		return 0, false
	}
	i++ // past the separator
	if i < n && (s[i] == 'Q' || s[i] == 'q') {
		return quarterSecs(y, s[i+1:])
	}
	m, j := num2(s, i)
	if j == i {
		return 0, false
	}
	i = j
	if i == n {
		return dateSecs(y, m, 1)
	}
	if s[i] != sep {
		return 0, false
	}
	i++
	d, j := num2(s, i)
	if j == i {
		return 0, false
	}
	i = j
	day, ok := days(y, m, d)
	if !ok {
		return 0, false
	}
	if i == n {
		return day * calendar.SecondsPerDay, true
	}
	if sep != '-' || (s[i] != 'T' && s[i] != 't' && s[i] != ' ') {
		return 0, false
	}
	i++
	for i < n && s[i] == ' ' {
		i++
	}
	tod, ok := parseTime(s[i:])
	if !ok {
		return 0, false
	}
	return day*calendar.SecondsPerDay + tod, true
}

// parseTime reads HH:MM[:SS[.frac]][ ][Z|±HH[:MM]] and returns seconds since
// midnight minus the offset.
func parseTime[T ~string | ~[]byte](s T) (int64, bool) {
	n := len(s)
	if n < 5 || !isDigit(s[0]) || !isDigit(s[1]) || s[2] != ':' || !isDigit(s[3]) || !isDigit(s[4]) {
		return 0, false
	}
	h, mi, sec := digits(s[0:2]), digits(s[3:5]), int64(0)
	i := 5
	if i < n && s[i] == ':' {
		if i+3 > n || !isDigit(s[i+1]) || !isDigit(s[i+2]) {
			return 0, false
		}
		sec = digits(s[i+1 : i+3])
		i += 3
		if i < n && (s[i] == '.' || s[i] == ',') {
			i++
			j := i
			for i < n && isDigit(s[i]) {
				i++
			}
			if i == j {
				return 0, false
			}
		}
	}
	if mi > 59 || sec > 59 || h > 24 || (h == 24 && (mi != 0 || sec != 0)) {
		return 0, false
	}
	tod := h*3600 + mi*60 + sec
	if i < n && s[i] == ' ' {
		i++
	}
	if i == n {
		return tod, true
	}
	switch s[i] {
	case 'Z', 'z':
		return tod, i+1 == n
	case '+', '-':
	default:
		return 0, false
	}
	sign := int64(1)
	if s[i] == '-' {
		sign = -1
	}
	r := s[i+1:]
	var oh, om int64
	switch {
	case len(r) == 2 && isDigit(r[0]) && isDigit(r[1]):
		oh = digits(r)
	case len(r) == 4 && isDigit(r[0]) && isDigit(r[1]) && isDigit(r[2]) && isDigit(r[3]):
		oh, om = digits(r[0:2]), digits(r[2:4])
	case len(r) == 5 && isDigit(r[0]) && isDigit(r[1]) && r[2] == ':' && isDigit(r[3]) && isDigit(r[4]):
		oh, om = digits(r[0:2]), digits(r[3:5])
	default:
		return 0, false
	}
	if oh > 23 || om > 59 {
		return 0, false
	}
	return tod - sign*(oh*3600+om*60), true
}

// parseMonthFirst reads "Jan 1 2000", "January 1, 2000", "Jan. 1, 2000" and
// "Jan 2000".
func parseMonthFirst[T ~string | ~[]byte](s T) (int64, bool) {
	m, i := monthName(s)
	if m == 0 {
		return 0, false
	}
	n := len(s)
	if i < n && s[i] == '.' {
		i++
	}
	if i < n && s[i] == '-' { // Jan-2000
		i++
	} else {
		j := i
		for i < n && s[i] == ' ' {
			i++
		}
		if i == j {
			return 0, false
		}
	}
	// "Jan 2000": four digits straight after the month.
	if n-i == 4 && isDigit(s[i]) && isDigit(s[i+1]) && isDigit(s[i+2]) && isDigit(s[i+3]) {
		return dateSecs(digits(s[i:i+4]), m, 1)
	}
	d, j := num2(s, i)
	if j == i {
		return 0, false
	}
	i = j
	comma := i < n && s[i] == ','
	if comma {
		i++
	}
	k := i
	for i < n && s[i] == ' ' {
		i++
	}
	if i == k && !comma {
		return 0, false
	}
	if n-i != 4 || !isDigit(s[i]) || !isDigit(s[i+1]) || !isDigit(s[i+2]) || !isDigit(s[i+3]) {
		return 0, false
	}
	return dateSecs(digits(s[i:i+4]), m, d)
}

// parseDayFirst reads "1 Jan 2000" and "01-Jan-2000" given the day digits.
func parseDayFirst[T ~string | ~[]byte](s T, d int64, i int) (int64, bool) {
	n := len(s)
	if i >= n || (s[i] != ' ' && s[i] != '-') {
		return 0, false
	}
	sep := s[i]
	i++
	m, j := monthName(s[i:])
	if m == 0 {
		return 0, false
	}
	i += j
	if i < n && s[i] == '.' {
		i++
	}
	if i >= n || s[i] != sep {
		return 0, false
	}
	i++
	if n-i != 4 || !isDigit(s[i]) || !isDigit(s[i+1]) || !isDigit(s[i+2]) || !isDigit(s[i+3]) {
		return 0, false
	}
	return dateSecs(digits(s[i:i+4]), m, d)
}

var monthNames = [12]string{"january", "february", "march", "april", "may", "june",
	"july", "august", "september", "october", "november", "december"}

// monthName reads an English month name or its three-letter abbreviation
// (also "Sept") at the start of s and returns the month and the bytes read.
func monthName[T ~string | ~[]byte](s T) (int64, int) {
	k := 0
	for k < len(s) && isLetter(s[k]) {
		k++
	}
	if k < 3 {
		return 0, 0
	}
	for mi, name := range monthNames {
		if k > len(name) || (k != 3 && k != len(name) && !(mi == 8 && k == 4)) {
			continue
		}
		ok := true
		for j := 0; j < k; j++ {
			if lower(s[j]) != name[j] {
				ok = false
				break
			}
		}
		if ok {
			return int64(mi + 1), k
		}
	}
	return 0, 0
}

func quarterSecs[T ~string | ~[]byte](y int64, s T) (int64, bool) {
	if len(s) != 1 || s[0] < '1' || s[0] > '4' {
		return 0, false
	}
	return dateSecs(y, int64(s[0]-'0')*3-2, 1)
}

// num2 reads one or two digits at s[i:] and returns the value and the index
// after them (== i when there is no digit).
func num2[T ~string | ~[]byte](s T, i int) (int64, int) {
	if i >= len(s) || !isDigit(s[i]) {
		return 0, i
	}
	v := int64(s[i] - '0')
	i++
	if i < len(s) && isDigit(s[i]) {
		v = v*10 + int64(s[i]-'0')
		i++
	}
	return v, i
}

func digits[T ~string | ~[]byte](s T) int64 {
	var v int64
	for i := 0; i < len(s); i++ {
		v = v*10 + int64(s[i]-'0')
	}
	return v
}

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isLetter(c byte) bool { return (c|0x20) >= 'a' && (c|0x20) <= 'z' }
func lower(c byte) byte    { return c | 0x20 }

func dateSecs(y, m, d int64) (int64, bool) {
	day, ok := days(y, m, d)
	return day * calendar.SecondsPerDay, ok
}

// days returns the days since 1970-01-01 of a proleptic Gregorian date,
// validating month and day; the arithmetic is internal/calendar's.
func days(y, m, d int64) (int64, bool) {
	if m < 1 || m > 12 || d < 1 || d > calendar.DaysInMonth(y, m) {
		return 0, false
	}
	return calendar.DaysFromCivil(y, m, d), true
}
