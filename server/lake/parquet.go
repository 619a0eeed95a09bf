package lake

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/google/uuid"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/energyscope/energyscope/localcache/format"
)

// The data files are written here, not by iceberg-go's writer: every
// string column (series_id and the four metadata columns) is handed to
// the Parquet writer as dictionary indices over a per-row-group
// dictionary built once per series, so no per-row string is hashed or
// copied; row groups are cut at series boundaries. FORMAT.md, "The lake".
const (
	// groupRows is the target number of rows of a row group (a longer
	// series gets a row group of its own).
	groupRows = 1 << 17
)

var dictUTF8 = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}

// parquetSchema is the Arrow schema of the data files: the table's
// columns with their Iceberg field ids, the strings dictionary-encoded.
func parquetSchema(pt format.PeriodType) *arrow.Schema {
	var period arrow.DataType = arrow.FixedWidthTypes.Date32
	if pt == format.PeriodTimestamp {
		period = timestampUTC
	}
	f := func(id int, name string, t arrow.DataType) arrow.Field {
		return arrow.Field{Name: name, Type: t, Metadata: arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{strconv.Itoa(id)})}
	}
	return arrow.NewSchema([]arrow.Field{
		f(fieldSeriesID, "series_id", dictUTF8),
		f(fieldPeriod, "period", period),
		f(fieldValue, "value", arrow.PrimitiveTypes.Float64),
		f(fieldFrequency, "frequency", dictUTF8),
		f(fieldUnit, "unit", dictUTF8),
		f(fieldName, "name", dictUTF8),
		f(fieldSource, "source", dictUTF8),
	}, nil)
}

func parquetProps() *parquet.WriterProperties {
	return parquet.NewWriterProperties(
		parquet.WithVersion(parquet.V2_6),
		parquet.WithCreatedBy(createdBy),
		parquet.WithMaxRowGroupLength(1<<40), // cut by us
		parquet.WithDictionaryPageSizeLimit(1<<40),
		parquet.WithCompression(compress.Codecs.Uncompressed),
		parquet.WithDictionaryFor("period", false),
		parquet.WithEncodingFor("period", parquet.Encodings.DeltaBinaryPacked),
		parquet.WithDictionaryFor("value", false),
		parquet.WithStats(false),
		parquet.WithStatsFor("series_id", true),
		parquet.WithStatsFor("period", true),
	)
}

// writeDataFiles writes src's rows, in (series id, period) order, as one
// Parquet data file under the table's data directory and returns its
// location. On error nothing it wrote is left.
func writeDataFiles(ctx context.Context, fs iceio.WriteFileIO, tableLocation string, src *source) ([]string, error) {
	loc := fmt.Sprintf("%s/data/es-%s-%s.parquet", tableLocation, src.m.SnapshotID, uuid.NewString())
	f, err := fs.Create(loc)
	if err != nil {
		return nil, fmt.Errorf("lake: write data file: %w", err)
	}
	err = writeParquet(ctxWriter{ctx, f}, src)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fs.Remove(loc)
		return nil, fmt.Errorf("lake: write data file: %w", err)
	}
	return []string{loc}, nil
}

// writeParquet writes src's rows as one Parquet file to w.
func writeParquet(w io.Writer, src *source) error {
	fw, err := pqarrow.NewFileWriter(parquetSchema(src.m.PeriodType), w, parquetProps(), pqarrow.DefaultWriterProps())
	if err != nil {
		return err
	}
	if err := src.rowGroups(groupRows, fw.Write); err != nil {
		fw.Close()
		return err
	}
	return fw.Close()
}

