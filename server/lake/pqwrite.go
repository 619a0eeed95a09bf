package lake

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/encoding/delta"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	pq "github.com/parquet-go/parquet-go/format"

	"github.com/energyscope/energyscope/localcache/format"
)

// The data file's bytes are laid out here directly (FORMAT.md, "The
// lake"): this schema has nothing a general Parquet writer would add
// value to, and its per-row work is the cost of a publish. Each row group
// (series-aligned, about groupRows rows) holds one column chunk per
// column, each chunk one data page (plus a dictionary page for the
// strings), uncompressed, Parquet data page v1, no levels (every column
// is required):
//
//   - series_id, frequency, unit, name, source: BYTE_ARRAY (UTF8), a
//     PLAIN dictionary page of the row group's distinct values and an
//     RLE_DICTIONARY data page made of one RLE run per series (or per run
//     of series sharing the value): its size and cost are per series;
//   - period: INT32 (DATE) or INT64 (TIMESTAMP(MICROS, UTC)),
//     DELTA_BINARY_PACKED (a series' evenly spaced periods take a few
//     bits a row);
//   - value: DOUBLE, PLAIN: the snapshot's value column as is.
//
// Statistics (min/max, null count 0) for series_id and period; column
// orders TYPE_DEFINED_ORDER; field ids from the table schema.

var deltaEnc delta.BinaryPackedEncoding

// pqColumns: the data file's columns in table order.
var pqColumns = [...]struct {
	id   int
	name string
}{
	{fieldSeriesID, "series_id"}, {fieldPeriod, "period"}, {fieldValue, "value"},
	{fieldFrequency, "frequency"}, {fieldUnit, "unit"}, {fieldName, "name"}, {fieldSource, "source"},
}

// strCols maps the five string columns to their position in pqColumns.
var strCols = [5]int{0, 3, 4, 5, 6}

// pqFile writes one data file.
type pqFile struct {
	w      *countingWriter
	pt     format.PeriodType
	groups []pq.RowGroup
	rows   int64
	buf    []byte // scratch for pages
}

func newPQFile(w io.Writer, pt format.PeriodType) (*pqFile, error) {
	f := &pqFile{w: &countingWriter{w: w}, pt: pt}
	if _, err := f.w.Write([]byte("PAR1")); err != nil {
		return nil, err
	}
	return f, nil
}

// pqGroup is one row group being built: per string column its dictionary
// and runs, the periods (days or microseconds) and the values.
type pqGroup struct {
	dicts  [5]dictCol
	runs   [5][]pqRun
	days   []int32
	micros []int64
	values []float64
	// bounds of series_id (first, last: rows come sorted) and period
	firstID, lastID string
	minP, maxP      int64
}

type pqRun struct {
	code int32
	n    uint32
}

func (g *pqGroup) reset() {
	for i := range g.dicts {
		g.dicts[i].reset()
		g.runs[i] = g.runs[i][:0]
	}
	g.days, g.micros, g.values = g.days[:0], g.micros[:0], g.values[:0]
	g.firstID, g.lastID = "", ""
}

// add appends one series' rows: meta is its five strings, rows the
// snapshot batch holding them from off, n rows.
func (g *pqGroup) add(meta [5]string, rows *format.Batch, off, n uint32) {
	for i := range meta {
		c := g.dicts[i].code(meta[i], i == 0)
		rs := g.runs[i]
		if k := len(rs) - 1; k >= 0 && rs[k].code == c {
			rs[k].n += n
		} else {
			rs = append(rs, pqRun{c, n})
		}
		g.runs[i] = rs
	}
	if g.firstID == "" {
		g.firstID = meta[0]
	}
	g.lastID = meta[0]
	var lo, hi int64
	if rows.Secs != nil {
		s := rows.Secs[off : off+n]
		lo, hi = s[0], s[len(s)-1]
		for _, sec := range s {
			g.micros = append(g.micros, sec*1_000_000)
		}
	} else {
		d := rows.Days[off : off+n]
		lo, hi = int64(d[0]), int64(d[len(d)-1])
		g.days = append(g.days, d...)
	}
	if len(g.values) == 0 || lo < g.minP {
		g.minP = lo
	}
	if len(g.values) == 0 || hi > g.maxP {
		g.maxP = hi
	}
	g.values = append(g.values, rows.Values[off:off+n]...)
}

