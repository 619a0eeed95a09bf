package format

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/klauspost/compress/zstd"
)

// The cold read path decodes the column chunks of tail.parquet itself,
// straight from the mapped bytes: it walks the data pages of a chunk
// (thrift compact page headers), decompresses ZSTD directly into the
// destination slice for PLAIN values (or into a pooled scratch buffer for
// DELTA_BINARY_PACKED ones, unpacked into the destination). The footer is
// decoded by hand too (tail_footer.go). arrow-go's typed column readers
// allocated and copied some 160 KB per 8Ki-row row group, which cost more
// than ZSTD itself, and its reader links arrow/compute. The tests compare
// both paths.

// chunkRef locates one column chunk of one row group.
type chunkRef struct {
	off, size int64
	codec     int32 // parquet.thrift CompressionCodec
}

var zstdDec = sync.OnceValue(func() *zstd.Decoder {
	// DecodeAll is safe for concurrent use; the cap limit bounds what a
	// corrupt frame can make it allocate to the size we expect.
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecodeAllCapLimit(true), zstd.IgnoreChecksum(false))
	if err != nil {
		panic(err)
	}
	return d
})

var scratchPool = sync.Pool{New: func() any { return new([]byte) }}

// decodeChunk fills dst with the len(dst) values of a column chunk. T is
// the column's physical type: int32, int64 or float64 (DOUBLE).
func decodeChunk[T int32 | int64 | float64](file []byte, c chunkRef, block, col int, dst []T) error {
	bad := func(format string, args ...any) error {
		return corrupt(TailFile, -1, "row group %d column %d: %s", block, col, fmt.Sprintf(format, args...))
	}
	if c.off < 4 || c.size < 0 || c.off+c.size > int64(len(file))-8 {
		return bad("chunk [%d, +%d) outside the file of %d bytes", c.off, c.size, len(file))
	}
	if c.codec != pqZstd && c.codec != pqUncompressed {
		return bad("unsupported codec %s", pqCodecName(c.codec))
	}
	var z T
	width := int(unsafe.Sizeof(z))
	chunk := file[c.off : c.off+c.size]
	got := 0
	for len(chunk) > 0 {
		h, n, err := parsePageHeader(chunk)
		if err != nil {
			return bad("page header: %v", err)
		}
		chunk = chunk[n:]
		if h.typ != 0 { // DATA_PAGE (v1): the only kind the writer emits
			return bad("page type %d", h.typ)
		}
		if h.compressed < 0 || int64(h.compressed) > int64(len(chunk)) || h.uncompressed < 0 {
			return bad("page of %d bytes, %d left in the chunk", h.compressed, len(chunk))
		}
		payload := chunk[:h.compressed]
		chunk = chunk[h.compressed:]
		nv := int(h.numValues)
		if nv < 0 || nv > len(dst)-got {
			return bad("page of %d values, %d left of %d", nv, len(dst)-got, len(dst))
		}
		out := dst[got : got+nv]
		switch h.encoding {
		case pqPlain:
			if int(h.uncompressed) != nv*width {
				return bad("PLAIN page of %d bytes for %d values", h.uncompressed, nv)
			}
			if nv > 0 {
				// The capacity beyond the values (see Tail.Block) lets
				// ZSTD use its fast copy loops, which may write up to 16
				// bytes past the end of a match.
				spare := (cap(dst) - got - nv) * width
				raw := unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), nv*width+spare)[:nv*width]
				if err := decompressInto(c.codec, payload, raw); err != nil {
					return bad("%v", err)
				}
			}
		case pqDeltaBinary:
			// A packed value takes at most its width plus a share of the
			// block headers: refuse a page that claims more before
			// allocating for it.
			if int64(h.uncompressed) > int64(nv)*int64(width+2)+64 {
				return bad("DELTA_BINARY_PACKED page of %d bytes for %d values", h.uncompressed, nv)
			}
			data, release, err := decompressScratch(c.codec, payload, int(h.uncompressed))
			if err != nil {
				return bad("%v", err)
			}
			switch o := any(out).(type) {
			case []int32:
				err = decodeDelta(data, o, 32)
			case []int64:
				err = decodeDelta(data, o, 64)
			default:
				err = fmt.Errorf("DELTA_BINARY_PACKED for %T", z)
			}
			release()
			if err != nil {
				return bad("%v", err)
			}
		default:
			return bad("unsupported encoding %s for %T", pqEncodingName(h.encoding), z)
		}
		got += nv
	}
	if got != len(dst) {
		return bad("%d values, want %d", got, len(dst))
	}
	return nil
}

