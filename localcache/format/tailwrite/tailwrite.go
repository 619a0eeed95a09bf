// Package tailwrite writes tail.parquet, the cold tier of a snapshot
// (localcache/format/FORMAT.md "tail.parquet"). format.Write calls it
// through a hook this package sets when it is linked: a binary that writes
// snapshots with a cold tier (the cook, the server, a companion that
// compacts) imports it, for its side effect:
//
//	import _ "github.com/energyscope/energyscope/localcache/format/tailwrite"
//
// Without it format.Write refuses a cold tier with
// format.ErrNoTailWriter. A binary that only reads snapshots does not link
// arrow-go's Parquet writer, parquet/metadata or arrow/compute.
package tailwrite

import (
	"fmt"
	"io"
	"math"
	"unsafe"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/energyscope/energyscope/localcache/format/internal/tailhook"
)

func init() {
	tailhook.Write = func(w io.Writer, timestamp bool, kv [][2]string, groups []tailhook.Group) error {
		return Write(w, timestamp, kv, groups, V1)
	}
}

// CreatedBy is the created_by of tail.parquet: fixed, so that the bytes
// do not change with the writer library's version string.
const CreatedBy = "energyscope snapshot format 1"

// Codec is how tail.parquet is encoded. Format version 1 uses V1; the
// others exist for the measurement in format's tail_measure_test.go.
type Codec struct {
	Name      string
	SeriesEnc parquet.Encoding
	PeriodEnc parquet.Encoding
	ValueEnc  parquet.Encoding
	Codec     compress.Compression
	Level     int
}

// V1 is the encoding of format version 1.
var V1 = Codec{
	Name:      "delta+plain+zstd",
	SeriesEnc: parquet.Encodings.DeltaBinaryPacked,
	PeriodEnc: parquet.Encodings.DeltaBinaryPacked,
	ValueEnc:  parquet.Encodings.Plain,
	Codec:     compress.Codecs.Zstd,
	Level:     3,
}

// Schema is the Parquet schema of tail.parquet: series (uint32), period
// (DATE, or TIMESTAMP(MILLIS, UTC): Parquet has no seconds unit), value
// (DOUBLE); all required.
func Schema(timestamp bool) (*schema.GroupNode, error) {
	series, err := schema.NewPrimitiveNodeLogical("series", parquet.Repetitions.Required, schema.NewIntLogicalType(32, false), parquet.Types.Int32, 0, -1)
	if err != nil {
		return nil, err
	}
	var period *schema.PrimitiveNode
	if timestamp {
		period, err = schema.NewPrimitiveNodeLogical("period", parquet.Repetitions.Required, schema.NewTimestampLogicalTypeForce(true, schema.TimeUnitMillis), parquet.Types.Int64, 0, -1)
	} else {
		period, err = schema.NewPrimitiveNodeLogical("period", parquet.Repetitions.Required, schema.DateLogicalType{}, parquet.Types.Int32, 0, -1)
	}
	if err != nil {
		return nil, err
	}
	value, err := schema.NewPrimitiveNode("value", parquet.Repetitions.Required, parquet.Types.Double, -1, 0)
	if err != nil {
		return nil, err
	}
	return schema.NewGroupNode("schema", parquet.Repetitions.Required, schema.FieldList{series, period, value}, -1)
}

func writerProps(tc Codec) *parquet.WriterProperties {
	return parquet.NewWriterProperties(
		parquet.WithCreatedBy(CreatedBy),
		parquet.WithVersion(parquet.V2_6),
		parquet.WithDataPageVersion(parquet.DataPageV1),
		parquet.WithDictionaryDefault(false),
		parquet.WithStats(false),
		// Per row group min/max of the series column lets a third-party
		// reader skip row groups when it looks for one series.
		parquet.WithStatsFor("series", true),
		parquet.WithEncodingFor("series", tc.SeriesEnc),
		parquet.WithEncodingFor("period", tc.PeriodEnc),
		parquet.WithEncodingFor("value", tc.ValueEnc),
		parquet.WithCompression(tc.Codec),
		parquet.WithCompressionLevel(tc.Level),
		// One page per column chunk: a row group is decoded whole anyway.
		parquet.WithDataPageSize(64<<20),
		parquet.WithMaxRowGroupLength(math.MaxInt32),
		parquet.WithBatchSize(64<<10),
	)
}

// Write writes groups to w as Parquet encoded with tc, one row group per
// group, kv in the footer's key-value metadata.
func Write(w io.Writer, timestamp bool, kv [][2]string, groups []tailhook.Group, tc Codec) (err error) {
	root, err := Schema(timestamp)
	if err != nil {
		return err
	}
	md := metadata.NewKeyValueMetadata()
	for _, p := range kv {
		md.Append(p[0], p[1])
	}
	fw, err := file.NewParquetWriterWithError(w, root, file.WithWriterProps(writerProps(tc)), file.WithWriteMetadata(md))
	if err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("parquet writer: %v", p)
		}
	}()
	var ms []int64
	for _, g := range groups {
		rg, err := fw.AppendRowGroupChecked()
		if err != nil {
			return err
		}
		cw, err := rg.NextColumn()
		if err != nil {
			return err
		}
		if _, err := cw.(*file.Int32ColumnChunkWriter).WriteBatch(int32s(g.Series), nil, nil); err != nil {
			return err
		}
		if cw, err = rg.NextColumn(); err != nil {
			return err
		}
		if timestamp {
			ms = ms[:0]
			for _, s := range g.Secs {
				ms = append(ms, s*1000)
			}
			_, err = cw.(*file.Int64ColumnChunkWriter).WriteBatch(ms, nil, nil)
		} else {
			_, err = cw.(*file.Int32ColumnChunkWriter).WriteBatch(g.Days, nil, nil)
		}
		if err != nil {
			return err
		}
		if cw, err = rg.NextColumn(); err != nil {
			return err
		}
		if _, err := cw.(*file.Float64ColumnChunkWriter).WriteBatch(g.Values, nil, nil); err != nil {
			return err
		}
		if err := rg.Close(); err != nil {
			return err
		}
	}
	return fw.Close()
}

// int32s reinterprets series numbers (< 2^32-1 series, checked by
// format's validation) as Parquet's INT32 physical type; the logical type
// says unsigned.
func int32s(s []uint32) []int32 {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&s[0])), len(s))
}