func (g *pqGroup) len() int { return len(g.values) }

var compact = new(thrift.CompactProtocol)

// page writes a page header and its body; it returns the page's offset
// and total size.
func (f *pqFile) page(h *pq.PageHeader, body ...[]byte) (int64, int64, error) {
	var n int
	for _, b := range body {
		n += len(b)
	}
	if n > 1<<31-1 {
		return 0, 0, fmt.Errorf("lake: data page of %d bytes (a series too long for one page)", n)
	}
	h.UncompressedPageSize, h.CompressedPageSize = int32(n), int32(n)
	hb, err := thrift.Marshal(compact, h)
	if err != nil {
		return 0, 0, err
	}
	start := f.w.n
	if _, err := f.w.Write(hb); err != nil {
		return 0, 0, err
	}
	for _, b := range body {
		if _, err := f.w.Write(b); err != nil {
			return 0, 0, err
		}
	}
	return start, f.w.n - start, nil
}

func dataPage(n int, enc pq.Encoding) *pq.PageHeader {
	return &pq.PageHeader{Type: pq.DataPage, DataPageHeader: thrift.New(pq.DataPageHeader{
		NumValues: int32(n), Encoding: enc, DefinitionLevelEncoding: pq.RLE, RepetitionLevelEncoding: pq.RLE})}
}

// writeGroup writes g as the next row group.
func (f *pqFile) writeGroup(g *pqGroup) error {
	n := g.len()
	if n == 0 {
		return nil
	}
	if n > 1<<31-1 {
		return fmt.Errorf("lake: row group of %d rows", n)
	}
	cols := make([]pq.ColumnChunk, len(pqColumns))
	start := f.w.n
	// String columns: dictionary page + RLE runs.
	for si, ci := range strCols {
		d := &g.dicts[si]
		nd := len(d.acc.off) - 1
		dict := f.buf[:0]
		for i := range nd {
			v := d.acc.data[d.acc.off[i]:d.acc.off[i+1]]
			dict = binary.LittleEndian.AppendUint32(dict, uint32(len(v)))
			dict = append(dict, v...)
		}
		dictOff, dictLen, err := f.page(&pq.PageHeader{Type: pq.DictionaryPage, DictionaryPageHeader: thrift.New(pq.DictionaryPageHeader{
			NumValues: int32(nd), Encoding: pq.Plain})}, dict)
		if err != nil {
			return err
		}
		f.buf = dict
		width := max(1, bits.Len32(uint32(nd-1)))
		vb := (width + 7) / 8
		idx := []byte{byte(width)}
		for _, r := range g.runs[si] {
			idx = binary.AppendUvarint(idx, uint64(r.n)<<1)
			for b := range vb {
				idx = append(idx, byte(uint32(r.code)>>(8*b)))
			}
		}
		dataOff, dataLen, err := f.page(dataPage(n, pq.RLEDictionary), idx)
		if err != nil {
			return err
		}
		md := pq.ColumnMetaData{
			Type: pq.ByteArray, Encoding: thrift.Slice[pq.Encoding]{pq.Plain, pq.RLEDictionary},
			PathInSchema: thrift.Slice[string]{pqColumns[ci].name}, Codec: pq.Uncompressed,
			NumValues: int64(n), TotalUncompressedSize: dictLen + dataLen, TotalCompressedSize: dictLen + dataLen,
			DataPageOffset: dataOff, DictionaryPageOffset: dictOff,
		}
		if si == 0 {
			md.Statistics = pq.Statistics{MinValue: []byte(g.firstID), MaxValue: []byte(g.lastID)}
		}
		cols[ci] = pq.ColumnChunk{FileOffset: dictOff, MetaData: md}
	}
	// period DELTA_BINARY_PACKED (a series' periods are evenly spaced:
	// a few bits a row instead of 4 or 8 bytes), value PLAIN (the
	// column's bytes as they are).
	var (
		periodType  pq.Type
		periodBytes []byte
		minP, maxP  []byte
		err         error
	)
	if f.pt == format.PeriodTimestamp {
		periodType = pq.Int64
		periodBytes, err = deltaEnc.EncodeInt64(f.buf[:0], g.micros)
		minP = binary.LittleEndian.AppendUint64(nil, uint64(g.minP*1_000_000))
		maxP = binary.LittleEndian.AppendUint64(nil, uint64(g.maxP*1_000_000))
	} else {
		periodType = pq.Int32
		periodBytes, err = deltaEnc.EncodeInt32(f.buf[:0], g.days)
		minP = binary.LittleEndian.AppendUint32(nil, uint32(int32(g.minP)))
		maxP = binary.LittleEndian.AppendUint32(nil, uint32(int32(g.maxP)))
	}
	if err != nil {
		return err
	}
	f.buf = periodBytes
	for _, c := range []struct {
		ci    int
		typ   pq.Type
		enc   pq.Encoding
		body  []byte
		stats pq.Statistics
	}{
		{1, periodType, pq.DeltaBinaryPacked, periodBytes, pq.Statistics{MinValue: minP, MaxValue: maxP}},
		{2, pq.Double, pq.Plain, arrow.Float64Traits.CastToBytes(g.values), pq.Statistics{}},
	} {
		off, size, err := f.page(dataPage(n, c.enc), c.body)
		if err != nil {
			return err
		}
		cols[c.ci] = pq.ColumnChunk{FileOffset: off, MetaData: pq.ColumnMetaData{
			Type: c.typ, Encoding: thrift.Slice[pq.Encoding]{c.enc},
			PathInSchema: thrift.Slice[string]{pqColumns[c.ci].name}, Codec: pq.Uncompressed,
			NumValues: int64(n), TotalUncompressedSize: size, TotalCompressedSize: size,
			DataPageOffset: off, Statistics: c.stats,
		}}
	}
	// Chunks are listed in schema order; their bytes are in write order.
	f.groups = append(f.groups, pq.RowGroup{
		Columns: cols, TotalByteSize: f.w.n - start, NumRows: int64(n),
		FileOffset: start, TotalCompressedSize: f.w.n - start, Ordinal: int16(len(f.groups)),
	})
	f.rows += int64(n)
	return nil
}