// decompressInto decodes payload into exactly len(dst) bytes of dst (it
// may scribble on dst's spare capacity).
func decompressInto(codec int32, payload, dst []byte) error {
	if codec == pqUncompressed {
		if len(payload) != len(dst) {
			return fmt.Errorf("page of %d bytes, want %d", len(payload), len(dst))
		}
		copy(dst, payload)
		return nil
	}
	out, err := zstdDec().DecodeAll(payload, dst[:0:cap(dst)])
	if err != nil {
		return fmt.Errorf("zstd: %v", err)
	}
	if len(out) != len(dst) {
		return fmt.Errorf("zstd: %d bytes, want %d", len(out), len(dst))
	}
	if &out[0] != &dst[0] {
		copy(dst, out) // not reached with the cap limit; kept for safety
	}
	return nil
}

// decompressScratch returns the decoded payload, in a pooled buffer unless
// the page is stored uncompressed; release returns the buffer.
func decompressScratch(codec int32, payload []byte, size int) ([]byte, func(), error) {
	if codec == pqUncompressed {
		return payload, func() {}, nil
	}
	bp := scratchPool.Get().(*[]byte)
	if cap(*bp) < size+8*zstdSpare {
		*bp = make([]byte, size+8*zstdSpare)
	}
	buf := (*bp)[:size]
	if err := decompressInto(codec, payload, buf); err != nil {
		scratchPool.Put(bp)
		return nil, nil, err
	}
	return buf, func() { scratchPool.Put(bp) }, nil
}

// pageHeader is the part of Parquet's PageHeader the reader needs.
type pageHeader struct {
	typ, uncompressed, compressed int32
	numValues, encoding           int32
}

var errThrift = errors.New("malformed thrift")

// parsePageHeader reads a thrift-compact PageHeader and returns it with
// its length in bytes. Fields other than type, sizes and the data page
// header's num_values and encoding are skipped.
func parsePageHeader(b []byte) (h pageHeader, n int, err error) {
	r := thriftReader{b: b}
	have := 0
	err = r.readStruct(func(id int16, typ byte) error {
		switch {
		case id == 1 && typ == tcI32:
			h.typ, err = r.i32()
			have |= 1
		case id == 2 && typ == tcI32:
			h.uncompressed, err = r.i32()
			have |= 2
		case id == 3 && typ == tcI32:
			h.compressed, err = r.i32()
			have |= 4
		case id == 5 && typ == tcStruct:
			have |= 8
			return r.readStruct(func(id int16, typ byte) error {
				switch {
				case id == 1 && typ == tcI32:
					h.numValues, err = r.i32()
					have |= 16
				case id == 2 && typ == tcI32:
					h.encoding, err = r.i32()
					have |= 32
				default:
					return r.skip(typ, 0)
				}
				return err
			})
		default:
			return r.skip(typ, 0)
		}
		return err
	})
	if err != nil {
		return h, 0, err
	}
	if have&7 != 7 {
		return h, 0, fmt.Errorf("page header without type or sizes")
	}
	if h.typ == 0 && have&(8|16|32) != 8|16|32 {
		return h, 0, fmt.Errorf("data page header without num_values or encoding")
	}
	return h, r.pos, nil
}

