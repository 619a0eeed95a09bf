package format

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// The footer of tail.parquet is decoded here, by hand, rather than by
// arrow-go's parquet/file reader: that reader's package links
// parquet/metadata, which links arrow/compute, whose init registers every
// compute kernel, and that costs every binary that opens a snapshot
// several MiB of RSS before it reads anything (BENCHMARKS.md "Serving
// snapshot v2"). Only the fields the reader uses are decoded; the rest is
// skipped. TestTailFooterMatchesArrowGo and FuzzTailFooter compare the
// result with arrow-go's metadata reader.

// Parquet enum values (parquet.thrift) the reader compares with.
const (
	pqInt32  = 1 // Type.INT32
	pqInt64  = 2 // Type.INT64
	pqDouble = 5 // Type.DOUBLE

	pqRequired = 0 // FieldRepetitionType.REQUIRED

	pqPlain       = 0 // Encoding.PLAIN
	pqDeltaBinary = 5 // Encoding.DELTA_BINARY_PACKED

	pqUncompressed = 0 // CompressionCodec.UNCOMPRESSED
	pqZstd         = 6 // CompressionCodec.ZSTD
)

// pqCodecName names a CompressionCodec in error messages.
func pqCodecName(c int32) string {
	switch c {
	case pqUncompressed:
		return "UNCOMPRESSED"
	case pqZstd:
		return "ZSTD"
	}
	return "codec " + strconv.Itoa(int(c))
}

// pqEncodingName names an Encoding in error messages.
func pqEncodingName(e int32) string {
	switch e {
	case pqPlain:
		return "PLAIN"
	case pqDeltaBinary:
		return "DELTA_BINARY_PACKED"
	}
	return "encoding " + strconv.Itoa(int(e))
}

// tailColumn is what the footer says about one column chunk.
type tailColumn struct {
	typ          int32 // physical type
	codec        int32
	dataPage     int64 // data_page_offset
	compressed   int64 // total_compressed_size
	hasDict      bool  // dictionary_page_offset is set
	hasMeta      bool  // meta_data is set
	externalFile bool  // file_path is set
}

type tailRowGroup struct {
	numRows int64
	columns []tailColumn
}

// tailLeaf is one SchemaElement.
type tailLeaf struct {
	name        string
	typ         int32 // -1: not set
	repetition  int32 // -1: not set
	numChildren int32 // -1: not set
	converted   int32 // -1: not set
	logical     string
}

type tailFooter struct {
	schema    []tailLeaf
	rowGroups []tailRowGroup
	kv        map[string]string
}

// tailFooterMax bounds the footer a reader accepts (a footer of 10^6 row
// groups is some 150 MB; the format's row groups are 8Ki rows).
const tailFooterMax = 1 << 30

// parseTailFooter decodes the FileMetaData of a Parquet file.
func parseTailFooter(b []byte) (*tailFooter, error) {
	if len(b) < 12 || string(b[:4]) != "PAR1" || string(b[len(b)-4:]) != "PAR1" {
		return nil, fmt.Errorf("not a Parquet file (magic)")
	}
	n := int64(binary.LittleEndian.Uint32(b[len(b)-8:]))
	if n <= 0 || n > tailFooterMax || n > int64(len(b)-12) {
		return nil, fmt.Errorf("footer of %d bytes in a file of %d", n, len(b))
	}
	r := thriftReader{b: b[int64(len(b)-8)-n : len(b)-8]}
	f := &tailFooter{kv: map[string]string{}}
	err := r.readStruct(func(id int16, typ byte) error {
		switch {
		case id == 2 && typ == tcList: // schema
			return r.list(tcStruct, func() error {
				l, err := r.schemaElement()
				f.schema = append(f.schema, l)
				return err
			})
		case id == 4 && typ == tcList: // row_groups
			return r.list(tcStruct, func() error {
				g, err := r.rowGroup()
				f.rowGroups = append(f.rowGroups, g)
				return err
			})
		case id == 5 && typ == tcList: // key_value_metadata
			return r.list(tcStruct, func() error {
				var k, v string
				var haveKey bool
				err := r.readStruct(func(id int16, typ byte) error {
					var err error
					switch {
					case id == 1 && typ == tcBinary:
						k, err = r.str()
						haveKey = true
					case id == 2 && typ == tcBinary:
						v, err = r.str()
					default:
						return r.skip(typ, 1)
					}
					return err
				})
				if err == nil && !haveKey {
					return fmt.Errorf("key-value pair without a key")
				}
				f.kv[k] = v
				return err
			})
		}
		return r.skip(typ, 0)
	})
	if err != nil {
		return nil, fmt.Errorf("footer: %v", err)
	}
	return f, nil
}