// close writes the footer.
func (f *pqFile) close() error {
	leaf := func(name string, id int, typ pq.Type) pq.SchemaElement {
		return pq.SchemaElement{Type: thrift.New(typ), RepetitionType: thrift.New(pq.Required), Name: name, FieldID: int32(id)}
	}
	schema := thrift.Slice[pq.SchemaElement]{{Name: "schema", NumChildren: thrift.New(int32(len(pqColumns)))}}
	orders := make(thrift.Slice[pq.ColumnOrder], len(pqColumns))
	for i, c := range pqColumns {
		var e pq.SchemaElement
		switch c.id {
		case fieldPeriod:
			if f.pt == format.PeriodTimestamp {
				e = leaf(c.name, c.id, pq.Int64)
				e.ConvertedType = thrift.New(deprecated.TimestampMicros)
				e.LogicalType = pq.LogicalType{Value: &pq.TimestampType{IsAdjustedToUTC: true, Unit: pq.TimeUnit{Value: &pq.MicroSeconds{}}}}
			} else {
				e = leaf(c.name, c.id, pq.Int32)
				e.ConvertedType = thrift.New(deprecated.Date)
				e.LogicalType = pq.LogicalType{Value: &pq.DateType{}}
			}
		case fieldValue:
			e = leaf(c.name, c.id, pq.Double)
		default:
			e = leaf(c.name, c.id, pq.ByteArray)
			e.ConvertedType = thrift.New(deprecated.UTF8)
			e.LogicalType = pq.LogicalType{Value: &pq.StringType{}}
		}
		schema = append(schema, e)
		orders[i] = pq.ColumnOrder{Value: &pq.TypeDefinedOrder{}}
	}
	md := pq.FileMetaData{
		Version: 1, Schema: schema, NumRows: f.rows, RowGroups: f.groups,
		CreatedBy: createdBy, ColumnOrders: orders,
	}
	b, err := thrift.Marshal(compact, &md)
	if err != nil {
		return err
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(b)))
	b = append(b, "PAR1"...)
	_, err = f.w.Write(b)
	return err
}
