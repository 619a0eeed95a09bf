package bridge

import (
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/energyscope/energyscope/functions"
)

// call is one decoded element of a /v1/calc request.
type call struct {
	fn   string
	args []any
	err  *functions.CellError // the call itself is malformed (args not an array): its answer
}

// RequestError is a request the bridge refuses as a whole, with the HTTP
// status to answer.
type RequestError struct {
	Status int
	Msg    string
}

func (e *RequestError) Error() string { return e.Msg }

func badRequest(format string, args ...any) *RequestError {
	return &RequestError{Status: http.StatusBadRequest, Msg: fmt.Sprintf(format, args...)}
}

// maxDepth bounds the nesting of JSON arrays and objects in a request (the
// request object, calls, a call, its args, a range, a row: 6 is what Excel
// ever needs).
const maxDepth = 32

// decodeCalc reads a /v1/calc body: {"calls":[{"fn":"ES.Get","args":[...]}, ...]}.
//
// It is a small JSON reader written for this one shape, because the body of
// a big batch is the hot path. It accepts exactly the JSON that
// encoding/json accepts, decodes values the way encoding/json decodes into
// `any` (float64, string, bool, nil, []any, map[string]any; invalid UTF-8
// becomes U+FFFD; duplicate keys: the last wins; unknown keys are ignored)
// and additionally bounds the nesting depth and the number of calls. A call
// whose args is not an array (nor null) decodes with err set, so it gets a
// #VALUE! answer and the others still run; a fn that is not a string is an
// empty name, which the engine answers with #VALUE!. Errors are
// *RequestError: 400 for malformed JSON or a missing "calls", 413 for more
// than maxCalls calls.
func decodeCalc(b []byte, maxCalls int) ([]call, error) {
	d := decoder{b: b}
	d.ws()
	if d.peek() != '{' {
		return nil, d.syntax("want a JSON object {\"calls\":[...]}")
	}
	var calls []call
	seen := false
	more, err := d.begin(0, '}')
	for ; more && err == nil; more, err = d.next('}', err) {
		var key []byte
		if key, err = d.key(); err != nil {
			break
		}
		if string(key) != "calls" {
			_, err = d.value(1)
			continue
		}
		seen = true
		if calls == nil {
			// A call takes at least ~20 bytes; guessing low and growing
			// once or twice beats growing from empty 17 times.
			calls = make([]call, 0, min(maxCalls, len(d.b)/64+1))
		}
		calls = calls[:0]
		if d.peek() == 'n' {
			err = d.literal("null")
			continue
		}
		if d.peek() != '[' {
			err = d.syntax("\"calls\": want an array")
			break
		}
		var elem bool
		elem, err = d.begin(1, ']')
		for ; elem && err == nil; elem, err = d.next(']', err) {
			if len(calls) == maxCalls {
				return nil, &RequestError{Status: http.StatusRequestEntityTooLarge,
					Msg: fmt.Sprintf("too many calls in one request: at most %d; split the batch", maxCalls)}
			}
			var c call
			c, err = d.call(2)
			calls = append(calls, c)
		}
	}
	if err != nil {
		return nil, err
	}
	d.ws()
	if d.i != len(d.b) {
		return nil, d.syntax("unexpected data after the request object")
	}
	if !seen {
		return nil, badRequest("missing \"calls\": want {\"calls\":[{\"fn\":\"ES.Get\",\"args\":[...]}, ...]}")
	}
	return calls, nil
}

// decoder reads JSON from b. Iteration over objects and arrays is written
// as loops over begin/next rather than callbacks, so that reading a call
// allocates only what the call keeps.
type decoder struct {
	b       []byte
	i       int
	scratch []byte // strings with escapes are decoded here
}

