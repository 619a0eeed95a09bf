package cook

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// arrowBatchRows is the batch size asked of the Parquet reader.
const arrowBatchRows = 64 << 10

// readParquet reads a Parquet file batch by batch, decoding only the
// columns the layout uses. The file is untrusted: its footer is checked
// against the file size by the Parquet reader, pages may declare at most
// the file's size compressed and inputBudget(size) uncompressed, every
// buffer comes from a budgetAllocator, and the declared row count sizes
// the table up front only up to a row per byte of the file.
func (tx *fileTx) readParquet(f *os.File, size int64) (err error) {
	defer recoverInput(tx.name, &err)
	mem := newBudgetAllocator(inputBudget(size))
	props := parquet.NewReaderProperties(mem)
	if size > 0 {
		props.MaxCompressedPageSize = min(size, parquet.DefaultMaxCompressedPageSize)
		props.MaxUncompressedPageSize = min(inputBudget(size), parquet.DefaultMaxUncompressedPageSize)
	}
	pr, err := file.NewParquetReader(f, file.WithReadProps(props))
	if err != nil {
		return &InputError{File: tx.name, Err: fmt.Errorf("parquet: %w", err)}
	}
	defer pr.Close()
	if err := checkParquetChunks(pr, size); err != nil {
		return &InputError{File: tx.name, Err: fmt.Errorf("parquet: %w", err)}
	}
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: arrowBatchRows}, mem)
	if err != nil {
		return &InputError{File: tx.name, Err: fmt.Errorf("parquet: %w", err)}
	}
	sc, err := fr.Schema()
	if err != nil {
		return &InputError{File: tx.name, Err: fmt.Errorf("parquet schema: %w", err)}
	}
	l, err := tx.resolve(fieldNames(sc))
	if err != nil {
		return err
	}
	// Read only the columns in use; the record reader returns them in
	// schema order, so the layout is resolved again on its schema.
	var leaves []int
	for _, i := range l.used() {
		sf := fr.Manifest.Fields[i]
		if !sf.IsLeaf() {
			return &InputError{File: tx.name, Err: fmt.Errorf("%w: column %q is nested (%s)", ErrUnsupported, sc.Field(i).Name, sc.Field(i).Type)}
		}
		leaves = append(leaves, sf.ColIndex)
	}
	if err := tx.checkTypes(sc, l); err != nil {
		return err
	}
	nrows := pr.NumRows()
	if hint := min(nrows, size); tx.o.Wide {
		tx.grow(hint * int64(len(l.wide)))
	} else {
		tx.grow(hint)
	}
	rr, err := fr.GetRecordReader(context.Background(), leaves, nil)
	if err != nil {
		return &InputError{File: tx.name, Err: fmt.Errorf("parquet: %w", err)}
	}
	defer rr.Release()
	rl, err := tx.resolve(fieldNames(rr.Schema()))
	if err != nil {
		return err
	}
	var read int64
	err = tx.addAll(rl, "parquet", readerNext(rr), func(row int64, _ int) {
		read = row
		if tx.o.Progress != nil && nrows > 0 && size > 0 {
			tx.o.Progress(size*row/nrows, size)
		}
	})
	if err == nil && read != nrows {
		err = &InputError{File: tx.name, Err: fmt.Errorf("%w: parquet: the footer declares %d rows, the columns hold %d", ErrMalformed, nrows, read)}
	}
	return err
}

// checkParquetChunks checks that every column chunk lies inside the file:
// the Parquet reader reads a whole chunk into one buffer of the length the
// footer declares (parquet.ReaderProperties.GetStream).
func checkParquetChunks(pr *file.Reader, size int64) error {
	if size < 0 {
		return nil
	}
	md := pr.MetaData()
	for g := range md.NumRowGroups() {
		rg := md.RowGroup(g)
		for c := range rg.NumColumns() {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				return err
			}
			start := cc.DataPageOffset()
			if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < start {
				start = cc.DictionaryPageOffset()
			}
			n := cc.TotalCompressedSize()
			if start < 0 || n < 0 || start > size || n > size-start {
				return fmt.Errorf("%w: row group %d column %d declares %d bytes at offset %d of a %d-byte file", ErrMalformed, g, c, n, start, size)
			}
		}
	}
	return nil
}

