package cook

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// sampleParquet writes three rows as an uncompressed Parquet file whose
// last column, series_id, is dictionary-encoded: its chunk (a dictionary
// page, then a data page) ends just before the footer, so a test may grow
// its page headers without moving any offset the footer holds.
func sampleParquet(t testing.TB) []byte {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "period", Type: arrow.BinaryTypes.String},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64},
		{Name: "series_id", Type: arrow.BinaryTypes.String},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"2024-01-01", "2024-01-02", "2024-01-01"}, nil)
	b.Field(1).(*array.Float64Builder).AppendValues([]float64{1, 2, 3}, nil)
	b.Field(2).(*array.StringBuilder).AppendValues([]string{"A", "A", "B"}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sc, &buf, parquet.NewWriterProperties(parquet.WithDictionaryDefault(false), parquet.WithDictionaryFor("series_id", true), parquet.WithDictionaryCostFallbackFor("series_id", false)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// thrift compact protocol, just enough to walk a page header.
func uvarint(b []byte, p int) (uint64, int) {
	v, n := binary.Uvarint(b[p:])
	return v, p + n
}

func zigzag(v int64) []byte { return binary.AppendUvarint(nil, uint64(v<<1^v>>63)) }

// thriftField is an integer field of a struct: its id and the span of its
// varint.
type thriftField struct {
	id         int
	start, end int
}

// thriftStruct lists the integer fields of the struct at b[p:] and of the
// structs nested in it (nested ids are parent*100 + id); it returns the
// position after the struct's stop byte.
func thriftStruct(t testing.TB, b []byte, p, parent int, out *[]thriftField) int {
	id := 0
	for {
		h := b[p]
		p++
		if h == 0 {
			return p
		}
		if d := int(h >> 4); d != 0 {
			id += d
		} else {
			var v uint64
			v, p = uvarint(b, p)
			id = int(int64(v>>1) ^ -int64(v&1))
		}
		switch h & 0xF {
		case 1, 2: // bool
		case 3:
			p++
		case 4, 5, 6:
			s := p
			_, p = uvarint(b, p)
			*out = append(*out, thriftField{parent*100 + id, s, p})
		case 7:
			p += 8
		case 8:
			var n uint64
			n, p = uvarint(b, p)
			p += int(n)
		case 12:
			p = thriftStruct(t, b, p, parent*100+id, out)
		default:
			t.Fatalf("thrift type %d in a page header", h&0xF)
		}
	}
}

// forgeParquetPage rewrites integer field id of the header of the page at
// off (1-based thrift ids; a nested field is parent*100+id) to v, growing
// or shrinking the file; off must lie in the last column chunk.
func forgeParquetPage(t testing.TB, data []byte, off int64, id int, v int64) []byte {
	t.Helper()
	var fields []thriftField
	thriftStruct(t, data, int(off), 0, &fields)
	for _, f := range fields {
		if f.id == id {
			out := append(bytes.Clone(data[:f.start]), zigzag(v)...)
			return append(out, data[f.end:]...)
		}
	}
	t.Fatalf("no field %d in the page header at %d (%v)", id, off, fields)
	return nil
}

// lastChunkPages returns the offsets of the dictionary page and the data
// page of the file's last column chunk.
func lastChunkPages(t testing.TB, data []byte) (dict, page int64) {
	t.Helper()
	pr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	rg := pr.MetaData().RowGroup(0)
	cc, err := rg.ColumnChunk(rg.NumColumns() - 1)
	if err != nil {
		t.Fatal(err)
	}
	if !cc.HasDictionaryPage() {
		t.Fatal("last column has no dictionary page")
	}
	return cc.DictionaryPageOffset(), cc.DataPageOffset()
}

// forgeParquetFooter replaces every i64 field of value old that follows
// its previous field in the footer (header byte 0x16: num_rows of the file
// and of the row group, num_values, sizes) with v.
func forgeParquetFooter(t testing.TB, data []byte, old, v int64) []byte {
	t.Helper()
	flen := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	fstart := len(data) - 8 - flen
	footer := data[fstart : len(data)-8]
	pat := append([]byte{0x16}, zigzag(old)...)
	if !bytes.Contains(footer, pat) {
		t.Fatalf("no i64 field of value %d in the footer", old)
	}
	nf := bytes.ReplaceAll(footer, pat, append([]byte{0x16}, zigzag(v)...))
	out := append(bytes.Clone(data[:fstart]), nf...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(nf)))
	return append(out, "PAR1"...)
}

// chunkSize is the total compressed size of the last column chunk.
func chunkSize(t testing.TB, data []byte) int64 {
	pr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	rg := pr.MetaData().RowGroup(0)
	cc, err := rg.ColumnChunk(rg.NumColumns() - 1)
	if err != nil {
		t.Fatal(err)
	}
	return cc.TotalCompressedSize()
}

// forgedParquetInputs are Parquet files whose page headers or footer claim
// sizes and counts far beyond their bytes.
func forgedParquetInputs(t testing.TB) map[string][]byte {
	data := sampleParquet(t)
	dict, page := lastChunkPages(t, data)
	// forge a page header field and let the chunk's length in the footer
	// cover the longer header, so the reader gets as far as the page.
	forge := func(off int64, id int, v int64) []byte {
		n := chunkSize(t, data)
		out := forgeParquetPage(t, data, off, id, v)
		return forgeParquetFooter(t, out, n, n+int64(len(out)-len(data)))
	}
	// PageHeader: 2 uncompressed_page_size, 3 compressed_page_size,
	// 7 dictionary_page_header { 1 num_values }, 5 data_page_header
	// { 1 num_values }.
	return map[string][]byte{
		"parquet page compressed 2^31-1":                    forge(page, 3, 1<<31-1),
		"parquet page uncompressed 2^31-1":                  forge(page, 2, 1<<31-1),
		"parquet page values 2^31-1 (read as it is)":        forge(page, 501, 1<<31-1),
		"parquet dictionary page size 2^31-1":               forge(dict, 2, 1<<31-1),
		"parquet dictionary compressed 2^31-1":              forge(dict, 3, 1<<31-1),
		"parquet dictionary entries 2^31-1 (read as it is)": forge(dict, 701, 1<<31-1),
		"parquet rows and values 2^40":                      forgeParquetFooter(t, data, 3, 1<<40),
		"parquet negative rows":                             forgeParquetFooter(t, data, 3, -1),
		"parquet footer length 2^31":                        append(bytes.Clone(data[:len(data)-8]), 0, 0, 0, 0x80, 'P', 'A', 'R', '1'),
		"parquet chunk length 2^40":                         forgeParquetFooter(t, data, chunkSize(t, data), 1<<40),
	}
}
