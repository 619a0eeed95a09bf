package cook

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Arrow IPC input is untrusted: arrow-go allocates what a message header
// claims (a message body, a decompressed buffer) before it reads the bytes.
// A 704-byte stream whose header claims a 2^40-byte body, or a compressed
// buffer that claims a 2^40-byte decompressed length, would end the
// process with a fatal out-of-memory, which no recover can catch. So every
// IPC message is checked against the bytes actually present before arrow-go
// sees it:
//
//   - the metadata and the body of each message lie inside the input;
//   - each buffer of a record or dictionary batch lies inside its body;
//   - a batch's row count and node lengths are at most 8 x its body size + 64
//     (every column this package reads spends at least a bit per row);
//   - a compressed buffer's declared decompressed length is at most
//     MaxIPCExpansion x the input size (the bytes read so far, for a stream
//     of unknown size) + 64 MiB, summed over the message.
//
// The check reads the message flatbuffers by hand (arrow-go's flatbuf
// package is internal) with bounds checks on every offset.

// ErrMalformed is wrapped by errors about input whose framing or lengths are
// inconsistent with its size (a forged or truncated file).
var ErrMalformed = errors.New("malformed input")

// MaxIPCExpansion bounds how much a compressed Arrow IPC body may expand:
// the decompressed bytes a message declares may be at most this many times
// the input's size, plus ipcExpansionSlack.
const (
	MaxIPCExpansion   = 64
	ipcExpansionSlack = 64 << 20
)

// fbuf is a bounds-checked view of one flatbuffer.
type fbuf []byte

var errFB = fmt.Errorf("%w: bad IPC message metadata", ErrMalformed)

func (b fbuf) u32(off int) (uint32, error) {
	if off < 0 || off > len(b)-4 {
		return 0, errFB
	}
	return binary.LittleEndian.Uint32(b[off:]), nil
}

func (b fbuf) i64(off int) (int64, error) {
	if off < 0 || off > len(b)-8 {
		return 0, errFB
	}
	return int64(binary.LittleEndian.Uint64(b[off:])), nil
}

// table returns the position of the table that the uoffset at off points
// to, and the position and size of its vtable.
func (b fbuf) table(off int) (tab, vt, vtLen int, err error) {
	u, err := b.u32(off)
	if err != nil {
		return 0, 0, 0, err
	}
	tab = off + int(u)
	s, err := b.u32(tab)
	if err != nil {
		return 0, 0, 0, err
	}
	vt = tab - int(int32(s))
	if vt < 0 || vt > len(b)-4 {
		return 0, 0, 0, errFB
	}
	vtLen = int(binary.LittleEndian.Uint16(b[vt:]))
	return tab, vt, vtLen, nil
}

// field returns the position of field id of a table, or -1 when absent.
// It reads the vtable as the flatbuffers library does (an entry exists
// when its offset is below the vtable's size, even an odd size); an entry
// outside the buffer gives len(b), where every read fails.
func (b fbuf) field(tab, vt, vtLen, id int) int {
	p := 4 + 2*id
	if p >= vtLen {
		return -1
	}
	if vt+p+2 > len(b) {
		return len(b)
	}
	o := int(binary.LittleEndian.Uint16(b[vt+p:]))
	if o == 0 {
		return -1
	}
	return tab + o
}

// vector returns the position of the first element and the length of the
// vector field at pos, with elements of size elem; (0, 0) when absent.
func (b fbuf) vector(pos, elem int) (start, n int, err error) {
	if pos < 0 {
		return 0, 0, nil
	}
	u, err := b.u32(pos)
	if err != nil {
		return 0, 0, err
	}
	v := pos + int(u)
	l, err := b.u32(v)
	if err != nil {
		return 0, 0, err
	}
	start, n = v+4, int(l)
	if n < 0 || start > len(b) || n > (len(b)-start)/elem {
		return 0, 0, errFB
	}
	return start, n, nil
}

// Message header types (Schema.fbs MessageHeader).
const (
	ipcHeaderSchema     = 1
	ipcHeaderDictionary = 2
	ipcHeaderRecord     = 3
)