// ctxWriter stops a write when ctx is done.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// rowGroups yields the snapshot's rows as record batches of the
// parquetSchema, each about target rows and cut at series boundaries, in
// (series id, period) order (index rows are sorted by id bytes, every
// series' rows by period, in either tier).
func (s *source) rowGroups(target int, emit func(arrow.RecordBatch) error) error {
	x := s.index
	sc := parquetSchema(s.m.PeriodType)
	mem := memory.DefaultAllocator
	var dicts [5]dictCol // series_id, frequency, unit, name, source
	meta := func(r uint32) [5]string {
		return [5]string{x.ID(r), string(x.Frequency(r)), x.Unit(r), x.Name(r), x.Source(r)}
	}
	var (
		days   []int32
		micros []int64
		values []float64
		codes  [5][]int32
	)
	tailBlock, cached := -1, (*format.Batch)(nil)
	flush := func() error {
		n := len(values)
		if n == 0 {
			return nil
		}
		cols := make([]arrow.Array, 7)
		if days != nil {
			cols[1] = array.NewDate32Data(array.NewData(arrow.FixedWidthTypes.Date32, n, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(days))}, nil, 0, 0))
		} else {
			cols[1] = array.NewTimestampData(array.NewData(timestampUTC, n, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(micros))}, nil, 0, 0))
		}
		cols[2] = array.NewFloat64Data(array.NewData(arrow.PrimitiveTypes.Float64, n, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Float64Traits.CastToBytes(values))}, nil, 0, 0))
		for i, at := range []int{0, 3, 4, 5, 6} {
			cols[at] = dicts[i].array(mem, codes[i])
		}
		rec := array.NewRecordBatch(sc, cols, int64(n))
		for _, c := range cols {
			c.Release()
		}
		err := emit(rec)
		rec.Release()
		days, micros, values = days[:0], micros[:0], values[:0]
		for i := range codes {
			codes[i] = codes[i][:0]
			dicts[i].reset()
		}
		return err
	}
	if s.m.PeriodType == format.PeriodTimestamp {
		micros = make([]int64, 0, target)
	} else {
		days = make([]int32, 0, target)
	}
	values = make([]float64, 0, target)
	for i := range codes {
		codes[i] = make([]int32, 0, target)
		dicts[i].reset()
	}
	for r := uint32(0); r < uint32(x.N); r++ {
		n := x.Length[r]
		if n == 0 {
			continue
		}
		var rows *format.Batch
		off := x.Offset[r]
		switch format.Tier(x.Tier[r]) {
		case format.Hot:
			bt, err := s.data.Batch(int(x.Batch[r]))
			if err == nil {
				err = bt.Check(off, n)
			}
			if err != nil {
				return err
			}
			rows = bt
		case format.Cold:
			if s.tail == nil {
				return fmt.Errorf("%w: series %q is cold but there is no %s", ErrBadSnapshot, x.ID(r), format.TailFile)
			}
			if int(x.Batch[r]) != tailBlock {
				bt, err := s.tail.Block(int(x.Batch[r]))
				if err != nil {
					return err
				}
				tailBlock, cached = int(x.Batch[r]), bt
			}
			if err := cached.Check(off, n); err != nil {
				return err
			}
			rows = cached
		default:
			return fmt.Errorf("%w: series %q has unknown tier %d", ErrBadSnapshot, x.ID(r), x.Tier[r])
		}
		if len(values) > 0 && len(values)+int(n) > target {
			if err := flush(); err != nil {
				return err
			}
		}
		m := meta(r)
		for i := range codes {
			c := dicts[i].code(m[i], i == 0)
			codes[i] = appendRun(codes[i], c, int(n))
		}
		if days != nil {
			days = append(days, rows.Days[off:off+n]...)
		} else {
			for _, sec := range rows.Secs[off : off+n] {
				micros = append(micros, sec*1_000_000)
			}
		}
		values = append(values, rows.Values[off:off+n]...)
	}
	return flush()
}

func appendRun(dst []int32, c int32, n int) []int32 {
	l := len(dst)
	dst = append(dst, make([]int32, n)...)
	run := dst[l:]
	for i := range run {
		run[i] = c
	}
	return dst
}

// dictCol is the dictionary of one string column within a row group.
type dictCol struct {
	acc   strAcc
	codes map[string]int32
	last  string
	lastC int32
}

func (d *dictCol) reset() {
	d.acc.reset(0)
	d.codes = nil
	d.lastC = -1
}

// code returns s's index in the dictionary, adding it. unique says every
// value differs from all earlier ones (series ids, sorted and distinct).
func (d *dictCol) code(s string, unique bool) int32 {
	if d.lastC >= 0 && s == d.last {
		return d.lastC
	}
	n := int32(len(d.acc.off) - 1)
	if !unique {
		if d.codes == nil {
			d.codes = map[string]int32{}
		}
		if c, ok := d.codes[s]; ok {
			d.last, d.lastC = s, c
			return c
		}
		d.codes[s] = n
	}
	d.acc.addN(s, 1)
	d.last, d.lastC = s, n
	return n
}

// array is the dictionary-encoded column: codes over the dictionary.
func (d *dictCol) array(mem memory.Allocator, codes []int32) arrow.Array {
	dict := d.acc.array(0)
	defer dict.Release()
	idx := array.NewInt32Data(array.NewData(arrow.PrimitiveTypes.Int32, len(codes), []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(codes))}, nil, 0, 0))
	defer idx.Release()
	return array.NewDictionaryArray(dictUTF8, idx, dict)
}