// readArrow reads an Arrow IPC file, or an IPC stream when the file has no
// file magic. Allocation is bounded by the file's size: a stream goes
// through the checking message reader of ipcscan.go, a file's blocks are
// checked against its size by arrow-go and its buffers come from a
// budgetAllocator.
func (tx *fileTx) readArrow(f *os.File, size int64) (err error) {
	defer recoverInput(tx.name, &err)
	var magic [8]byte
	n, _ := io.ReadFull(f, magic[:])
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	mem := newBudgetAllocator(inputBudget(size))
	switch {
	case n >= 6 && string(magic[:6]) == "ARROW1":
		opts := []ipc.Option{ipc.WithAllocator(mem)}
		if size > 0 {
			opts = append(opts, ipc.WithBodySizeLimit(size), ipc.WithMetadataSizeLimit(min(size, math.MaxInt32)))
		}
		if err := checkIPCFileFooter(f, size); err != nil {
			return &InputError{File: tx.name, Err: fmt.Errorf("arrow file: %w", err)}
		}
		r, err := ipc.NewFileReader(f, opts...)
		if err != nil {
			return &InputError{File: tx.name, Err: fmt.Errorf("arrow file: %w", err)}
		}
		defer r.Close()
		l, err := tx.layoutOf(r.Schema())
		if err != nil {
			return err
		}
		nb := r.NumRecords()
		i := 0
		next := func() (arrow.RecordBatch, error) {
			if i == nb {
				return nil, nil
			}
			i++
			rec, err := r.RecordBatch(i - 1)
			if err != nil {
				return nil, fmt.Errorf("batch %d: %w", i-1, err)
			}
			return rec, nil
		}
		return tx.addAll(l, "arrow file", next, func(_ int64, i int) {
			if tx.o.Progress != nil && size > 0 {
				tx.o.Progress(size*int64(i)/int64(nb), size)
			}
		})
	case n >= 4 && string(magic[:4]) == "FEA1":
		return &InputError{File: tx.name, Err: fmt.Errorf("%w: Feather v1 (write Feather v2 / Arrow IPC)", ErrUnsupported)}
	}
	// A stream starts with a message length: the continuation marker
	// 0xFFFFFFFF and a length, or (before Arrow 0.15) the length alone.
	if n < 4 {
		return &InputError{File: tx.name, Err: fmt.Errorf("%w: not an Arrow IPC file or stream", ErrUnsupported)}
	}
	var src io.Reader = f
	if tx.o.Progress != nil {
		src = &progressReader{r: f, total: size, fn: tx.o.Progress}
	}
	r, err := newIPCStreamReader(bufio.NewReaderSize(src, csvBufSize), size, ipc.WithAllocator(mem))
	if err != nil {
		if errors.Is(err, ErrMalformed) && !looksLikeIPCStream(magic[:n], size) {
			err = fmt.Errorf("%w: not an Arrow IPC file or stream", ErrUnsupported)
		}
		return &InputError{File: tx.name, Err: fmt.Errorf("arrow stream: %w", err)}
	}
	defer r.Release()
	l, err := tx.layoutOf(r.Schema())
	if err != nil {
		return err
	}
	return tx.addAll(l, "arrow stream", readerNext(r), nil)
}

// looksLikeIPCStream reports whether head (the first bytes of a file of
// size bytes) starts like an IPC stream: a first message length that fits
// the file.
func looksLikeIPCStream(head []byte, size int64) bool {
	if len(head) < 4 {
		return false
	}
	l := int64(binary.LittleEndian.Uint32(head))
	if l == 0xFFFFFFFF {
		if len(head) < 8 {
			return true
		}
		l = int64(binary.LittleEndian.Uint32(head[4:]))
	}
	return l < 1<<31 && (size < 0 || l <= size)
}

// layoutOf resolves the layout of a schema and checks its column types.
func (tx *fileTx) layoutOf(sc *arrow.Schema) (layout, error) {
	l, err := tx.resolve(fieldNames(sc))
	if err != nil {
		return l, err
	}
	return l, tx.checkTypes(sc, l)
}