// list reads a list header, requires elements of type et, and calls elem
// for each.
func (r *thriftReader) list(et byte, elem func() error) error {
	n, got, err := r.listHeader()
	if err != nil {
		return err
	}
	if got != et {
		if n == 0 {
			return nil
		}
		return fmt.Errorf("list of type %d, want %d", got, et)
	}
	if n > uint64(len(r.b)-r.pos) {
		return errThrift // every element takes at least a byte
	}
	for range n {
		if err := elem(); err != nil {
			return err
		}
	}
	return nil
}

func (r *thriftReader) i64() (int64, error) {
	u, err := r.uvarint()
	if err != nil {
		return 0, err
	}
	return zigzag(u), nil
}

func (r *thriftReader) str() (string, error) {
	n, err := r.uvarint()
	if err != nil || n > uint64(len(r.b)-r.pos) {
		return "", errThrift
	}
	s := string(r.b[r.pos : r.pos+int(n)])
	r.pos += int(n)
	return s, nil
}

func (r *thriftReader) schemaElement() (tailLeaf, error) {
	l := tailLeaf{typ: -1, repetition: -1, numChildren: -1, converted: -1}
	err := r.readStruct(func(id int16, typ byte) error {
		var err error
		switch {
		case id == 1 && typ == tcI32:
			l.typ, err = r.i32()
		case id == 3 && typ == tcI32:
			l.repetition, err = r.i32()
		case id == 4 && typ == tcBinary:
			l.name, err = r.str()
		case id == 5 && typ == tcI32:
			l.numChildren, err = r.i32()
		case id == 6 && typ == tcI32:
			l.converted, err = r.i32()
		case id == 10 && typ == tcStruct:
			l.logical, err = r.logicalType()
		default:
			return r.skip(typ, 1)
		}
		return err
	})
	return l, err
}

// logicalType renders the LogicalType union as the few forms the tail's
// schema uses: "INT(32,false)", "DATE", "TIMESTAMP(true,MILLIS)"; any
// other as "logical N".
func (r *thriftReader) logicalType() (string, error) {
	var out string
	err := r.readStruct(func(id int16, typ byte) error {
		if typ != tcStruct {
			return r.skip(typ, 2)
		}
		switch id {
		case 6: // DATE
			out = "DATE"
			return r.skip(typ, 2)
		case 10: // INTEGER: bitWidth i8, isSigned bool
			width, signed := -1, "?"
			err := r.readStruct(func(id int16, typ byte) error {
				switch {
				case id == 1 && typ == tcByte:
					c, err := r.byte()
					width = int(int8(c))
					return err
				case id == 2 && (typ == tcTrue || typ == tcFalse):
					signed = strconv.FormatBool(typ == tcTrue)
					return nil
				}
				return r.skip(typ, 3)
			})
			out = fmt.Sprintf("INT(%d,%s)", width, signed)
			return err
		case 8: // TIMESTAMP: isAdjustedToUTC bool, unit TimeUnit
			utc, unit := "?", "?"
			err := r.readStruct(func(id int16, typ byte) error {
				switch {
				case id == 1 && (typ == tcTrue || typ == tcFalse):
					utc = strconv.FormatBool(typ == tcTrue)
					return nil
				case id == 2 && typ == tcStruct:
					return r.readStruct(func(id int16, typ byte) error {
						switch id {
						case 1:
							unit = "MILLIS"
						case 2:
							unit = "MICROS"
						case 3:
							unit = "NANOS"
						}
						return r.skip(typ, 4)
					})
				}
				return r.skip(typ, 3)
			})
			out = fmt.Sprintf("TIMESTAMP(%s,%s)", utc, unit)
			return err
		}
		out = "logical " + strconv.Itoa(int(id))
		return r.skip(typ, 2)
	})
	return out, err
}