// Thrift compact protocol types.
const (
	tcTrue   = 1
	tcFalse  = 2
	tcByte   = 3
	tcI16    = 4
	tcI32    = 5
	tcI64    = 6
	tcDouble = 7
	tcBinary = 8
	tcList   = 9
	tcSet    = 10
	tcMap    = 11
	tcStruct = 12
)

type thriftReader struct {
	b   []byte
	pos int
}

func (r *thriftReader) byte() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, errThrift
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

func (r *thriftReader) uvarint() (uint64, error) {
	v, n := binary.Uvarint(r.b[r.pos:])
	if n <= 0 {
		return 0, errThrift
	}
	r.pos += n
	return v, nil
}

func (r *thriftReader) i32() (int32, error) {
	u, err := r.uvarint()
	if err != nil || u > 0xffffffff {
		return 0, errThrift
	}
	return int32(uint32(u)>>1) ^ -int32(u&1), nil
}

// readStruct calls field for every field until STOP; field must consume
// the field's value.
func (r *thriftReader) readStruct(field func(id int16, typ byte) error) error {
	var last int16
	for {
		c, err := r.byte()
		if err != nil {
			return err
		}
		if c == 0 {
			return nil
		}
		typ := c & 0x0f
		id := last + int16(c>>4)
		if c>>4 == 0 {
			u, err := r.uvarint()
			if err != nil {
				return err
			}
			id = int16(uint16(u>>1) ^ -uint16(u&1))
		}
		last = id
		if err := field(id, typ); err != nil {
			return err
		}
	}
}

// listHeader reads a list or set header: its size and element type.
func (r *thriftReader) listHeader() (n uint64, et byte, err error) {
	c, err := r.byte()
	if err != nil {
		return 0, 0, err
	}
	n = uint64(c >> 4)
	if n == 15 {
		if n, err = r.uvarint(); err != nil {
			return 0, 0, err
		}
	}
	return n, c & 0x0f, nil
}

// skip consumes a value of type typ. depth bounds nesting.
func (r *thriftReader) skip(typ byte, depth int) error {
	if depth > 16 {
		return errThrift
	}
	switch typ {
	case tcTrue, tcFalse:
		return nil // the value is in the type nibble
	case tcByte:
		_, err := r.byte()
		return err
	case tcI16, tcI32, tcI64:
		_, err := r.uvarint()
		return err
	case tcDouble:
		if r.pos+8 > len(r.b) {
			return errThrift
		}
		r.pos += 8
		return nil
	case tcBinary:
		n, err := r.uvarint()
		if err != nil || n > uint64(len(r.b)-r.pos) {
			return errThrift
		}
		r.pos += int(n)
		return nil
	case tcList, tcSet:
		n, et, err := r.listHeader()
		if err != nil {
			return err
		}
		if n > uint64(len(r.b)-r.pos) {
			return errThrift // every element takes at least a byte... except booleans, which take one too in lists
		}
		for range n {
			if et == tcTrue || et == tcFalse {
				if _, err := r.byte(); err != nil {
					return err
				}
				continue
			}
			if err := r.skip(et, depth+1); err != nil {
				return err
			}
		}
		return nil
	case tcMap:
		n, err := r.uvarint()
		if err != nil || n > uint64(len(r.b)-r.pos) {
			return errThrift
		}
		if n == 0 {
			return nil
		}
		kv, err := r.byte()
		if err != nil {
			return err
		}
		for range n {
			if err := r.skip(kv>>4, depth+1); err != nil {
				return err
			}
			if err := r.skip(kv&0x0f, depth+1); err != nil {
				return err
			}
		}
		return nil
	case tcStruct:
		return r.readStruct(func(_ int16, typ byte) error { return r.skip(typ, depth+1) })
	}
	return errThrift
}

var errDeltaShort = errors.New("DELTA_BINARY_PACKED page ends early")

