package format

import (
	"bytes"
	"math"
)

// parseManifestFast decodes manifest.json in the form this package writes
// it, without reflection: every open reads the manifest, and
// encoding/json took 0.1 ms of a 0.6 ms open at pet scale (most of it
// building its decoders on the first call of a process) and 0.3-0.5 ms
// at full scale, whose manifest lists 680 chunk hashes (BENCHMARKS.md
// "The open of a fresh process").
//
// It reads a subset of JSON: one object of the Manifest's keys, spelled
// as their tags, each at most once; strings of printable ASCII without
// escapes; integers without fraction or exponent. ok is false for
// anything else (an unknown key, a key in another case, null, an escape,
// a number out of range, bytes after the object), and ParseManifest then
// decodes b with encoding/json, which may accept it. When ok is true, m
// is what json.Unmarshal makes of b (FuzzParseManifest checks it).
func parseManifestFast(b []byte) (m Manifest, ok bool) {
	// Every string of the manifest is a substring of one copy of b: one
	// allocation, not one per chunk hash.
	s := mscan{b: b, str0: string(b)}
	ok = s.byte('{') && s.object(func(k []byte) (bit uint32, ok bool) {
		switch string(k) {
		case "format":
			m.Format, ok = s.str()
			return 1 << 0, ok
		case "version":
			m.Version, ok = s.int()
			return 1 << 1, ok
		case "dataset":
			m.Dataset, ok = s.str()
			return 1 << 2, ok
		case "epoch":
			m.Epoch, ok = s.uint()
			return 1 << 3, ok
		case "snapshot_id":
			m.SnapshotID, ok = s.str()
			return 1 << 4, ok
		case "covers_through_seq":
			m.CoversThroughSeq, ok = s.uint()
			return 1 << 5, ok
		case "rows":
			m.Rows, ok = s.int64()
			return 1 << 6, ok
		case "series":
			m.Series, ok = s.int()
			return 1 << 7, ok
		case "hot_series":
			m.HotSeries, ok = s.int()
			return 1 << 8, ok
		case "batches":
			m.Batches, ok = s.int()
			return 1 << 9, ok
		case "period_type":
			var p string
			p, ok = s.str()
			m.PeriodType = PeriodType(p)
			return 1 << 10, ok
		case "duplicates":
			m.Duplicates, ok = s.int64()
			return 1 << 11, ok
		case "created":
			raw, ok := s.raw()
			return 1 << 12, ok && m.Created.UnmarshalText(raw) == nil
		case "files":
			if !s.byte('[') {
				return 0, false
			}
			m.Files, ok = elements(&s, []FileInfo{}, s.file)
			return 1 << 13, ok
		}
		return 0, false
	})
	s.ws()
	return m, ok && s.i == len(s.b)
}

// file reads one object of the "files" array.
func (s *mscan) file() (f FileInfo, ok bool) {
	ok = s.byte('{') && s.object(func(k []byte) (bit uint32, ok bool) {
		switch string(k) {
		case "name":
			f.Name, ok = s.str()
			return 1, ok
		case "size":
			f.Size, ok = s.int64()
			return 2, ok
		case "sha256":
			f.SHA256, ok = s.str()
			return 4, ok
		case "chunks":
			f.Chunks, ok = s.strings()
			return 8, ok
		}
		return 0, false
	})
	return f, ok
}

// strings reads an array of strings.
func (s *mscan) strings() ([]string, bool) {
	if !s.byte('[') {
		return nil, false
	}
	// Sized by the quotes before the next ']': a chunk list's exact
	// length (a hint only where a string holds a ']').
	end := bytes.IndexByte(s.b[s.i:], ']')
	if end < 0 {
		return nil, false
	}
	return elements(s, make([]string, 0, bytes.Count(s.b[s.i:s.i+end], []byte{'"'})/2), s.str)
}

// object reads the members of an object after its '{' through its '}':
// field reads the value of key k and returns the key's bit (a key whose
// bit was seen before, or a field that returns false, refuses the
// object).
func (s *mscan) object(field func(k []byte) (bit uint32, ok bool)) bool {
	if s.byte('}') {
		return true
	}
	var seen uint32
	for {
		k, ok := s.key()
		if !ok {
			return false
		}
		bit, ok := field(k)
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		if s.byte('}') {
			return true
		}
		if !s.byte(',') {
			return false
		}
	}
}

// elements reads the elements of an array after its '[' through its ']',
// each by elem, appended to out.
func elements[T any](s *mscan, out []T, elem func() (T, bool)) ([]T, bool) {
	if s.byte(']') {
		return out, true
	}
	for {
		v, ok := elem()
		if !ok {
			return nil, false
		}
		out = append(out, v)
		if s.byte(']') {
			return out, true
		}
		if !s.byte(',') {
			return nil, false
		}
	}
}

// mscan is parseManifestFast's position in its input.
type mscan struct {
	b    []byte
	i    int
	str0 string // b as a string
}

func (s *mscan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// byte consumes c, after whitespace, if it is next.
func (s *mscan) byte(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// raw reads a string and returns its bytes (aliasing the input): printable
// ASCII, no escapes.
func (s *mscan) raw() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	n := bytes.IndexByte(s.b[s.i:], '"')
	if n < 0 {
		return nil, false
	}
	v := s.b[s.i : s.i+n]
	var bad byte
	for _, c := range v {
		bad |= notPlain[c]
	}
	s.i += n + 1
	return v, bad == 0
}

// notPlain is 1 for the bytes raw refuses in a string: control characters,
// the backslash (an escape) and every byte of a multi-byte UTF-8 sequence.
var notPlain = func() (t [256]byte) {
	for c := range t {
		if c < 0x20 || c >= 0x80 || c == '\\' {
			t[c] = 1
		}
	}
	return t
}()

func (s *mscan) str() (string, bool) {
	v, ok := s.raw()
	if !ok {
		return "", false
	}
	at := s.i - 1 - len(v) // v ends before the closing quote at s.i-1
	return s.str0[at : at+len(v)], true
}

// key reads an object key and the colon after it.
func (s *mscan) key() ([]byte, bool) {
	k, ok := s.raw()
	return k, ok && s.byte(':')
}

// uint reads a non-negative integer.
func (s *mscan) uint() (uint64, bool) {
	s.ws()
	return s.digits()
}

// digits reads "0" or digits not starting with 0 (JSON's integer part).
func (s *mscan) digits() (uint64, bool) {
	start := s.i
	var v uint64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		d := uint64(s.b[s.i] - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
		s.i++
	}
	n := s.i - start
	return v, n > 0 && (n == 1 || s.b[start] != '0')
}

// int64 reads an integer with an optional minus sign.
func (s *mscan) int64() (int64, bool) {
	s.ws()
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg {
		s.i++
	}
	u, ok := s.digits()
	switch {
	case !ok:
		return 0, false
	case neg && u <= 1<<63:
		return int64(-u), true // -(1<<63) wraps to itself
	case !neg && u < 1<<63:
		return int64(u), true
	}
	return 0, false
}

func (s *mscan) int() (int, bool) {
	v, ok := s.int64()
	return int(v), ok && v >= math.MinInt && v <= math.MaxInt
}
