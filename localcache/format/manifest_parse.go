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
	if !s.byte('{') {
		return m, false
	}
	var seen uint32
	if !s.byte('}') {
		for {
			k, ok := s.key()
			if !ok {
				return m, false
			}
			var bit uint32
			switch string(k) {
			case "format":
				bit = 1 << 0
				m.Format, ok = s.str()
			case "version":
				bit = 1 << 1
				m.Version, ok = s.int()
			case "dataset":
				bit = 1 << 2
				m.Dataset, ok = s.str()
			case "epoch":
				bit = 1 << 3
				m.Epoch, ok = s.uint()
			case "snapshot_id":
				bit = 1 << 4
				m.SnapshotID, ok = s.str()
			case "covers_through_seq":
				bit = 1 << 5
				m.CoversThroughSeq, ok = s.uint()
			case "rows":
				bit = 1 << 6
				m.Rows, ok = s.int64()
			case "series":
				bit = 1 << 7
				m.Series, ok = s.int()
			case "hot_series":
				bit = 1 << 8
				m.HotSeries, ok = s.int()
			case "batches":
				bit = 1 << 9
				m.Batches, ok = s.int()
			case "period_type":
				bit = 1 << 10
				var p string
				p, ok = s.str()
				m.PeriodType = PeriodType(p)
			case "duplicates":
				bit = 1 << 11
				m.Duplicates, ok = s.int64()
			case "created":
				bit = 1 << 12
				var raw []byte
				if raw, ok = s.raw(); ok {
					ok = m.Created.UnmarshalText(raw) == nil
				}
			case "files":
				bit = 1 << 13
				m.Files, ok = s.files()
			default:
				return m, false
			}
			if !ok || seen&bit != 0 {
				return m, false
			}
			seen |= bit
			if s.byte('}') {
				break
			}
			if !s.byte(',') {
				return m, false
			}
		}
	}
	s.ws()
	return m, s.i == len(s.b)
}

// files reads the "files" array.
func (s *mscan) files() ([]FileInfo, bool) {
	if !s.byte('[') {
		return nil, false
	}
	out := []FileInfo{}
	if s.byte(']') {
		return out, true
	}
	for {
		f, ok := s.file()
		if !ok {
			return nil, false
		}
		out = append(out, f)
		if s.byte(']') {
			return out, true
		}
		if !s.byte(',') {
			return nil, false
		}
	}
}

// file reads one object of the "files" array.
func (s *mscan) file() (f FileInfo, ok bool) {
	if !s.byte('{') {
		return f, false
	}
	if s.byte('}') {
		return f, true
	}
	var seen uint8
	for {
		k, ok := s.key()
		if !ok {
			return f, false
		}
		var bit uint8
		switch string(k) {
		case "name":
			bit = 1
			f.Name, ok = s.str()
		case "size":
			bit = 2
			f.Size, ok = s.int64()
		case "sha256":
			bit = 4
			f.SHA256, ok = s.str()
		case "chunks":
			bit = 8
			f.Chunks, ok = s.strings()
		default:
			return f, false
		}
		if !ok || seen&bit != 0 {
			return f, false
		}
		seen |= bit
		if s.byte('}') {
			return f, true
		}
		if !s.byte(',') {
			return f, false
		}
	}
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
	out := make([]string, 0, bytes.Count(s.b[s.i:s.i+end], []byte{'"'})/2)
	if s.byte(']') {
		return out, true
	}
	for {
		v, ok := s.str()
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
