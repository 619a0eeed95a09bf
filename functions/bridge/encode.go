package bridge

import (
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/energyscope/energyscope/functions"
)

// The /v1/calc response is written by hand: encoding/json reflects over
// every cell, which for a batch of a million cells costs more than the
// lookups themselves. The output is byte-for-byte what encoding/json
// would write for the same values (with SetEscapeHTML(false)), which a
// test checks.

// encoder appends JSON for results, remembering the last cell error it
// wrote: the engine puts the same *CellError in every cell of a failed
// column.
type encoder struct {
	lastErr *functions.CellError
	errJSON []byte
}

// result appends {"value":[[...]]} or {"error":{...}}.
func (e *encoder) result(b []byte, r *functions.Result) []byte {
	switch {
	case r.Err != nil:
		b = append(b, `{"error":`...)
		b = appendCellError(b, r.Err)
		return append(b, '}')
	case r.Grid != nil:
		b = append(b, `{"value":`...)
		b = e.grid(b, r.Grid)
		return append(b, '}')
	}
	b = append(b, `{"value":[`...)
	for i, row := range r.Value {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		for j, c := range row {
			if j > 0 {
				b = append(b, ',')
			}
			b = e.cell(b, c)
		}
		b = append(b, ']')
	}
	return append(b, "]}"...)
}

// grid appends g's rows: numbers straight from g.Num (NaN is null), the
// other cells through cell.
func (e *encoder) grid(b []byte, g *functions.Grid) []byte {
	b = append(b, '[')
	// Reserve a typical size up front: a date and a price are ~16 bytes with
	// their separators, and growing a megabyte-sized buffer copies it.
	b = slices.Grow(b, 2+len(g.Num)*9+g.Rows*3)
	for r := range g.Rows {
		if r > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		lo := r * g.Cols
		for c, x := range g.Num[lo : lo+g.Cols] {
			if c > 0 {
				b = append(b, ',')
			}
			if g.Other != nil {
				if o := g.Other[lo+c]; o != nil {
					b = e.cell(b, o)
					continue
				}
			}
			b = appendFloat(b, x)
		}
		b = append(b, ']')
	}
	return append(b, ']')
}

func (e *encoder) cell(b []byte, c any) []byte {
	switch v := c.(type) {
	case float64:
		return appendFloat(b, v)
	case string:
		return appendString(b, v)
	case nil:
		return append(b, "null"...)
	case bool:
		if v {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	case *functions.CellError:
		if v == nil {
			return append(b, "null"...)
		}
		if v != e.lastErr {
			e.lastErr = v
			e.errJSON = append(e.errJSON[:0], `{"error":`...)
			e.errJSON = appendCellError(e.errJSON, v)
			e.errJSON = append(e.errJSON, '}')
		}
		return append(b, e.errJSON...)
	}
	// The engine's invariant excludes anything else; never write invalid JSON.
	return append(b, "null"...)
}

func appendCellError(b []byte, ce *functions.CellError) []byte {
	b = append(b, `{"code":`...)
	b = appendString(b, ce.Code)
	b = append(b, `,"message":`...)
	b = appendString(b, ce.Message)
	return append(b, '}')
}

// appendFloat writes f as encoding/json does; NaN and infinities, which
// JSON cannot carry, become null (the engine never produces them).
func appendFloat(b []byte, f float64) []byte {
	abs := math.Abs(f)
	// Whole numbers (serial dates, counts): integer formatting is several
	// times faster than the shortest-float algorithm and gives the same text.
	// (NaN fails the comparison; infinities fail the bound.)
	if f == math.Trunc(f) && abs < 1e15 {
		if f < 0 {
			b = append(b, '-')
		} else if f == 0 && math.Signbit(f) {
			return append(b, "-0"...)
		}
		return appendUint(b, uint64(abs))
	}
	if abs >= 1e-4 && abs < 1e9 {
		if b, ok := appendFewDecimals(b, f); ok {
			return b
		}
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	fmt := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		fmt = 'e'
	}
	b = strconv.AppendFloat(b, f, fmt, -1, 64)
	if fmt == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendUint writes n in decimal, as strconv.AppendUint does, in place:
// it runs for every date and most values of a response.
func appendUint(b []byte, n uint64) []byte {
	if n < 100 {
		if n < 10 {
			return append(b, byte('0'+n))
		}
		return append(b, byte('0'+n/10), byte('0'+n%10))
	}
	w := 3
	for p := uint64(1000); w < 20 && n >= p; p *= 10 {
		w++
	}
	l := len(b)
	if cap(b)-l < w {
		b = slices.Grow(b, w)
	}
	b = b[:l+w]
	i := l + w
	for n >= 100 {
		q := n / 100
		r := n - q*100
		i -= 2
		b[i], b[i+1] = byte('0'+r/10), byte('0'+r%10)
		n = q
	}
	if n >= 10 {
		b[i-2], b[i-1] = byte('0'+n/10), byte('0'+n%10)
	} else {
		b[i-1] = byte('0' + n)
	}
	return b
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string the way encoding/json does without
// HTML escaping: control characters escaped, invalid UTF-8 as \ufffd,
// U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendFewDecimals writes f, which is not a whole number and has
// 1e-4 <= |f| < 1e9, if it is a decimal with at most 4 digits after the
// point (prices, volumes: most stored values), without the general
// shortest-float algorithm, which costs several times more.
//
// n = round(f * 1e4) is exact in a float64 (|n| < 1e13 < 2^53), and
// float64(n)/1e4, a correctly rounded division, is the float nearest to the
// decimal n/10^4; if that is f, the decimal is the shortest text that reads
// back as f: any other decimal of at most 4 places differs from it by at
// least 1e-4, far more than a float spacing below 1e9, and a shorter text
// would be such a decimal. So the text is exactly strconv's.
func appendFewDecimals(b []byte, f float64) ([]byte, bool) {
	n := int64(math.RoundToEven(f * 1e4))
	if float64(n)/1e4 != f {
		return b, false
	}
	if n < 0 {
		b = append(b, '-')
		n = -n
	}
	u := uint64(n)
	b = appendUint(b, u/10000)
	frac := u % 10000 // not 0: f is not whole
	d := [5]byte{'.', byte('0' + frac/1000), byte('0' + frac/100%10), byte('0' + frac/10%10), byte('0' + frac%10)}
	end := len(d)
	for d[end-1] == '0' {
		end--
	}
	return append(b, d[:end]...), true
}
