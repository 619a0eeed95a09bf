package lake

import (
	"fmt"
	"iter"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"

	"github.com/energyscope/energyscope/localcache/format"
)

// Field ids and names of a dataset table (FORMAT.md, "The lake"). Series
// metadata travels in the same files: Parquet dictionary-encodes the
// per-row repeats, so they cost little, and one table keeps a publish one
// commit.
const (
	fieldSeriesID = iota + 1
	fieldPeriod
	fieldValue
	fieldFrequency
	fieldUnit
	fieldName
	fieldSource
)

// icebergSchema is the table schema for a period type.
func icebergSchema(pt format.PeriodType) *iceberg.Schema {
	var period iceberg.Type = iceberg.PrimitiveTypes.Date
	if pt == format.PeriodTimestamp {
		period = iceberg.PrimitiveTypes.TimestampTz
	}
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: fieldSeriesID, Name: "series_id", Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: fieldPeriod, Name: "period", Type: period, Required: true},
		iceberg.NestedField{ID: fieldValue, Name: "value", Type: iceberg.PrimitiveTypes.Float64, Required: true},
		iceberg.NestedField{ID: fieldFrequency, Name: "frequency", Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: fieldUnit, Name: "unit", Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: fieldName, Name: "name", Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: fieldSource, Name: "source", Type: iceberg.PrimitiveTypes.String, Required: true},
	)
}

// periodTypeOf reads the period type back from a table schema.
func periodTypeOf(s *iceberg.Schema) (format.PeriodType, bool) {
	f, ok := s.FindFieldByName("period")
	if !ok {
		return "", false
	}
	switch f.Type.(type) {
	case iceberg.DateType:
		return format.PeriodDate32, true
	case iceberg.TimestampTzType:
		return format.PeriodTimestamp, true
	}
	return "", false
}

var timestampUTC = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

// arrowSchema is the Arrow schema of the batches handed to the writer.
func arrowSchema(pt format.PeriodType) *arrow.Schema {
	var period arrow.DataType = arrow.FixedWidthTypes.Date32
	if pt == format.PeriodTimestamp {
		period = timestampUTC
	}
	return arrow.NewSchema([]arrow.Field{
		{Name: "series_id", Type: arrow.BinaryTypes.String},
		{Name: "period", Type: period},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64},
		{Name: "frequency", Type: arrow.BinaryTypes.String},
		{Name: "unit", Type: arrow.BinaryTypes.String},
		{Name: "name", Type: arrow.BinaryTypes.String},
		{Name: "source", Type: arrow.BinaryTypes.String},
	}, nil)
}

// source is an opened snapshot: the files' bytes and the format readers
// over them. The readers alias bytes; both live as long as the source.
type source struct {
	m     *format.Manifest
	files map[string][]byte // file name -> contents, manifest.json included
	sums  map[string]string // file name -> hex SHA-256, checked when read
	index *format.Index
	data  *format.Data
	tail  *format.Tail
}

func (s *source) close() {
	if s.index != nil {
		s.index.Close()
	}
	if s.data != nil {
		s.data.Close()
	}
}

// open opens the readers over the files (already checked against the
// manifest's SHA-256).
func (s *source) open() error {
	var err error
	if s.index, err = format.OpenIndex(s.files[format.IndexFile], s.m.PeriodType, s.m.Series); err != nil {
		return err
	}
	if s.data, err = format.OpenData(s.files[format.DataFile], s.m.PeriodType, s.m.Batches); err != nil {
		return err
	}
	if b, ok := s.files[format.TailFile]; ok {
		if s.tail, err = format.OpenTail(b, s.m.PeriodType, s.m.Rows); err != nil {
			return err
		}
	}
	return nil
}

