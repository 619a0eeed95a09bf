// Package cook turns source files (CSV, Parquet, Arrow IPC) into the
// format.Table that localcache/format writes as a snapshot.
//
// A Builder accumulates any number of files. Series are deduplicated by id
// through one map; rows are appended in input order, so the writer's "last row
// wins" rule resolves duplicates the way a reader of the files expects. The
// first non-empty unit, name, source and frequency seen for a series is kept.
//
// Two shapes are read:
//
//   - long: one row per point, with a series column, a period column and a
//     value column (defaults "series_id", "period", "value"), and optional
//     metadata columns "unit", "name", "source", "frequency" taken by name;
//   - wide (InputOptions.Wide): a period column and one column per series,
//     the series id being Prefix + the column name.
//
// An empty value cell (or an Arrow/Parquet null) is no point, not an error;
// it is counted in FileStats.Empty.
//
// The CSV reader is a byte-level scanner over 1 MiB reads that allocates
// nothing per row on the common path (unquoted fields, a series seen before);
// a line with a quote takes a slower RFC 4180 path. Periods go through
// ParsePeriod. Parquet and Arrow files are read record batch by record batch.
//
// Every input error names the file, the line (CSV) or row (Parquet, Arrow),
// and the reason, and wraps one of the sentinels below. With
// InputOptions.SkipBad, bad rows are counted in FileStats.Skipped instead;
// structural problems (missing columns, no rows at all) still fail. A failed
// AddFile leaves the Builder as it was before the call.
//
// This package does not write snapshots, normalize periods or infer
// frequencies: that is localcache/format's job.
package cook

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/energyscope/energyscope/localcache/format"
)

// Sentinels wrapped by input errors; test with errors.Is.
var (
	// ErrBadInput matches every *InputError (errors.Is(err, ErrBadInput)):
	// the input cannot be accepted as it is. The server's ErrBadInput is
	// this same value.
	ErrBadInput      = errors.New("bad input")
	ErrEmpty         = errors.New("no rows")
	ErrMissingColumn = errors.New("missing column")
	ErrFieldCount    = errors.New("wrong number of fields")
	ErrNotNumber     = errors.New("not a number")
	ErrNotFinite     = errors.New("not a finite number")
	ErrQuote         = errors.New("bad quoting")
	ErrEmptyID       = errors.New("empty series id")
	ErrBadFrequency  = errors.New("bad frequency")
	ErrUnsupported   = errors.New("unsupported input")
	ErrLineTooLong   = errors.New("record too long")
	// ErrDuplicateColumn: two columns of a file have the name of one role.
	ErrDuplicateColumn = errors.New("duplicate column")
	// ErrBadID is format.ErrBadSeriesID: an id that breaks the rules of
	// format.ValidSeriesID (length, UTF-8, control characters).
	ErrBadID = format.ErrBadSeriesID
)

// InputOptions says how to read one file.
type InputOptions struct {
	// SeriesCol, PeriodCol and ValueCol name the columns of a long file;
	// "" means "series_id", "period" and "value". Names match exactly, or
	// else ignoring case and surrounding spaces.
	SeriesCol, PeriodCol, ValueCol string
	// Wide: PeriodCol is the period column and every other column is one
	// series.
	Wide bool
	// Prefix is prepended to every series id (the column name in a wide file,
	// the series cell in a long one).
	Prefix string
	// SkipBad skips and counts malformed rows instead of failing.
	SkipBad bool
	// Frequency, when set, is the frequency of every series in this file and
	// wins over a frequency column. "" takes the column or leaves it to the
	// writer to infer.
	Frequency string
	// Unit and Source are given to series of this file that have none.
	Unit, Source string
	// Progress, when set, is called with the bytes of input consumed so far
	// and the total (-1 when unknown). For Parquet and Arrow files the bytes
	// are estimated from the rows or batches read.
	Progress func(done, total int64)
}

// The default column names of a long table's series id, period and value
// (InputOptions, and the server's update rows).
const (
	DefaultSeriesCol = "series_id"
	DefaultPeriodCol = "period"
	DefaultValueCol  = "value"
)

