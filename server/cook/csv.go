package cook

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

const (
	csvBufSize   = 1 << 20  // bytes per read
	csvMaxRecord = 64 << 20 // a record longer than this is an error, not an OOM
)

// csvScanner splits CSV into records without allocating per record. The
// fields it returns point into its buffer (or its scratch for quoted
// records) and are valid until the next call to next.
//
// Invariant: buf[pos:end] is unread input; a record is always parsed from
// its first byte, so refilling (which moves buf[pos:end] to the front) only
// ever restarts the record being parsed.
type csvScanner struct {
	r        io.Reader
	buf      []byte
	pos, end int
	eof      bool
	rerr     error // read error other than io.EOF
	started  bool  // the BOM check has run (it needs 3 bytes or EOF)

	line    int64 // physical line number of the next byte at pos (1-based)
	recLine int64 // line of the record last returned
	fields  [][]byte
	scratch []byte
	offs    []int
}

func newCSVScanner(r io.Reader) *csvScanner {
	return &csvScanner{r: r, buf: make([]byte, csvBufSize), line: 1}
}

// fill moves the unread bytes to the front and reads more, growing the
// buffer when it is full. It returns false when nothing more can be read.
func (s *csvScanner) fill() (bool, error) {
	if s.eof {
		return false, nil
	}
	if s.pos > 0 {
		s.started = true // input was consumed: no BOM can follow
		s.end = copy(s.buf, s.buf[s.pos:s.end])
		s.pos = 0
	}
	if s.end == len(s.buf) {
		if len(s.buf) >= csvMaxRecord {
			return false, fmt.Errorf("%w: more than %d bytes", ErrLineTooLong, csvMaxRecord)
		}
		nb := make([]byte, 2*len(s.buf))
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	n0 := s.end
	for s.end < len(s.buf) {
		n, err := s.r.Read(s.buf[s.end:])
		s.end += n
		if err != nil {
			s.eof = true
			if err != io.EOF {
				s.rerr = err
			}
			break
		}
		if n == 0 {
			continue
		}
	}
	if !s.started && (s.end >= 3 || s.eof) {
		s.started = true
		if bytes.HasPrefix(s.buf[:s.end], []byte("\xEF\xBB\xBF")) {
			s.pos = 3
		}
	}
	if s.rerr != nil {
		return false, s.rerr
	}
	return s.end > n0, nil
}

// next returns the next non-blank record. It returns (nil, nil) at the end
// of input. A *recordError is a malformed record that has been consumed
// (the caller may skip it); any other error is fatal.
func (s *csvScanner) next() ([][]byte, error) {
	for {
		data := s.buf[s.pos:s.end]
		i := bytes.IndexByte(data, '\n')
		var line []byte
		switch {
		case i >= 0:
			line = data[:i]
		case !s.eof:
			if _, err := s.fill(); err != nil {
				return nil, err
			}
			continue
		case len(data) == 0:
			return nil, nil
		default: // last line without newline
			line = data
			i = len(data) - 1
		}
		if bytes.IndexByte(line, '"') >= 0 {
			return s.quoted()
		}
		s.recLine = s.line
		s.line++
		s.pos += i + 1
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		if len(line) == 0 {
			continue
		}
		f := s.fields[:0]
		for {
			j := bytes.IndexByte(line, ',')
			if j < 0 {
				break
			}
			f = append(f, line[:j])
			line = line[j+1:]
		}
		s.fields = append(f, line)
		return s.fields, nil
	}
}

// recordError is a malformed record that the scanner has already consumed.
type recordError struct{ err error }

func (e *recordError) Error() string { return e.err.Error() }
func (e *recordError) Unwrap() error { return e.err }

// quoted parses one record at pos under RFC 4180: a field that starts with a
// double quote runs to the next lone double quote, "" is a literal quote,
// and commas and newlines inside are data. A quote inside an unquoted field
// is taken literally.
func (s *csvScanner) quoted() ([][]byte, error) {
restart:
	buf, i, end := s.buf, s.pos, s.end
	s.scratch, s.offs = s.scratch[:0], s.offs[:0]
	nl := int64(0)
	var bad error
	for {
		// At the start of a field.
		if i < end && buf[i] == '"' {
			i++
			for {
				j := bytes.IndexByte(buf[i:end], '"')
				if j < 0 {
					if !s.eof {
						if _, err := s.fill(); err != nil {
							return nil, err
						}
						goto restart
					}
					// Unterminated: the rest of the input is this record.
					nl += int64(bytes.Count(buf[i:end], []byte{'\n'}))
					s.recLine = s.line
					s.line += nl + 1
					s.pos = end
					return nil, &recordError{fmt.Errorf("%w: quoted field not closed before end of input", ErrQuote)}
				}
				seg := buf[i : i+j]
				nl += int64(bytes.Count(seg, []byte{'\n'}))
				s.scratch = append(s.scratch, seg...)
				i += j + 1
				if i == end && !s.eof {
					if _, err := s.fill(); err != nil {
						return nil, err
					}
					goto restart
				}
				if i < end && buf[i] == '"' {
					s.scratch = append(s.scratch, '"')
					i++
					continue
				}
				break
			}
			s.offs = append(s.offs, len(s.scratch))
			// After the closing quote: a comma, the end of the line or of
			// the input.
			switch {
			case i < end && buf[i] == ',':
				i++
				continue
			case i == end:
				goto done
			case buf[i] == '\n':
				i++
				goto done
			case buf[i] == '\r' && i+1 < end && buf[i+1] == '\n':
				i += 2
				goto done
			case buf[i] == '\r' && i+1 == end:
				if !s.eof {
					if _, err := s.fill(); err != nil {
						return nil, err
					}
					goto restart
				}
				i++
				goto done
			}
			if bad == nil {
				bad = fmt.Errorf("%w: %q after closing quote", ErrQuote, buf[i])
			}
			// Resynchronise: take the rest of this field literally.
		}
		// Unquoted field (or the tail of a badly quoted one).
		j := i
		for j < end && buf[j] != ',' && buf[j] != '\n' {
			j++
		}
		if j == end && !s.eof {
			if _, err := s.fill(); err != nil {
				return nil, err
			}
			goto restart
		}
		fld := buf[i:j]
		if j == end || buf[j] == '\n' {
			if len(fld) > 0 && fld[len(fld)-1] == '\r' {
				fld = fld[:len(fld)-1]
			}
		}
		s.scratch = append(s.scratch, fld...)
		s.offs = append(s.offs, len(s.scratch))
		if j < end && buf[j] == ',' {
			i = j + 1
			continue
		}
		if j < end {
			j++ // the newline
		}
		i = j
		goto done
	}
done:
	s.recLine = s.line
	s.line += nl + 1
	s.pos = i
	f := s.fields[:0]
	prev := 0
	for _, o := range s.offs {
		f = append(f, s.scratch[prev:o:o])
		prev = o
	}
	s.fields = f
	if bad != nil {
		return nil, &recordError{bad}
	}
	return f, nil
}

func newGzipReader(r io.Reader) (*gzip.Reader, error) {
	// A large bufio.Reader gives gzip its ReadByte and reads the file (and
	// calls Progress) a MiB at a time rather than 4 KiB.
	zr, err := gzip.NewReader(bufio.NewReaderSize(r, csvBufSize))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return zr, nil
}

var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseValue reads a finite float. Plain decimals with at most 15
// significant digits take an exact fast path (Clinger: an integer below 2^53
// divided by an exact power of ten rounds correctly); the rest go to
// strconv.ParseFloat.
func parseValue[T ~string | ~[]byte](b T) (float64, error) {
	b = trimBlank(b)
	i, neg := 0, false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg, i = b[0] == '-', 1
	}
	var mant uint64
	sig, frac, nd := 0, 0, 0
	dot := false
	for ; i < len(b); i++ {
		c := b[i]
		if c >= '0' && c <= '9' {
			nd++
			if mant != 0 || c != '0' {
				sig++
			}
			mant = mant*10 + uint64(c-'0')
			if dot {
				frac++
			}
			if sig > 15 {
				return parseValueSlow(b)
			}
			continue
		}
		if c == '.' && !dot {
			dot = true
			continue
		}
		return parseValueSlow(b)
	}
	if nd == 0 || frac > 22 {
		return parseValueSlow(b)
	}
	f := float64(mant)
	if frac > 0 {
		f /= pow10[frac]
	}
	if neg {
		f = -f
	}
	return f, nil
}