// addAll adds every batch next yields until it returns nil, calling
// progress (when not nil) with the rows read and batches read so far. A
// read error names the first row not read.
func (tx *fileTx) addAll(l layout, what string, next func() (arrow.RecordBatch, error), progress func(rows int64, batches int)) error {
	var row int64
	for n := 1; ; n++ {
		rec, err := next()
		if err != nil {
			return &InputError{File: tx.name, Line: row + 1, Row: true, Err: fmt.Errorf("%s: %w", what, err)}
		}
		if rec == nil {
			return nil
		}
		if err := tx.addBatch(rec, l, row); err != nil {
			return err
		}
		row += rec.NumRows()
		if progress != nil {
			progress(row, n)
		}
	}
}

// readerNext adapts a record reader to addAll; the end of the input is
// not an error.
func readerNext(r array.RecordReader) func() (arrow.RecordBatch, error) {
	return func() (arrow.RecordBatch, error) {
		if r.Next() {
			return r.RecordBatch(), nil
		}
		if err := r.Err(); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		return nil, nil
	}
}

func fieldNames(sc *arrow.Schema) []string {
	names := make([]string, sc.NumFields())
	for i := range names {
		names[i] = sc.Field(i).Name
	}
	return names
}

// used lists the columns a layout reads, ascending.
func (l layout) used() []int {
	use := make([]bool, len(l.names))
	use[l.period] = true
	for _, c := range append([]int{l.series, l.value}, l.wide...) {
		if c >= 0 {
			use[c] = true
		}
	}
	for _, c := range l.meta {
		if c >= 0 {
			use[c] = true
		}
	}
	var out []int
	for i, u := range use {
		if u {
			out = append(out, i)
		}
	}
	return out
}

// checkTypes fails early, naming the column, when a column's type cannot
// play its role.
func (tx *fileTx) checkTypes(sc *arrow.Schema, l layout) error {
	bad := func(c int, role string) error {
		f := sc.Field(c)
		return &InputError{File: tx.name, Err: fmt.Errorf("%w: %s column %q has type %s", ErrUnsupported, role, f.Name, f.Type)}
	}
	if !isPeriodType(sc.Field(l.period).Type) {
		return bad(l.period, "period")
	}
	if l.series >= 0 && !isStringType(sc.Field(l.series).Type) {
		return bad(l.series, "series")
	}
	if l.value >= 0 && !isNumberType(sc.Field(l.value).Type) {
		return bad(l.value, "value")
	}
	for _, c := range l.wide {
		if !isNumberType(sc.Field(c).Type) {
			return bad(c, "value")
		}
	}
	for f, c := range l.meta {
		if c >= 0 && !isStringType(sc.Field(c).Type) {
			return bad(c, metaNames[f])
		}
	}
	return nil
}

func isStringType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return true
	case arrow.DICTIONARY:
		return isStringType(t.(*arrow.DictionaryType).ValueType)
	}
	return false
}

func isNumberType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.FLOAT32, arrow.FLOAT64, arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return true
	}
	return false
}

func isPeriodType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.DATE32, arrow.DATE64, arrow.TIMESTAMP, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT16, arrow.UINT32:
		return true
	}
	return isStringType(t)
}