// uvarint reads a ULEB128 value.
func uvarint(b []byte, pos *int) (uint64, error) {
	v, n := binary.Uvarint(b[*pos:])
	if n <= 0 {
		return 0, errDeltaShort
	}
	*pos += n
	return v, nil
}

func zigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// decodeDelta decodes a DELTA_BINARY_PACKED page of exactly len(out)
// values (Parquet spec, "Delta Encoding"): a header <block size> <miniblocks
// per block> <total count> <first value>, then blocks of <min delta> <one bit
// width per miniblock> <miniblocks>, each miniblock holding block
// size/miniblocks deltas bit-packed LSB first. Arithmetic wraps at the
// physical width (32 or 64 bits), as the spec requires.
func decodeDelta[T int32 | int64](b []byte, out []T, width uint) error {
	pos := 0
	blockSize, err := uvarint(b, &pos)
	if err != nil {
		return err
	}
	minis, err := uvarint(b, &pos)
	if err != nil {
		return err
	}
	total, err := uvarint(b, &pos)
	if err != nil {
		return err
	}
	first, err := uvarint(b, &pos)
	if err != nil {
		return err
	}
	if blockSize == 0 || blockSize%128 != 0 || blockSize > 1<<20 || minis == 0 || blockSize%minis != 0 || (blockSize/minis)%32 != 0 {
		return fmt.Errorf("DELTA_BINARY_PACKED header: block size %d, %d miniblocks", blockSize, minis)
	}
	if total != uint64(len(out)) {
		return fmt.Errorf("DELTA_BINARY_PACKED page of %d values, want %d", total, len(out))
	}
	if len(out) == 0 {
		return nil
	}
	perMini := int(blockSize / minis)
	last := uint64(zigzag(first))
	out[0] = T(last)
	i := 1
	for i < len(out) {
		md, err := uvarint(b, &pos)
		if err != nil {
			return err
		}
		minDelta := uint64(zigzag(md))
		if pos+int(minis) > len(b) {
			return errDeltaShort
		}
		widths := b[pos : pos+int(minis)]
		pos += int(minis)
		for _, w := range widths {
			if i >= len(out) {
				break
			}
			if uint(w) > width {
				return fmt.Errorf("DELTA_BINARY_PACKED bit width %d exceeds %d", w, width)
			}
			n := min(perMini, len(out)-i)
			if w == 0 {
				for k := range n {
					last += minDelta
					out[i+k] = T(last)
				}
			} else {
				size := perMini * int(w) / 8
				if pos+size > len(b) {
					// The last miniblock may be cut short only if the
					// values it still has to hold fit.
					if need := (n*int(w) + 7) / 8; pos+need > len(b) {
						return errDeltaShort
					}
					size = len(b) - pos
				}
				unpackDeltas(b[pos:pos+size], uint(w), out[i:i+n], &last, minDelta)
			}
			pos += perMini * int(w) / 8
			i += n
		}
	}
	return nil
}

// unpackDeltas adds len(out) bit-packed deltas of width w (1..64) plus
// minDelta to *last, storing each running value.
func unpackDeltas[T int32 | int64](b []byte, w uint, out []T, last *uint64, minDelta uint64) {
	mask := ^uint64(0)
	if w < 64 {
		mask = 1<<w - 1
	}
	v := *last
	var bit uint
	for k := range out {
		byteAt := int(bit >> 3)
		shift := bit & 7
		var word uint64
		if byteAt+8 <= len(b) {
			word = binary.LittleEndian.Uint64(b[byteAt:])
		} else {
			for j := 0; byteAt+j < len(b) && j < 8; j++ {
				word |= uint64(b[byteAt+j]) << (8 * j)
			}
		}
		d := word >> shift
		if shift+w > 64 && byteAt+8 < len(b) {
			d |= uint64(b[byteAt+8]) << (64 - shift)
		}
		v += (d & mask) + minDelta
		out[k] = T(v)
		bit += w
	}
	*last = v
}