func parseValueSlow[T ~string | ~[]byte](b T) (float64, error) {
	if !isDecimal(b) {
		if isNonFinite(b) {
			return 0, fmt.Errorf("value %q: %w", b, ErrNotFinite)
		}
		return 0, fmt.Errorf("value %q: %w", b, ErrNotNumber)
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) && math.IsInf(f, 0) {
			return 0, fmt.Errorf("value %q: %w", b, ErrNotFinite)
		}
		return 0, fmt.Errorf("value %q: %w", b, ErrNotNumber)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("value %q: %w", b, ErrNotFinite)
	}
	return f, nil
}

// ParseValue reads a value cell the way cook does (surrounding blanks
// ignored): a decimal number, [+-]digits[.digits][e[+-]digits], finite.
// strconv.ParseFloat alone would also take 1_000, 0x1p-2, Inf and NaN.
func ParseValue[T ~string | ~[]byte](s T) (float64, error) {
	return parseValue(s)
}

// isDecimal reports whether b is [+-]? (d+ (. d*)? | . d+) ([eE] [+-]? d+)?.
func isDecimal[T ~string | ~[]byte](b T) bool {
	i := 0
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		i++
	}
	nd := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i, nd = i+1, nd+1
	}
	if i < len(b) && b[i] == '.' {
		i++
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i, nd = i+1, nd+1
		}
	}
	if nd == 0 {
		return false
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		ne := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i, ne = i+1, ne+1
		}
		if ne == 0 {
			return false
		}
	}
	return i == len(b)
}