// addBatch appends one record batch; row0 is the number of data rows before
// it (errors count rows from 1).
func (tx *fileTx) addBatch(rec arrow.RecordBatch, l layout, row0 int64) error {
	n := int(rec.NumRows())
	per := periodGetter(rec.Column(l.period))
	t := &tx.b.t
	if tx.o.Wide {
		return tx.addBatchWide(rec, l, row0, per)
	}
	ids := stringGetter(rec.Column(l.series))
	val := valueGetter(rec.Column(l.value))
	var meta [numMeta]func(int) (string, bool)
	hasMeta := false
	for f, c := range l.meta {
		if c >= 0 {
			meta[f], hasMeta = stringGetter(rec.Column(c)), true
		}
	}
	for i := range n {
		v, ok, err := val(i)
		if err != nil {
			if err := tx.bad(row0+int64(i)+1, true, err); err != nil {
				return err
			}
			continue
		}
		if !ok {
			tx.stats.Empty++
			continue
		}
		p, err := per(i)
		if err != nil {
			if err := tx.bad(row0+int64(i)+1, true, err); err != nil {
				return err
			}
			continue
		}
		id, ok := ids(i)
		if !ok || id == "" {
			if err := tx.bad(row0+int64(i)+1, true, ErrEmptyID); err != nil {
				return err
			}
			continue
		}
		idx, err := seriesOf(tx, id)
		if err != nil {
			if err := tx.bad(row0+int64(i)+1, true, err); err != nil {
				return err
			}
			continue
		}
		if hasMeta {
			if g := meta[metaFrequency]; g != nil {
				if s, ok := g(i); ok {
					if err := setMeta(tx, idx, metaFrequency, s); err != nil {
						if err := tx.bad(row0+int64(i)+1, true, err); err != nil {
							return err
						}
						continue
					}
				}
			}
			for f := range metaFrequency {
				if g := meta[f]; g != nil {
					if s, ok := g(i); ok {
						setMeta(tx, idx, f, s)
					}
				}
			}
		}
		t.SeriesIdx = append(t.SeriesIdx, idx)
		t.Period = append(t.Period, p)
		t.Value = append(t.Value, v)
	}
	return nil
}

func (tx *fileTx) addBatchWide(rec arrow.RecordBatch, l layout, row0 int64, per func(int) (int64, error)) error {
	t := &tx.b.t
	vals := make([]func(int) (float64, bool, error), len(l.wide))
	for k, c := range l.wide {
		vals[k] = valueGetter(rec.Column(c))
	}
	if len(tx.wideIdx) != len(l.wide) {
		tx.wideIdx = make([]int64, len(l.wide))
		for k := range tx.wideIdx {
			tx.wideIdx[k] = -1
		}
	}
	row := make([]float64, len(l.wide))
	nan := math.NaN()
	for i := range int(rec.NumRows()) {
		p, err := per(i)
		if err != nil {
			if err := tx.bad(row0+int64(i)+1, true, err); err != nil {
				return err
			}
			continue
		}
		var rowErr error
		empty := int64(0)
		for k, g := range vals {
			v, ok, err := g(i)
			if err != nil {
				rowErr = fmt.Errorf("column %q: %w", l.names[l.wide[k]], err)
				break
			}
			if !ok {
				v = nan
				empty++
			}
			row[k] = v
		}
		if rowErr != nil {
			if err := tx.bad(row0+int64(i)+1, true, rowErr); err != nil {
				return err
			}
			continue
		}
		tx.stats.Empty += empty
		for k, v := range row {
			if v != v {
				continue
			}
			if tx.wideIdx[k] < 0 {
				tx.wideIdx[k] = int64(tx.wideSeries(l.names[l.wide[k]]))
			}
			t.SeriesIdx = append(t.SeriesIdx, uint32(tx.wideIdx[k]))
			t.Period = append(t.Period, p)
			t.Value = append(t.Value, v)
		}
	}
	return nil
}

// stringGetter reads a string-like column; ok is false for null. The
// strings alias Arrow buffers: copy before keeping them.
func stringGetter(a arrow.Array) func(int) (string, bool) {
	switch a := a.(type) {
	case *array.String:
		return func(i int) (string, bool) { return a.Value(i), a.IsValid(i) }
	case *array.LargeString:
		return func(i int) (string, bool) { return a.Value(i), a.IsValid(i) }
	case *array.StringView:
		return func(i int) (string, bool) { return a.Value(i), a.IsValid(i) }
	case *array.Dictionary:
		inner := stringGetter(a.Dictionary())
		return func(i int) (string, bool) {
			if a.IsNull(i) {
				return "", false
			}
			return inner(a.GetValueIndex(i))
		}
	}
	return func(int) (string, bool) { return "", false }
}

