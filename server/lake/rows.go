package lake

import (
	"fmt"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"runtime/debug"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// Field ids and names of a dataset table (FORMAT.md, "The lake"). Series
// metadata travels in the same files: the data file writer
// (parquet.go) hands each string column to Parquet as dictionary indices
// built once per series, so the per-row repeats cost a run-length
// encoded index, and one table keeps a publish one commit.
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

// source is an opened snapshot: the files' bytes and the format readers
// over them. The readers alias bytes; both live as long as the source.
type source struct {
	m     *format.Manifest
	files map[string][]byte // file name -> contents, manifest.json included
	sums  map[string]string // file name -> hex SHA-256, checked when read
	index *format.Index
	data  *format.Data
	tail  *format.Tail
	snap  *snapshot.Snapshot // the mapping files alias, if mapped
}

// guardFault, deferred with debug.SetPanicOnFault(true)'s result, turns
// a fault reading a mapped snapshot file (truncated or gone under the
// mapping) into an ErrBadSnapshot error instead of a crash.
func guardFault(old bool, err *error) {
	debug.SetPanicOnFault(old)
	if r := recover(); r != nil {
		re, ok := r.(interface{ Addr() uintptr })
		if !ok {
			panic(r)
		}
		*err = fmt.Errorf("%w: a mapped snapshot file changed while it was read (fault at %#x)", ErrBadSnapshot, re.Addr())
	}
}

func (s *source) close() {
	if s.snap != nil {
		defer s.snap.Close()
	}
	if s.index != nil {
		s.index.Close()
	}
	if s.data != nil {
		s.data.Close()
	}
}

// open opens the readers over the files (already checked against the
// manifest's SHA-256).
func (s *source) open() (err error) {
	defer guardFault(debug.SetPanicOnFault(true), &err)
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