// isNonFinite reports whether b spells NaN or an infinity, which are
// numbers but not values.
func isNonFinite[T ~string | ~[]byte](b T) bool {
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		b = b[1:]
	}
	switch strings.ToLower(string(b)) {
	case "nan", "inf", "infinity":
		return true
	}
	return false
}

func trimBlank[T ~string | ~[]byte](b T) T {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// addCSV reads a whole CSV stream; sizeHint (bytes, -1 if unknown) sizes the
// table's columns up front.
func (b *Builder) addCSV(r io.Reader, name string, sizeHint int64, o InputOptions) (FileStats, error) {
	tx, err := b.begin(name, o)
	if err != nil {
		return FileStats{Path: name}, err
	}
	return tx.finish(tx.readCSV(r, sizeHint))
}

func (tx *fileTx) readCSV(r io.Reader, sizeHint int64) error {
	s := newCSVScanner(r)
	hdr, err := s.next()
	if err != nil {
		var re *recordError
		if !errors.As(err, &re) {
			return &InputError{File: tx.name, Err: err}
		}
		return &InputError{File: tx.name, Line: s.recLine, Err: fmt.Errorf("header: %w", re.err)}
	}
	if hdr == nil {
		return &InputError{File: tx.name, Err: fmt.Errorf("%w: no header", ErrEmpty)}
	}
	cols := make([]string, len(hdr))
	for i, h := range hdr {
		cols[i] = string(h)
	}
	l, err := tx.resolve(cols)
	if err != nil {
		return err
	}
	if sizeHint > 0 {
		// Estimate the rows from the bytes per line of the first buffer.
		if lines := bytes.Count(s.buf[s.pos:s.end], []byte{'\n'}); lines > 16 {
			est := sizeHint * int64(lines) / int64(s.end-s.pos) * 21 / 20
			if o := tx.o; o.Wide {
				est *= int64(len(l.wide))
			}
			tx.grow(est)
		}
	}
	if tx.o.Wide {
		return tx.readCSVWide(s, l)
	}
	return tx.readCSVLong(s, l)
}

// skipOrFail turns a scanner error into a skipped record or the call's error.
func (tx *fileTx) skipOrFail(s *csvScanner, err error) error {
	var re *recordError
	if errors.As(err, &re) {
		return tx.bad(s.recLine, false, re.err)
	}
	return &InputError{File: tx.name, Line: s.line, Err: err}
}

// nextRow returns the next record that has ncol fields, skipping (or
// failing on, without --skip-bad) bad ones; nil at the end of the input.
func (tx *fileTx) nextRow(s *csvScanner, ncol int) ([][]byte, error) {
	for {
		rec, err := s.next()
		if err != nil {
			if err = tx.skipOrFail(s, err); err != nil {
				return nil, err
			}
			continue
		}
		if rec == nil || len(rec) == ncol {
			return rec, nil
		}
		if err := tx.bad(s.recLine, false, fmt.Errorf("%w: %d, want %d", ErrFieldCount, len(rec), ncol)); err != nil {
			return nil, err
		}
	}
}

func (tx *fileTx) readCSVLong(s *csvScanner, l layout) error {
	t := &tx.b.t
	ncol := len(l.names)
	hasMeta := false
	for _, m := range l.meta {
		hasMeta = hasMeta || m >= 0
	}
	for {
		rec, err := tx.nextRow(s, ncol)
		if rec == nil || err != nil {
			return err
		}
		val := trimBlank(rec[l.value]) // a blank cell is empty, as in a wide file
		if len(val) == 0 {
			tx.stats.Empty++
			continue
		}
		v, err := parseValue(val)
		if err != nil {
			if err := tx.bad(s.recLine, false, err); err != nil {
				return err
			}
			continue
		}
		p, ok := parsePeriod(rec[l.period])
		if !ok {
			if err := tx.bad(s.recLine, false, fmt.Errorf("period %q: %w", rec[l.period], ErrBadPeriod)); err != nil {
				return err
			}
			continue
		}
		id := rec[l.series]
		if len(id) == 0 {
			if err := tx.bad(s.recLine, false, ErrEmptyID); err != nil {
				return err
			}
			continue
		}
		idx, err := seriesOf(tx, id)
		if err != nil {
			if err := tx.bad(s.recLine, false, err); err != nil {
				return err
			}
			continue
		}
		if hasMeta {
			if err := tx.rowMeta(idx, l, rec); err != nil {
				if err := tx.bad(s.recLine, false, err); err != nil {
					return err
				}
				continue
			}
		}
		t.SeriesIdx = append(t.SeriesIdx, idx)
		t.Period = append(t.Period, p)
		t.Value = append(t.Value, v)
	}
}

func (tx *fileTx) rowMeta(idx uint32, l layout, rec [][]byte) error {
	// Validate the frequency before setting anything, so a skipped row
	// leaves no metadata behind.
	if c := l.meta[metaFrequency]; c >= 0 {
		if err := setMeta(tx, idx, metaFrequency, rec[c]); err != nil {
			return err
		}
	}
	for f := range metaFrequency {
		if c := l.meta[f]; c >= 0 {
			setMeta(tx, idx, f, rec[c])
		}
	}
	return nil
}

func (tx *fileTx) readCSVWide(s *csvScanner, l layout) error {
	t := &tx.b.t
	ncol := len(l.names)
	idx := make([]int64, len(l.wide)) // series index per column, -1 until seen
	for i := range idx {
		idx[i] = -1
	}
	vals := make([]float64, len(l.wide))
	nan := math.NaN()
	for {
		rec, err := tx.nextRow(s, ncol)
		if rec == nil || err != nil {
			return err
		}
		p, ok := parsePeriod(rec[l.period])
		if !ok {
			if err := tx.bad(s.recLine, false, fmt.Errorf("period %q: %w", rec[l.period], ErrBadPeriod)); err != nil {
				return err
			}
			continue
		}
		// Parse the whole line before appending, so a skipped line adds
		// nothing. NaN marks an empty cell (a NaN value is an error).
		var rowErr error
		empty := int64(0)
		for k, c := range l.wide {
			cell := trimBlank(rec[c])
			if len(cell) == 0 {
				vals[k] = nan
				empty++
				continue
			}
			v, err := parseValue(cell)
			if err != nil {
				rowErr = fmt.Errorf("column %q: %w", l.names[c], err)
				break
			}
			vals[k] = v
		}
		if rowErr != nil {
			if err := tx.bad(s.recLine, false, rowErr); err != nil {
				return err
			}
			continue
		}
		tx.stats.Empty += empty
		for k, v := range vals {
			if v != v {
				continue
			}
			if idx[k] < 0 {
				idx[k] = int64(tx.wideSeries(l.names[l.wide[k]]))
			}
			t.SeriesIdx = append(t.SeriesIdx, uint32(idx[k]))
			t.Period = append(t.Period, p)
			t.Value = append(t.Value, v)
		}
	}
}

// wideSeries returns the series of a wide column (resolve validated its
// id).
func (tx *fileTx) wideSeries(col string) uint32 {
	tx.key = append(tx.key[:len(tx.o.Prefix)], col...)
	idx, _ := lookup(tx.b, tx.key)
	return idx
}