// valueGetter reads a numeric column: ok is false for null, and NaN or Inf
// is an error.
func valueGetter(a arrow.Array) func(int) (float64, bool, error) {
	finite := func(v float64, valid bool) (float64, bool, error) {
		if !valid {
			return 0, false, nil
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, false, fmt.Errorf("value %v: %w", v, ErrNotFinite)
		}
		return v, true, nil
	}
	switch a := a.(type) {
	case *array.Float64:
		vs := a.Float64Values()
		if a.NullN() == 0 {
			return func(i int) (float64, bool, error) {
				v := vs[i]
				if v-v != 0 { // NaN or Inf
					return finite(v, true)
				}
				return v, true, nil
			}
		}
		return func(i int) (float64, bool, error) { return finite(vs[i], a.IsValid(i)) }
	case *array.Float32:
		return func(i int) (float64, bool, error) { return finite(float64(a.Value(i)), a.IsValid(i)) }
	case *array.Int8:
		return intGetter(a, a.Value)
	case *array.Int16:
		return intGetter(a, a.Value)
	case *array.Int32:
		return intGetter(a, a.Value)
	case *array.Int64:
		return intGetter(a, a.Value)
	case *array.Uint8:
		return intGetter(a, a.Value)
	case *array.Uint16:
		return intGetter(a, a.Value)
	case *array.Uint32:
		return intGetter(a, a.Value)
	case *array.Uint64:
		return intGetter(a, a.Value)
	}
	return func(int) (float64, bool, error) {
		return 0, false, fmt.Errorf("%w: value type %s", ErrUnsupported, a.DataType())
	}
}

func intGetter[T int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64](a arrow.Array, get func(int) T) func(int) (float64, bool, error) {
	return func(i int) (float64, bool, error) {
		if a.IsNull(i) {
			return 0, false, nil
		}
		return float64(get(i)), true, nil
	}
}

// periodGetter reads a period column into unix seconds. Dates and
// timestamps convert exactly (timestamps floor to the second); strings go
// through ParsePeriod; integers are read as their decimal digits (2001,
// 200103, 20010315), as they would be in a CSV.
func periodGetter(a arrow.Array) func(int) (int64, error) {
	null := errNullPeriod
	switch a := a.(type) {
	case *array.Date32:
		return func(i int) (int64, error) {
			if a.IsNull(i) {
				return 0, null
			}
			return int64(a.Value(i)) * 86400, nil
		}
	case *array.Date64:
		return func(i int) (int64, error) {
			if a.IsNull(i) {
				return 0, null
			}
			return floorDiv(int64(a.Value(i)), 1000), nil
		}
	case *array.Timestamp:
		per := int64(time.Second / a.DataType().(*arrow.TimestampType).Unit.Multiplier()) // units per second
		return func(i int) (int64, error) {
			if a.IsNull(i) {
				return 0, null
			}
			return floorDiv(int64(a.Value(i)), per), nil
		}
	case *array.Int16:
		return intPeriod(a, a.Value)
	case *array.Int32:
		return intPeriod(a, a.Value)
	case *array.Int64:
		return intPeriod(a, a.Value)
	case *array.Uint16:
		return intPeriod(a, a.Value)
	case *array.Uint32:
		return intPeriod(a, a.Value)
	}
	str := stringGetter(a)
	return func(i int) (int64, error) {
		s, ok := str(i)
		if !ok {
			return 0, null
		}
		if v, ok := parsePeriod(s); ok {
			return v, nil
		}
		return 0, fmt.Errorf("period %q: %w", s, ErrBadPeriod)
	}
}

func intPeriod[T int16 | int32 | int64 | uint16 | uint32](a arrow.Array, get func(int) T) func(int) (int64, error) {
	var buf [24]byte
	return func(i int) (int64, error) {
		if a.IsNull(i) {
			return 0, errNullPeriod
		}
		s := strconv.AppendInt(buf[:0], int64(get(i)), 10)
		if v, ok := parsePeriod(s); ok {
			return v, nil
		}
		return 0, fmt.Errorf("period %s: %w", s, ErrBadPeriod)
	}
}

var errNullPeriod = fmt.Errorf("period is null: %w", ErrBadPeriod)

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
