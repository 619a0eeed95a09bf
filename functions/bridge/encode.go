package bridge

import (
	"math"
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
	if r.Err != nil {
		b = append(b, `{"error":`...)
		b = appendCellError(b, r.Err)
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
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	// Whole numbers (serial dates, counts): integer formatting is several
	// times faster than the shortest-float algorithm and gives the same text.
	if f == math.Trunc(f) && math.Abs(f) < 1e15 && (f != 0 || !math.Signbit(f)) {
		return strconv.AppendInt(b, int64(f), 10)
	}
	abs := math.Abs(f)
	if abs >= 1e-4 && abs < 1e9 {
		if b, ok := appendFewDecimals(b, f); ok {
			return b
		}
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

var pow10 = [...]float64{1, 10, 100, 1000, 10000}

// appendFewDecimals writes f if it is a decimal with at most 4 digits after
// the point (prices, volumes: most stored values), without the general
// shortest-float algorithm, which costs several times more. For |f| < 1e9
// two different decimals of at most 4 places are always more than a float
// spacing apart, so the decimal that round-trips is the shortest one and
// the text is exactly strconv's.
func appendFewDecimals(b []byte, f float64) ([]byte, bool) {
	for k := 1; k < len(pow10); k++ {
		v := f * pow10[k]
		if v != math.Trunc(v) {
			continue
		}
		n := int64(v)
		if float64(n)/pow10[k] != f {
			return b, false
		}
		if n < 0 {
			b = append(b, '-')
			n = -n
		}
		p := int64(pow10[k])
		b = strconv.AppendInt(b, n/p, 10)
		frac := n % p
		// k digits, zero-padded, then trailing zeros trimmed (frac > 0: f
		// is not whole, the caller wrote whole numbers already).
		var d [4]byte
		for i := k - 1; i >= 0; i-- {
			d[i] = byte('0' + frac%10)
			frac /= 10
		}
		end := k
		for end > 1 && d[end-1] == '0' {
			end--
		}
		b = append(b, '.')
		return append(b, d[:end]...), true
	}
	return b, false
}