func (o InputOptions) withDefaults() InputOptions {
	o.SeriesCol = cmp.Or(o.SeriesCol, DefaultSeriesCol)
	o.PeriodCol = cmp.Or(o.PeriodCol, DefaultPeriodCol)
	o.ValueCol = cmp.Or(o.ValueCol, DefaultValueCol)
	return o
}

// FileStats reports what one file contributed.
type FileStats struct {
	Path string
	// Rows is the number of points appended to the table (in a wide file,
	// non-empty cells).
	Rows int64
	// Skipped is the number of bad records skipped under SkipBad.
	Skipped int64
	// Empty is the number of cells with no value (empty CSV cells, nulls).
	Empty int64
	// Series is the number of distinct series with rows in this file.
	Series int
	// FirstSkipped is the error of the first skipped record, if any.
	FirstSkipped error
}

// InputError is an error in the content of an input file.
type InputError struct {
	File string
	Line int64 // 1-based CSV line, or 1-based data row for Parquet/Arrow; 0 if none
	Row  bool  // Line counts data rows, not text lines
	Err  error
}

func (e *InputError) Error() string {
	switch {
	case e.Line == 0:
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	case e.Row:
		return fmt.Sprintf("%s: row %d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

func (e *InputError) Unwrap() error { return e.Err }

// Is makes every InputError match ErrBadInput.
func (e *InputError) Is(target error) bool { return target == ErrBadInput }

// Builder accumulates files into one format.Table. It is not safe for
// concurrent use.
type Builder struct {
	t     format.Table
	ids   map[string]uint32           // series id -> index in t.Series
	freqs map[string]format.Frequency // validated spellings of frequencies
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder {
	return &Builder{ids: make(map[string]uint32), freqs: make(map[string]format.Frequency)}
}

// Table returns the table built so far. It is the Builder's own table, not a
// copy: further Add calls change it.
func (b *Builder) Table() *format.Table { return &b.t }

// AddFile reads one file, choosing the reader by extension: .csv (or .txt),
// .csv.gz, .parquet (or .pq), and .arrow/.arrows/.feather/.ipc, which are
// read as an Arrow IPC file when they have its magic and as an IPC stream
// otherwise. Errors name the path as given.
func (b *Builder) AddFile(path string, o InputOptions) (FileStats, error) {
	lower := strings.ToLower(path)
	kind := ""
	switch {
	case strings.HasSuffix(lower, ".csv"), strings.HasSuffix(lower, ".txt"):
		kind = "csv"
	case strings.HasSuffix(lower, ".csv.gz"):
		kind = "csv.gz"
	case strings.HasSuffix(lower, ".parquet"), strings.HasSuffix(lower, ".pq"):
		kind = "parquet"
	case strings.HasSuffix(lower, ".arrow"), strings.HasSuffix(lower, ".feather"),
		strings.HasSuffix(lower, ".ipc"), strings.HasSuffix(lower, ".arrows"):
		kind = "arrow"
	default:
		return FileStats{Path: path}, &InputError{File: path,
			Err: fmt.Errorf("%w: extension %q (want .csv, .csv.gz, .parquet, .arrow, .arrows, .feather or .ipc)", ErrUnsupported, filepath.Ext(path))}
	}
	f, err := os.Open(path)
	if err != nil {
		return FileStats{Path: path}, err
	}
	defer f.Close()
	var size int64 = -1
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		size = fi.Size()
	}
	if kind == "parquet" || kind == "arrow" {
		tx, err := b.begin(path, o)
		if err != nil {
			return FileStats{Path: path}, err
		}
		if kind == "parquet" {
			return tx.finish(tx.readParquet(f, size))
		}
		return tx.finish(tx.readArrow(f, size))
	}
	var r io.Reader = f
	if o.Progress != nil {
		r = &progressReader{r: f, total: size, fn: o.Progress}
	}
	hint := size
	if kind == "csv.gz" {
		zr, err := newGzipReader(r)
		if err != nil {
			return FileStats{Path: path}, &InputError{File: path, Err: err}
		}
		defer zr.Close()
		r, hint = zr, size*4
	}
	return b.addCSV(r, path, hint, o)
}

// AddCSV reads CSV from r; name is used in errors and FileStats.Path.
func (b *Builder) AddCSV(r io.Reader, name string, o InputOptions) (FileStats, error) {
	// Size the table up front when the reader knows its length.
	var hint int64 = -1
	switch x := r.(type) {
	case interface{ Len() int }: // bytes.Reader, bytes.Buffer, strings.Reader
		hint = int64(x.Len())
	case *os.File:
		if fi, err := x.Stat(); err == nil && fi.Mode().IsRegular() {
			if off, err := x.Seek(0, io.SeekCurrent); err == nil {
				hint = fi.Size() - off
			}
		}
	}
	if o.Progress != nil {
		r = &progressReader{r: r, total: hint, fn: o.Progress}
	}
	return b.addCSV(r, name, hint, o)
}

type progressReader struct {
	r     io.Reader
	done  int64
	total int64
	fn    func(done, total int64)
}

func (p *progressReader) Read(buf []byte) (int, error) {
	n, err := p.r.Read(buf)
	if n > 0 {
		p.done += int64(n)
		p.fn(p.done, p.total)
	}
	return n, err
}

// fileTx is the state of one Add call: where the table stood before it (to
// roll back on error) and the counters of its FileStats.
type fileTx struct {
	b       *Builder
	o       InputOptions
	name    string
	stats   FileStats
	rows0   int
	series0 int
	undo    []metaUndo
	freq    format.Frequency // validated o.Frequency
	key     []byte           // Prefix + id scratch
	lastID  []byte           // id of the previous row (without prefix)
	lastIdx uint32
	hasLast bool
	wideIdx []int64 // Arrow/Parquet wide: series index per column, -1 until seen
}

type metaUndo struct {
	idx  uint32
	meta format.SeriesMeta
}

func (b *Builder) begin(name string, o InputOptions) (*fileTx, error) {
	tx := &fileTx{b: b, o: o.withDefaults(), name: name, stats: FileStats{Path: name},
		rows0: len(b.t.Period), series0: len(b.t.Series)}
	if o.Frequency != "" {
		f, err := format.ParseFrequency(o.Frequency)
		if err != nil {
			return nil, &InputError{File: name, Err: fmt.Errorf("%w: option: %v", ErrBadFrequency, err)}
		}
		tx.freq = f
	}
	tx.key = append(tx.key, o.Prefix...)
	return tx, nil
}

// seriesOf returns the index of the series with id Prefix+id, creating it
// (after format.ValidSeriesID: cook and live ingest share the id rules). A
// hit allocates nothing and validates nothing again.
func seriesOf[T ~string | ~[]byte](tx *fileTx, id T) (uint32, error) {
	if tx.hasLast && string(id) == string(tx.lastID) {
		return tx.lastIdx, nil
	}
	var idx uint32
	var err error
	if len(tx.o.Prefix) == 0 {
		idx, err = lookup(tx.b, id)
	} else {
		tx.key = append(tx.key[:len(tx.o.Prefix)], id...)
		idx, err = lookup(tx.b, tx.key)
	}
	if err != nil {
		return 0, err
	}
	tx.lastID = append(tx.lastID[:0], id...)
	tx.lastIdx, tx.hasLast = idx, true
	return idx, nil
}

func lookup[T ~string | ~[]byte](b *Builder, id T) (uint32, error) {
	if i, ok := b.ids[string(id)]; ok {
		return i, nil
	}
	if err := format.ValidSeriesID(id); err != nil {
		return 0, err
	}
	s := string(id)
	i := uint32(len(b.t.Series))
	b.t.Series = append(b.t.Series, format.SeriesMeta{ID: s})
	b.ids[s] = i
	return i, nil
}

type metaField int

const (
	metaUnit metaField = iota
	metaName
	metaSource
	metaFrequency
	numMeta
)

var metaNames = [numMeta]string{"unit", "name", "source", "frequency"}

// setMeta records a metadata cell for series idx; the first non-empty value
// wins. Frequencies are validated on every row (through a cache of the
// spellings seen) so that a bad one is reported where it stands.
func setMeta[T ~string | ~[]byte](tx *fileTx, idx uint32, f metaField, v T) error {
	if len(v) == 0 {
		return nil
	}
	m := &tx.b.t.Series[idx]
	switch f {
	case metaUnit:
		if m.Unit == "" {
			tx.save(idx)
			m.Unit = string(v)
		}
	case metaName:
		if m.Name == "" {
			tx.save(idx)
			m.Name = string(v)
		}
	case metaSource:
		if m.Source == "" {
			tx.save(idx)
			m.Source = string(v)
		}
	case metaFrequency:
		if tx.freq != "" {
			return nil // the option wins
		}
		fq, ok := tx.b.freqs[string(v)]
		if !ok {
			var err error
			fq, err = format.ParseFrequency(string(v))
			if err != nil {
				return fmt.Errorf("%w: %q", ErrBadFrequency, v)
			}
			tx.b.freqs[string(v)] = fq
		}
		if m.Frequency == "" {
			tx.save(idx)
			m.Frequency = fq
		}
	}
	return nil
}

func (tx *fileTx) save(idx uint32) {
	if int(idx) < tx.series0 {
		tx.undo = append(tx.undo, metaUndo{idx, tx.b.t.Series[idx]})
	}
}

// bad handles a bad record: with SkipBad it is counted, else it becomes the
// error of the call.
func (tx *fileTx) bad(line int64, row bool, err error) error {
	ie := &InputError{File: tx.name, Line: line, Row: row, Err: err}
	if !tx.o.SkipBad {
		return ie
	}
	tx.stats.Skipped++
	if tx.stats.FirstSkipped == nil {
		tx.stats.FirstSkipped = ie
	}
	return nil
}

// rollback restores the Builder to its state before the call.
func (tx *fileTx) rollback() {
	t := &tx.b.t
	t.SeriesIdx = t.SeriesIdx[:tx.rows0]
	t.Period = t.Period[:tx.rows0]
	t.Value = t.Value[:tx.rows0]
	for i := len(tx.undo) - 1; i >= 0; i-- {
		t.Series[tx.undo[i].idx] = tx.undo[i].meta
	}
	for _, s := range t.Series[tx.series0:] {
		delete(tx.b.ids, s.ID)
	}
	clear(t.Series[tx.series0:])
	t.Series = t.Series[:tx.series0]
}

// finish completes a call: on error or when no row was added it rolls back;
// otherwise it applies the per-file defaults and counts the series.
func (tx *fileTx) finish(err error) (FileStats, error) {
	t := &tx.b.t
	if err == nil && len(t.Period) == tx.rows0 {
		e := ErrEmpty
		if tx.stats.Skipped > 0 {
			e = fmt.Errorf("%w (%d bad rows skipped, first: %v)", ErrEmpty, tx.stats.Skipped, tx.stats.FirstSkipped)
		}
		err = &InputError{File: tx.name, Err: e}
	}
	if err != nil {
		tx.rollback()
		st := tx.stats
		st.Rows = 0
		return st, err
	}
	tx.stats.Rows = int64(len(t.Period) - tx.rows0)
	seen := make([]uint64, (len(t.Series)+63)/64)
	for _, s := range t.SeriesIdx[tx.rows0:] {
		if seen[s/64]&(1<<(s%64)) != 0 {
			continue
		}
		seen[s/64] |= 1 << (s % 64)
		tx.stats.Series++
		m := &t.Series[s]
		if m.Unit == "" {
			m.Unit = tx.o.Unit
		}
		if m.Source == "" {
			m.Source = tx.o.Source
		}
		if tx.freq != "" {
			m.Frequency = tx.freq
		}
	}
	return tx.stats, nil
}

// grow makes room for about n more rows, so that a large file does not copy
// its columns on every doubling.
func (tx *fileTx) grow(n int64) {
	t := &tx.b.t
	if n <= 0 || n > 1<<31 {
		return
	}
	need := len(t.Period) + int(n)
	if need <= cap(t.Period) {
		return
	}
	t.SeriesIdx = growTo(t.SeriesIdx, need)
	t.Period = growTo(t.Period, need)
	t.Value = growTo(t.Value, need)
}

func growTo[T any](s []T, n int) []T {
	if n <= cap(s) {
		return s
	}
	ns := make([]T, len(s), n)
	copy(ns, s)
	return ns
}

// columnIndex finds name among cols: exactly, else ignoring case and
// surrounding spaces. It returns -1 when absent, and an error wrapping
// ErrDuplicateColumn when two columns match the same way: the first must
// not silently win.
func columnIndex(cols []string, name string) (int, error) {
	found := -1
	for i, c := range cols {
		if c == name {
			if found >= 0 {
				return -1, fmt.Errorf("%w: column %q appears twice (columns %d and %d)", ErrDuplicateColumn, name, found+1, i+1)
			}
			found = i
		}
	}
	if found >= 0 {
		return found, nil
	}
	for i, c := range cols {
		if strings.EqualFold(strings.TrimSpace(c), strings.TrimSpace(name)) {
			if found >= 0 {
				return -1, fmt.Errorf("%w: columns %q and %q both match %q", ErrDuplicateColumn, cols[found], c, name)
			}
			found = i
		}
	}
	return found, nil
}

func missingColumn(name string, cols []string, what string) error {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = fmt.Sprintf("%q", c)
	}
	return fmt.Errorf("%w: no %s column %q (columns: %s)", ErrMissingColumn, what, name, strings.Join(q, ", "))
}

// layout maps the columns of a file to their roles.
type layout struct {
	series, period, value int
	meta                  [numMeta]int // -1 when absent
	wide                  []int        // wide: the series columns
	names                 []string
}

func (tx *fileTx) resolve(cols []string) (layout, error) {
	o := tx.o
	l := layout{series: -1, value: -1, names: cols}
	for i := range l.meta {
		l.meta[i] = -1
	}
	fail := func(err error) (layout, error) { return l, &InputError{File: tx.name, Err: err} }
	var err error
	if l.period, err = columnIndex(cols, o.PeriodCol); err != nil {
		return fail(err)
	}
	if l.period < 0 {
		return fail(missingColumn(o.PeriodCol, cols, "period"))
	}
	if o.Wide {
		seen := make(map[string]int, len(cols))
		for i, c := range cols {
			if i == l.period {
				continue
			}
			if c == "" && o.Prefix == "" {
				return fail(fmt.Errorf("%w: column %d has no name", ErrMissingColumn, i+1))
			}
			if j, dup := seen[c]; dup {
				return fail(fmt.Errorf("%w: column %q appears twice (columns %d and %d)", ErrDuplicateColumn, c, j+1, i+1))
			}
			seen[c] = i
			if err := format.ValidSeriesID(o.Prefix + c); err != nil {
				return fail(fmt.Errorf("column %d: %w", i+1, err))
			}
			l.wide = append(l.wide, i)
		}
		if len(l.wide) == 0 {
			return fail(fmt.Errorf("%w: wide input has no series column besides %q", ErrMissingColumn, cols[l.period]))
		}
		return l, nil
	}
	if l.series, err = columnIndex(cols, o.SeriesCol); err != nil {
		return fail(err)
	}
	if l.series < 0 {
		return fail(missingColumn(o.SeriesCol, cols, "series"))
	}
	if l.value, err = columnIndex(cols, o.ValueCol); err != nil {
		return fail(err)
	}
	if l.value < 0 {
		return fail(missingColumn(o.ValueCol, cols, "value"))
	}
	for f := range numMeta {
		i, err := columnIndex(cols, metaNames[f])
		if err != nil && !(f == metaFrequency && tx.freq != "") {
			return fail(err)
		}
		if i >= 0 && i != l.series && i != l.period && i != l.value {
			l.meta[f] = i
		}
	}
	if tx.freq != "" {
		l.meta[metaFrequency] = -1
	}
	return l, nil
}
