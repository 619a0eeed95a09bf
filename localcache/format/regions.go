package format

import (
	"encoding/binary"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
)

// Span is the byte range [Lo, Hi) of a snapshot file.
type Span struct{ Lo, Hi int }

// PointSpans returns, per data.arrow record batch, the bytes that lookups
// read: the batch's period and value columns (from the batch table, which
// open has checked to lie inside data.arrow). The rest of data.arrow (the
// `series` column, the Arrow headers and footer) is read only by Verify,
// compaction and export. The snapshot keeps the two apart in its mapping
// (mmap.File.Isolate), so that reading points never makes `series` pages
// resident.
func (t *HotIndex) PointSpans() []Span {
	out := make([]Span, 0, len(t.locs))
	psize := uint64(t.pt.size())
	for _, l := range t.locs {
		lo, hi := min(l.periodsAt, l.valuesAt), max(l.periodsAt+psize*l.rows, l.valuesAt+8*l.rows)
		if l.rows == 0 || hi > uint64(len(t.data)) {
			continue
		}
		out = append(out, Span{int(lo), int(hi)})
	}
	return out
}

// BufferSpans returns the byte ranges in b (index.arrow, as given to
// OpenIndex) of the index's column buffers, in column order: lookups read
// only the series id column's (IDSpans), Info and search the others.
func (x *Index) BufferSpans(b []byte) []Span {
	if x.rec == nil {
		return nil
	}
	return bufferSpans(b, x.rec.Columns()...)
}

// IDSpans is BufferSpans of the series id column alone: the bytes a
// lookup compares its id with, where the hot record does not hold them.
func (x *Index) IDSpans(b []byte) []Span {
	if x.rec == nil {
		return nil
	}
	return bufferSpans(b, x.rec.Column(IdxSeriesID))
}

func bufferSpans(b []byte, cols ...arrow.Array) []Span {
	if len(b) == 0 {
		return nil
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	var out []Span
	for _, col := range cols {
		for _, buf := range col.Data().Buffers() {
			if buf == nil || buf.Len() == 0 {
				continue
			}
			p := uintptr(unsafe.Pointer(unsafe.SliceData(buf.Bytes())))
			if p < base || p-base > uintptr(len(b)) || uintptr(buf.Len()) > uintptr(len(b))-(p-base) {
				continue // not a view of b (never for a file read in place)
			}
			lo := int(p - base)
			out = append(out, Span{lo, lo + buf.Len()})
		}
	}
	return out
}

// ID returns the series id of index row row as its hot record locates it
// in index.arrow (the bytes a lookup compares), without reading
// index.arrow's offsets column: listing every id then keeps that column
// out of memory (2.82M series: 10.8 MiB). ok is false when row is out of
// range or the record points outside index.arrow (a damaged file; Verify
// reports it).
func (t *HotIndex) ID(row uint32) (id string, ok bool) {
	rec, ok := t.Rec(row)
	if !ok {
		return "", false
	}
	rb := t.recs[uint64(rec)*t.stride:][:t.stride]
	l, at := uint64(binary.LittleEndian.Uint16(rb[14:])), binary.LittleEndian.Uint64(rb[16:])
	if l <= t.inline {
		return unsafe.String(&rb[recordHead], l), true
	}
	if at > uint64(len(t.index)) || l > uint64(len(t.index))-at {
		return "", false
	}
	if l == 0 {
		return "", true
	}
	return unsafe.String(&t.index[at], l), true
}