// ipcMessageInfo is what checkIPCMessage read from one message's metadata.
type ipcMessageInfo struct {
	header  byte
	bodyLen int64
}

// checkIPCMessage checks one message: meta is its flatbuffer, body its
// body bytes (already known to be inside the input), total the input's
// size (for the decompression bound).
func checkIPCMessage(meta fbuf, body []byte, total int64) (ipcMessageInfo, error) {
	var info ipcMessageInfo
	tab, vt, vtLen, err := meta.table(0)
	if err != nil {
		return info, err
	}
	if p := meta.field(tab, vt, vtLen, 1); p >= 0 {
		if p >= len(meta) {
			return info, errFB
		}
		info.header = meta[p]
	}
	if vtLen < 4 {
		return info, errFB
	}
	if p := meta.field(tab, vt, vtLen, 3); p >= 0 {
		if info.bodyLen, err = meta.i64(p); err != nil {
			return info, err
		}
	}
	if info.bodyLen < 0 {
		return info, fmt.Errorf("%w: IPC message claims a body of %d bytes", ErrMalformed, info.bodyLen)
	}
	if body == nil { // the caller checks the body length itself
		return info, nil
	}
	if info.bodyLen != int64(len(body)) {
		return info, fmt.Errorf("%w: IPC message claims a body of %d bytes, %d present", ErrMalformed, info.bodyLen, len(body))
	}
	// custom_metadata: [KeyValue]
	if err := meta.checkKeyValues(meta.field(tab, vt, vtLen, 4)); err != nil {
		return info, err
	}
	hp := meta.field(tab, vt, vtLen, 2)
	switch info.header {
	case ipcHeaderSchema:
		if hp < 0 {
			return info, errFB
		}
		return info, meta.checkSchema(hp)
	case ipcHeaderRecord:
		if hp < 0 {
			return info, errFB
		}
		return info, checkIPCBatch(meta, hp, body, total)
	case ipcHeaderDictionary:
		if hp < 0 {
			return info, errFB
		}
		dt, dvt, dvtLen, err := meta.table(hp)
		if err != nil {
			return info, err
		}
		rp := meta.field(dt, dvt, dvtLen, 1)
		if rp < 0 {
			return info, errFB
		}
		return info, checkIPCBatch(meta, rp, body, total)
	}
	return info, nil
}

// arrow-go sizes slices by the lengths of flatbuffer vectors (a schema's
// fields, a field's children, custom metadata, a union's type ids) without
// checking them against the buffer: a 700-byte schema claiming 2^32 fields
// asked for 260 GB. These checks walk every vector arrow-go allocates for.

// maxIPCNesting bounds the nesting of a schema's fields.
const maxIPCNesting = 64

// checkVector checks the vector field at pos (absent is fine) and returns
// its start and length.
func (b fbuf) checkVector(pos, elem int) (start, n int, err error) {
	start, n, err = b.vector(pos, elem)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: IPC metadata vector longer than its message", ErrMalformed)
	}
	return start, n, nil
}

// checkKeyValues checks a [KeyValue] vector field: KeyValue{key, value}.
func (b fbuf) checkKeyValues(pos int) error {
	return b.checkTables(pos, func(tab, vt, vtLen int) error {
		for id := range 2 {
			if _, _, err := b.checkVector(b.field(tab, vt, vtLen, id), 1); err != nil {
				return err
			}
		}
		return nil
	})
}

// checkTables checks a vector of tables (uoffsets) at pos and calls check
// with each table in turn, stopping at the first error.
func (b fbuf) checkTables(pos int, check func(tab, vt, vtLen int) error) error {
	start, n, err := b.checkVector(pos, 4)
	if err != nil {
		return err
	}
	for k := range n {
		tab, vt, vtLen, err := b.table(start + 4*k)
		if err != nil {
			return err
		}
		if err := check(tab, vt, vtLen); err != nil {
			return err
		}
	}
	return nil
}