func (r *thriftReader) rowGroup() (tailRowGroup, error) {
	g := tailRowGroup{numRows: -1}
	err := r.readStruct(func(id int16, typ byte) error {
		var err error
		switch {
		case id == 1 && typ == tcList:
			return r.list(tcStruct, func() error {
				c, err := r.columnChunk()
				g.columns = append(g.columns, c)
				return err
			})
		case id == 3 && typ == tcI64:
			g.numRows, err = r.i64()
		default:
			return r.skip(typ, 1)
		}
		return err
	})
	return g, err
}

func (r *thriftReader) columnChunk() (tailColumn, error) {
	c := tailColumn{typ: -1, codec: -1, dataPage: -1, compressed: -1}
	err := r.readStruct(func(id int16, typ byte) error {
		switch {
		case id == 1 && typ == tcBinary:
			c.externalFile = true
			return r.skip(typ, 2)
		case id == 3 && typ == tcStruct:
			c.hasMeta = true
			return r.readStruct(func(id int16, typ byte) error {
				var err error
				switch {
				case id == 1 && typ == tcI32:
					c.typ, err = r.i32()
				case id == 4 && typ == tcI32:
					c.codec, err = r.i32()
				case id == 7 && typ == tcI64:
					c.compressed, err = r.i64()
				case id == 9 && typ == tcI64:
					c.dataPage, err = r.i64()
				case id == 11 && typ == tcI64:
					c.hasDict = true
					_, err = r.i64()
				default:
					return r.skip(typ, 3)
				}
				return err
			})
		}
		return r.skip(typ, 2)
	})
	return c, err
}

// tailLeaves is the schema tail.parquet must have for a period type: the
// root, then series, period and value, as arrow-go writes them.
func tailLeaves(pt PeriodType) []tailLeaf {
	period := tailLeaf{name: "period", typ: pqInt32, repetition: pqRequired, numChildren: -1, converted: 6, logical: "DATE"} // DATE
	if pt == PeriodTimestamp {
		period = tailLeaf{name: "period", typ: pqInt64, repetition: pqRequired, numChildren: -1, converted: 9, logical: "TIMESTAMP(true,MILLIS)"} // TIMESTAMP_MILLIS
	}
	return []tailLeaf{
		{name: "schema", typ: -1, repetition: pqRequired, numChildren: 3, converted: -1},
		{name: "series", typ: pqInt32, repetition: pqRequired, numChildren: -1, converted: 13, logical: "INT(32,false)"}, // UINT_32
		period,
		{name: "value", typ: pqDouble, repetition: pqRequired, numChildren: -1, converted: -1},
	}
}

// checkSchema compares the footer's schema with the one of pt. A converted
// type may be absent (a writer may omit it) but not different.
func (f *tailFooter) checkSchema(pt PeriodType) error {
	want := tailLeaves(pt)
	if len(f.schema) != len(want) {
		return fmt.Errorf("schema of %d elements, want %d", len(f.schema), len(want))
	}
	for i, w := range want {
		g := f.schema[i]
		if i == 0 && g.repetition == -1 {
			g.repetition = pqRequired // the root's repetition is optional
		}
		if g.converted == -1 {
			g.converted = w.converted
		}
		if g.numChildren == 0 && w.numChildren == -1 {
			g.numChildren = -1
		}
		if g != w {
			return fmt.Errorf("schema element %d is %+v, want %+v", i, g, w)
		}
	}
	return nil
}

// checkRows validates the row count of a row group.
func checkRows(i int, n int64) error {
	if n < 0 || n > math.MaxUint32 {
		return fmt.Errorf("row group %d has %d rows", i, n)
	}
	return nil
}