// batches yields the snapshot's rows as Arrow record batches of about
// batchRows rows, in (series id, period) order: index rows are sorted by
// series id bytes and every series' rows by period, in either tier.
func (s *source) batches(batchRows int) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		mem := memory.DefaultAllocator
		sc := arrowSchema(s.m.PeriodType)
		// The string columns are filled in bulk (a series' string
		// repeated over its run), the others through builders.
		var strs [5]strAcc // series_id, frequency, unit, name, source
		for i := range strs {
			strs[i].reset(batchRows)
		}
		val := array.NewFloat64Builder(mem)
		defer val.Release()
		var days *array.Date32Builder
		var secs *array.TimestampBuilder
		if s.m.PeriodType == format.PeriodTimestamp {
			secs = array.NewTimestampBuilder(mem, timestampUTC)
			defer secs.Release()
		} else {
			days = array.NewDate32Builder(mem)
			defer days.Release()
		}
		pending := 0
		flush := func() bool {
			if pending == 0 {
				return true
			}
			cols := make([]arrow.Array, 7)
			cols[0] = strs[0].array(batchRows)
			if secs != nil {
				cols[1] = secs.NewArray()
			} else {
				cols[1] = days.NewArray()
			}
			cols[2] = val.NewArray()
			for i := 1; i < 5; i++ {
				cols[2+i] = strs[i].array(batchRows)
			}
			rec := array.NewRecordBatch(sc, cols, int64(pending))
			for _, c := range cols {
				c.Release()
			}
			pending = 0
			return yield(rec, nil)
		}
		x := s.index
		tailBlock, cached := -1, (*format.Batch)(nil)
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
					yield(nil, err)
					return
				}
				rows = bt
			case format.Cold:
				if s.tail == nil {
					yield(nil, fmt.Errorf("%w: series %q is cold but there is no %s", ErrBadSnapshot, x.ID(r), format.TailFile))
					return
				}
				if int(x.Batch[r]) != tailBlock {
					bt, err := s.tail.Block(int(x.Batch[r]))
					if err == nil {
						err = bt.Check(off, n)
					}
					if err != nil {
						yield(nil, err)
						return
					}
					tailBlock, cached = int(x.Batch[r]), bt
				} else if err := cached.Check(off, n); err != nil {
					yield(nil, err)
					return
				}
				rows = cached
			default:
				yield(nil, fmt.Errorf("%w: series %q has unknown tier %d", ErrBadSnapshot, x.ID(r), x.Tier[r]))
				return
			}
			m := [5]string{x.ID(r), string(x.Frequency(r)), x.Unit(r), x.Name(r), x.Source(r)}
			for i := off; i < off+n; {
				k := min(off+n-i, uint32(batchRows-pending))
				for j := range strs {
					strs[j].addN(m[j], int(k))
				}
				if days != nil {
					for _, d := range rows.Days[i : i+k] {
						days.Append(arrow.Date32(d))
					}
				} else {
					for _, sec := range rows.Secs[i : i+k] {
						secs.Append(arrow.Timestamp(sec * 1_000_000))
					}
				}
				val.AppendValues(rows.Values[i:i+k], nil)
				pending += int(k)
				i += k
				if pending >= batchRows && !flush() {
					return
				}
			}
		}
		flush()
	}
}

// strAcc accumulates a utf8 column's offsets and bytes.
type strAcc struct {
	off  []int32
	data []byte
}

func (a *strAcc) reset(rows int) {
	a.off = make([]int32, 1, rows+1)
	a.data = nil
}

// addN appends s k times.
func (a *strAcc) addN(s string, k int) {
	for range k {
		a.data = append(a.data, s...)
		a.off = append(a.off, int32(len(a.data)))
	}
}

// array hands the accumulated bytes to a new String array and starts over.
func (a *strAcc) array(rows int) arrow.Array {
	n := len(a.off) - 1
	d := array.NewData(arrow.BinaryTypes.String, n,
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(a.off)), memory.NewBufferBytes(a.data)}, nil, 0, 0)
	defer d.Release()
	a.reset(rows)
	return array.NewStringData(d)
}