// checkSchema checks the Schema table that the uoffset at pos points to:
// fields [Field] (1), custom_metadata [KeyValue] (2), features [long] (3).
func (b fbuf) checkSchema(pos int) error {
	tab, vt, vtLen, err := b.table(pos)
	if err != nil {
		return err
	}
	if err := b.checkFields(b.field(tab, vt, vtLen, 1), 0); err != nil {
		return err
	}
	if err := b.checkKeyValues(b.field(tab, vt, vtLen, 2)); err != nil {
		return err
	}
	_, _, err = b.checkVector(b.field(tab, vt, vtLen, 3), 8)
	return err
}

// checkFields checks a [Field] vector: Field{name (0), nullable (1),
// type_type (2), type (3), dictionary (4), children [Field] (5),
// custom_metadata [KeyValue] (6)}.
func (b fbuf) checkFields(pos, depth int) error {
	if depth > maxIPCNesting {
		return fmt.Errorf("%w: IPC schema nested deeper than %d", ErrMalformed, maxIPCNesting)
	}
	return b.checkTables(pos, func(tab, vt, vtLen int) error {
		if _, _, err := b.checkVector(b.field(tab, vt, vtLen, 0), 1); err != nil {
			return err
		}
		if err := b.checkFields(b.field(tab, vt, vtLen, 5), depth+1); err != nil {
			return err
		}
		if err := b.checkKeyValues(b.field(tab, vt, vtLen, 6)); err != nil {
			return err
		}
		tp := b.field(tab, vt, vtLen, 3)
		if tt := b.field(tab, vt, vtLen, 2); tt >= 0 && tp >= 0 && tt < len(b) {
			ttab, tvt, tvtLen, err := b.table(tp)
			if err != nil {
				return err
			}
			switch b[tt] {
			case 10: // Timestamp{unit, timezone string}
				if _, _, err := b.checkVector(b.field(ttab, tvt, tvtLen, 1), 1); err != nil {
					return err
				}
			case 14: // Union{mode, typeIds [int]}
				if _, _, err := b.checkVector(b.field(ttab, tvt, tvtLen, 1), 4); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// checkIPCBatch checks the RecordBatch table that the uoffset at pos points
// to against its body.
func checkIPCBatch(meta fbuf, pos int, body []byte, total int64) error {
	tab, vt, vtLen, err := meta.table(pos)
	if err != nil {
		return err
	}
	maxRows := 8*int64(len(body)) + 64
	if p := meta.field(tab, vt, vtLen, 0); p >= 0 {
		n, err := meta.i64(p)
		if err != nil {
			return err
		}
		if n < 0 || n > maxRows {
			return fmt.Errorf("%w: IPC record batch claims %d rows in a %d-byte body", ErrMalformed, n, len(body))
		}
	}
	// Nodes: struct FieldNode { length: long; null_count: long }.
	start, n, err := meta.vector(meta.field(tab, vt, vtLen, 1), 16)
	if err != nil {
		return err
	}
	for k := range n {
		l, _ := meta.i64(start + 16*k)
		nulls, _ := meta.i64(start + 16*k + 8)
		if l < 0 || l > maxRows || nulls < 0 || nulls > l {
			return fmt.Errorf("%w: IPC column node claims %d rows (%d null) in a %d-byte body", ErrMalformed, l, nulls, len(body))
		}
	}
	if _, _, err := meta.checkVector(meta.field(tab, vt, vtLen, 4), 8); err != nil { // variadicBufferCounts
		return err
	}
	compressed := meta.field(tab, vt, vtLen, 3) >= 0
	// Buffers: struct Buffer { offset: long; length: long }.
	start, n, err = meta.vector(meta.field(tab, vt, vtLen, 2), 16)
	if err != nil {
		return err
	}
	limit := MaxIPCExpansion*total + ipcExpansionSlack
	var expand int64
	for k := range n {
		off, _ := meta.i64(start + 16*k)
		l, _ := meta.i64(start + 16*k + 8)
		if off < 0 || l < 0 || off > int64(len(body)) || l > int64(len(body))-off {
			return fmt.Errorf("%w: IPC buffer %d at %d+%d is outside its %d-byte body", ErrMalformed, k, off, l, len(body))
		}
		if !compressed || l == 0 {
			continue
		}
		if l < 8 {
			return fmt.Errorf("%w: compressed IPC buffer %d has %d bytes", ErrMalformed, k, l)
		}
		u := int64(binary.LittleEndian.Uint64(body[off:]))
		if u == -1 {
			continue // stored uncompressed
		}
		if u < 0 || u > limit-expand {
			return fmt.Errorf("%w: compressed IPC buffer %d claims %d bytes decompressed (limit %d for a %d-byte input)", ErrMalformed, k, u, limit, total)
		}
		expand += u
	}
	return nil
}

// checkIPCStream checks every message of an Arrow IPC stream held in data
// (see the comment at the top of this file). It stops at an end-of-stream
// marker or the end of data; a message cut short is an error.
func checkIPCStream(data []byte) error {
	total := int64(len(data))
	pos := 0
	for n := 0; pos < len(data); n++ {
		if len(data)-pos < 4 {
			return fmt.Errorf("%w: IPC message %d: truncated length", ErrMalformed, n)
		}
		l := binary.LittleEndian.Uint32(data[pos:])
		pos += 4
		if l == 0xFFFFFFFF {
			if len(data)-pos < 4 {
				return fmt.Errorf("%w: IPC message %d: truncated length", ErrMalformed, n)
			}
			l = binary.LittleEndian.Uint32(data[pos:])
			pos += 4
		}
		if l == 0 {
			return nil // end of stream
		}
		if l > math.MaxInt32 || int64(l) > int64(len(data)-pos) {
			return fmt.Errorf("%w: IPC message %d claims %d bytes of metadata, %d left in the input", ErrMalformed, n, l, len(data)-pos)
		}
		meta := fbuf(data[pos : pos+int(l)])
		pos += int(l)
		info, err := checkIPCMessage(meta, nil, total)
		if err != nil {
			return fmt.Errorf("IPC message %d: %w", n, err)
		}
		if info.bodyLen > int64(len(data)-pos) {
			return fmt.Errorf("%w: IPC message %d claims a body of %d bytes, %d left in the input", ErrMalformed, n, info.bodyLen, len(data)-pos)
		}
		body := data[pos : pos+int(info.bodyLen)]
		pos += int(info.bodyLen)
		if _, err := checkIPCMessage(meta, body, total); err != nil {
			return fmt.Errorf("IPC message %d: %w", n, err)
		}
	}
	return nil
}

// ipcMessageReader is an ipc.MessageReader that checks each message before
// arrow-go decodes it: the metadata and body buffers grow only as their
// bytes arrive (so a forged length costs at most the bytes actually sent),
// and checkIPCMessage bounds what decoding the body may allocate.
type ipcMessageReader struct {
	r     io.Reader
	refs  atomic.Int64
	msg   *ipc.Message
	n     int   // messages read
	total int64 // input size, when known; else -1
	read  int64 // bytes consumed
}

// NewIPCStreamReader reads an Arrow IPC stream from untrusted input with
// allocation bounded by the input (see the comment at the top of
// ipcscan.go). Errors about the framing wrap ErrMalformed.
func NewIPCStreamReader(r io.Reader, opts ...ipc.Option) (*ipc.Reader, error) {
	return newIPCStreamReader(r, -1, opts...)
}

func newIPCStreamReader(r io.Reader, size int64, opts ...ipc.Option) (*ipc.Reader, error) {
	mr := &ipcMessageReader{r: r, total: size}
	mr.refs.Add(1)
	rd, err := ipc.NewReaderFromMessageReader(mr, opts...)
	if err != nil {
		mr.Release()
		return nil, err
	}
	return rd, nil
}

func (m *ipcMessageReader) Retain() { m.refs.Add(1) }

func (m *ipcMessageReader) Release() {
	if m.refs.Add(-1) == 0 && m.msg != nil {
		m.msg.Release()
		m.msg = nil
	}
}

// readN reads exactly n bytes, growing its buffer as the bytes arrive.
func (m *ipcMessageReader) readN(n int64, what string) ([]byte, error) {
	if m.total >= 0 && n > m.total-m.read {
		return nil, fmt.Errorf("%w: IPC message %d claims %d bytes of %s, %d left in the input", ErrMalformed, m.n, n, what, m.total-m.read)
	}
	const step = 4 << 20
	buf := make([]byte, 0, min(n, step))
	for int64(len(buf)) < n {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, int(min(n-int64(len(buf)), int64(len(buf)))))
		}
		k, err := io.ReadFull(m.r, buf[len(buf):min(int64(cap(buf)), n)])
		buf = buf[:len(buf)+k]
		m.read += int64(k)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("%w: IPC message %d claims %d bytes of %s, the input ends after %d", ErrMalformed, m.n, n, what, len(buf))
			}
			return nil, err
		}
	}
	return buf, nil
}

func (m *ipcMessageReader) Message() (*ipc.Message, error) {
	var hdr [4]byte
	k, err := io.ReadFull(m.r, hdr[:])
	m.read += int64(k)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF // no end-of-stream marker: the end all the same
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%w: IPC message %d: truncated length", ErrMalformed, m.n)
		}
		return nil, err
	}
	l := binary.LittleEndian.Uint32(hdr[:])
	if l == 0xFFFFFFFF {
		k, err := io.ReadFull(m.r, hdr[:])
		m.read += int64(k)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("%w: IPC message %d: truncated length", ErrMalformed, m.n)
			}
			return nil, err
		}
		l = binary.LittleEndian.Uint32(hdr[:])
	}
	if l == 0 {
		return nil, io.EOF
	}
	if l > math.MaxInt32 {
		return nil, fmt.Errorf("%w: IPC message %d claims %d bytes of metadata", ErrMalformed, m.n, l)
	}
	meta, err := m.readN(int64(l), "metadata")
	if err != nil {
		return nil, err
	}
	info, err := checkIPCMessage(meta, nil, 0)
	if err != nil {
		return nil, fmt.Errorf("IPC message %d: %w", m.n, err)
	}
	body, err := m.readN(info.bodyLen, "body")
	if err != nil {
		return nil, err
	}
	total := m.total
	if total < 0 {
		total = m.read
	}
	if _, err := checkIPCMessage(meta, body, total); err != nil {
		return nil, fmt.Errorf("IPC message %d: %w", m.n, err)
	}
	m.n++
	if m.msg != nil {
		m.msg.Release()
	}
	m.msg = ipc.NewMessage(memory.NewBufferBytes(meta), memory.NewBufferBytes(body))
	return m.msg, nil
}