func (d *decoder) syntax(msg string) error {
	return badRequest("bad request body at byte %d: %s", d.i, msg)
}

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) peek() byte {
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// begin consumes the '{' or '[' under the cursor; more is false for an
// empty object or array (its closing byte consumed too). Otherwise the
// cursor is on the first key or element.
func (d *decoder) begin(depth int, closing byte) (more bool, err error) {
	if depth >= maxDepth {
		return false, d.syntax("nested too deeply")
	}
	d.i++
	d.ws()
	if d.peek() == closing {
		d.i++
		return false, nil
	}
	return true, nil
}

// next follows a value inside an object or array: ',' (more, the cursor on
// the next key or element) or the closing byte. It passes an error from
// reading the value through, so loops can call it unconditionally.
func (d *decoder) next(closing byte, prev error) (more bool, err error) {
	if prev != nil {
		return false, prev
	}
	d.ws()
	switch d.peek() {
	case ',':
		d.i++
		d.ws()
		return true, nil
	case closing:
		d.i++
		return false, nil
	}
	if closing == '}' {
		return false, d.syntax("want ',' or '}'")
	}
	return false, d.syntax("want ',' or ']'")
}

// key reads `"key":` and leaves the cursor on the value. The bytes are
// valid until the next string is read.
func (d *decoder) key() ([]byte, error) {
	if d.peek() != '"' {
		return nil, d.syntax("want a string key")
	}
	k, err := d.str()
	if err != nil {
		return nil, err
	}
	d.ws()
	if d.peek() != ':' {
		return nil, d.syntax("want ':'")
	}
	d.i++
	d.ws()
	return k, nil
}

// call reads one element of "calls".
func (d *decoder) call(depth int) (call, error) {
	var c call
	if d.peek() != '{' {
		// Not an object: answer it with an error and go on.
		if _, err := d.value(depth); err != nil {
			return c, err
		}
		c.err = &functions.CellError{Code: functions.CodeValue, Message: "bad call: want {\"fn\":..., \"args\":[...]}"}
		return c, nil
	}
	more, err := d.begin(depth, '}')
	for ; more && err == nil; more, err = d.next('}', err) {
		var key []byte
		if key, err = d.key(); err != nil {
			break
		}
		switch string(key) {
		case "fn":
			c.fn = ""
			if d.peek() == '"' {
				var s []byte
				if s, err = d.str(); err == nil {
					c.fn = internFn(s)
				}
			} else {
				_, err = d.value(depth + 1) // not a string: the engine answers #VALUE!
			}
		case "args":
			var v any
			if v, err = d.value(depth + 1); err != nil {
				break
			}
			switch a := v.(type) {
			case []any:
				c.args, c.err = a, nil
			case nil:
				c.args, c.err = nil, nil
			default:
				c.args = nil
				c.err = &functions.CellError{Code: functions.CodeValue, Message: "bad call: \"args\" must be an array"}
			}
		default:
			_, err = d.value(depth + 1)
		}
	}
	return c, err
}

// knownFns are the function names the add-in sends, shared instead of
// allocated once per call.
var knownFns = map[string]string{}

func init() {
	for _, n := range []string{"Get", "Latest", "Info", "Search", "Live", "Revisions"} {
		for _, s := range []string{"ES." + n, "ES." + upper(n), n, upper(n)} {
			knownFns[s] = s
		}
	}
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}

func internFn(b []byte) string {
	if k, ok := knownFns[string(b)]; ok {
		return k
	}
	return string(b)
}

// value reads any JSON value as encoding/json decodes it into `any`.
func (d *decoder) value(depth int) (any, error) {
	switch c := d.peek(); {
	case c == '"':
		s, err := d.str()
		return string(s), err
	case c == '-' || ('0' <= c && c <= '9'):
		return d.number()
	case c == '[':
		out := make([]any, 0, 4)
		more, err := d.begin(depth, ']')
		for ; more && err == nil; more, err = d.next(']', err) {
			var v any
			v, err = d.value(depth + 1)
			out = append(out, v)
		}
		return out, err
	case c == '{':
		out := map[string]any{}
		more, err := d.begin(depth, '}')
		for ; more && err == nil; more, err = d.next('}', err) {
			var key []byte
			if key, err = d.key(); err != nil {
				break
			}
			k := string(key)
			var v any
			v, err = d.value(depth + 1)
			out[k] = v
		}
		return out, err
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == 0 && d.i >= len(d.b):
		return nil, d.syntax("unexpected end of input")
	}
	return nil, d.syntax("want a value")
}

func (d *decoder) literal(s string) error {
	if len(d.b)-d.i < len(s) || string(d.b[d.i:d.i+len(s)]) != s {
		return d.syntax("want " + s)
	}
	d.i += len(s)
	return nil
}

// digits is where the run of decimal digits from b[i] ends, and whether
// there is at least one.
func digits(b []byte, i int) (end int, ok bool) {
	end = i
	for end < len(b) && '0' <= b[end] && b[end] <= '9' {
		end++
	}
	return end, end > i
}

// number reads a JSON number (strict grammar) as float64.
func (d *decoder) number() (float64, error) {
	start := d.i
	b := d.b
	i := d.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i, _ = digits(b, i)
	default:
		d.i = i
		return 0, d.syntax("bad number")
	}
	intEnd := i
	var ok bool
	if i < len(b) && b[i] == '.' {
		if i, ok = digits(b, i+1); !ok {
			d.i = i
			return 0, d.syntax("bad number")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i, ok = digits(b, i); !ok {
			d.i = i
			return 0, d.syntax("bad number")
		}
	}
	d.i = i
	// Whole numbers of up to 15 digits (dates as serials, counts) are exact
	// in float64: skip strconv.
	if intEnd == i {
		digits := b[start:i]
		neg := digits[0] == '-'
		if neg {
			digits = digits[1:]
		}
		if len(digits) <= 15 {
			var n int64
			for _, c := range digits {
				n = n*10 + int64(c-'0')
			}
			if neg {
				if n == 0 {
					return negZero, nil
				}
				n = -n
			}
			return float64(n), nil
		}
	}
	f, err := strconv.ParseFloat(string(b[start:i]), 64)
	if err != nil {
		d.i = start
		return 0, d.syntax("number " + clipBytes(b[start:i]) + " out of range")
	}
	return f, nil
}

var negZero = func() float64 { z := 0.0; return -z }()

func clipBytes(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// str reads a JSON string and returns its decoded bytes: a slice of the
// input when the string is plain ASCII, else of d.scratch; either is valid
// until the next string is read. Invalid UTF-8 and lone surrogates become
// U+FFFD, as in encoding/json.
func (d *decoder) str() ([]byte, error) {
	d.i++ // '"'
	b := d.b
	// Fast path: plain ASCII up to the closing quote.
	start := d.i
	i := start
	for i < len(b) {
		c := b[i]
		if c == '"' {
			d.i = i + 1
			return b[start:i:i], nil
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			break
		}
		i++
	}
	dst := append(d.scratch[:0], b[start:i]...)
	defer func() { d.scratch = dst[:0] }()
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			d.i = i + 1
			return dst, nil
		case c < 0x20:
			d.i = i
			return nil, d.syntax("control character in string")
		case c == '\\':
			i++
			if i >= len(b) {
				d.i = i
				return nil, d.syntax("unexpected end of input in string")
			}
			switch e := b[i]; e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				dst = append(dst, unescape[e])
				i++
			case 'u':
				r, ok := hex4(b, i+1)
				if !ok {
					d.i = i
					return nil, d.syntax("bad \\u escape")
				}
				i += 5
				if utf16.IsSurrogate(r) {
					// A high surrogate followed by an escaped low one is one rune.
					if r2, ok := hex4(b, i+2); ok && i+1 < len(b) && b[i] == '\\' && b[i+1] == 'u' {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							r = dec
							i += 6
						} else {
							r = utf8.RuneError
						}
					} else {
						r = utf8.RuneError
					}
				}
				dst = utf8.AppendRune(dst, r)
			default:
				d.i = i
				return nil, d.syntax("bad escape in string")
			}
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, b[i:i+size]...)
			}
			i += size
		}
	}
	d.i = i
	return nil, d.syntax("unexpected end of input in string")
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// unescape maps the letter of a one-letter JSON escape to its byte.
var unescape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}