// checkIPCFileFooter checks the footer of an Arrow IPC file of size bytes
// (read through r) before arrow-go decodes it: Footer{version (0),
// schema (1), dictionaries [Block] (2), recordBatches [Block] (3),
// custom_metadata (4)}, then "ARROW1" after its int32 length. The blocks
// themselves arrow-go checks against the file size.
func checkIPCFileFooter(r io.ReaderAt, size int64) error {
	const tail = 10 // int32 footer length + "ARROW1"
	if size < 8+tail {
		return fmt.Errorf("%w: Arrow IPC file of %d bytes", ErrMalformed, size)
	}
	var end [tail]byte
	if _, err := r.ReadAt(end[:], size-tail); err != nil {
		return err
	}
	if string(end[4:]) != "ARROW1" {
		return fmt.Errorf("%w: Arrow IPC file does not end with ARROW1", ErrMalformed)
	}
	n := int64(int32(binary.LittleEndian.Uint32(end[:4])))
	if n <= 0 || n > size-8-tail {
		return fmt.Errorf("%w: Arrow IPC file footer claims %d bytes of a %d-byte file", ErrMalformed, n, size)
	}
	buf := make([]byte, n)
	if _, err := r.ReadAt(buf, size-tail-n); err != nil {
		return err
	}
	b := fbuf(buf)
	tab, vt, vtLen, err := b.table(0)
	if err != nil {
		return err
	}
	if p := b.field(tab, vt, vtLen, 1); p >= 0 {
		if err := b.checkSchema(p); err != nil {
			return err
		}
	}
	for _, id := range []int{2, 3} {
		if _, _, err := b.checkVector(b.field(tab, vt, vtLen, id), 24); err != nil {
			return err
		}
	}
	return b.checkKeyValues(b.field(tab, vt, vtLen, 4))
}
