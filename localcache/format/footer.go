package format

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// checkFooter bounds the vectors of an Arrow IPC file footer's schema
// before arrow-go decodes it.
//
// arrow-go trusts the lengths of flatbuffer vectors: schemaFromFB,
// fieldFromFB and metadataFromFB make() slices of FieldsLength(),
// ChildrenLength() and CustomMetadataLength() elements as read from the
// file. A flipped bit there asks for hundreds of gigabytes, and the runtime
// dies with "fatal error: out of memory", which no recover() catches; a
// child offset that wraps around makes fieldFromFB recurse until the stack
// overflows, also fatal. Our schemas have at most a dozen fields, no
// children and two metadata pairs, so anything beyond small limits is
// corruption. The walk uses the same wrapping uint32 arithmetic as the
// generated flatbuffer accessors, so it checks exactly the positions
// arrow-go will read.
func checkFooter(b []byte) error {
	const (
		eof         = 10 // int32 footer size + "ARROW1"
		maxVector   = 64
		maxDepth    = 4
		slotSchema  = 6  // Footer.schema
		slotFields  = 6  // Schema.fields
		slotSchemaM = 8  // Schema.custom_metadata
		slotChild   = 14 // Field.children
		slotFieldM  = 16 // Field.custom_metadata
	)
	if len(b) < eof+8 {
		return nil // too small for arrow-go too; it reports that itself
	}
	size := int64(int32(binary.LittleEndian.Uint32(b[len(b)-eof:])))
	if size <= 0 || size > int64(len(b)-eof) {
		return nil // arrow-go refuses an inconsistent footer size
	}
	fb := fbuf(b[int64(len(b)-eof)-size : len(b)-eof])
	errBad := errors.New("footer: malformed schema flatbuffer")

	root, ok := fb.u32(0)
	if !ok {
		return errBad
	}
	schemaAt, ok := fb.field(root, slotSchema)
	if !ok {
		return errBad
	}
	if schemaAt == 0 {
		return nil // no schema: arrow-go reports it
	}
	schema, ok := fb.indirect(schemaAt)
	if !ok {
		return errBad
	}
	// vec checks the vector of tables in slot of table t and returns the
	// positions of its elements.
	vec := func(t uint32, slot uint16, what string) ([]uint32, error) {
		at, ok := fb.field(t, slot)
		if !ok {
			return nil, errBad
		}
		if at == 0 {
			return nil, nil
		}
		start, n, ok := fb.vector(at)
		if !ok {
			return nil, errBad
		}
		if n > maxVector {
			return nil, fmt.Errorf("footer: %d %s (at most %d expected)", n, what, maxVector)
		}
		out := make([]uint32, n)
		for i := range out {
			if out[i], ok = fb.indirect(start + 4*uint32(i)); !ok {
				return nil, errBad
			}
		}
		return out, nil
	}
	var field func(f uint32, depth int) error
	field = func(f uint32, depth int) error {
		if depth > maxDepth {
			return errors.New("footer: schema nested too deep")
		}
		if _, err := vec(f, slotFieldM, "field metadata entries"); err != nil {
			return err
		}
		children, err := vec(f, slotChild, "child fields")
		if err != nil {
			return err
		}
		for _, c := range children {
			if err := field(c, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if _, err := vec(schema, slotSchemaM, "schema metadata entries"); err != nil {
		return err
	}
	fields, err := vec(schema, slotFields, "fields")
	if err != nil {
		return err
	}
	for _, f := range fields {
		if err := field(f, 0); err != nil {
			return err
		}
	}
	return nil
}

// fbuf reads flatbuffer positions with bounds checks; positions are uint32
// and wrap like flatbuffers.UOffsetT.
type fbuf []byte

func (b fbuf) u32(pos uint32) (uint32, bool) {
	if uint64(pos)+4 > uint64(len(b)) {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b[pos:]), true
}

func (b fbuf) u16(pos uint32) (uint16, bool) {
	if uint64(pos)+2 > uint64(len(b)) {
		return 0, false
	}
	return binary.LittleEndian.Uint16(b[pos:]), true
}

// field returns the position of the field at vtable offset slot of the
// table at t (flatbuffers.Table.Offset + t), or 0 if the field is absent.
func (b fbuf) field(t uint32, slot uint16) (uint32, bool) {
	so, ok := b.u32(t)
	if !ok {
		return 0, false
	}
	vt := uint32(int32(t) - int32(so))
	vtLen, ok := b.u16(vt)
	if !ok {
		return 0, false
	}
	if slot >= vtLen {
		return 0, true
	}
	off, ok := b.u16(vt + uint32(slot))
	if !ok {
		return 0, false
	}
	if off == 0 {
		return 0, true
	}
	return t + uint32(off), true
}

// indirect follows the uoffset stored at pos (flatbuffers.Table.Indirect).
func (b fbuf) indirect(pos uint32) (uint32, bool) {
	rel, ok := b.u32(pos)
	return pos + rel, ok
}

// vector returns the first element and the length of the vector of
// uoffsets referenced at pos, checking that it lies inside the buffer.
func (b fbuf) vector(pos uint32) (start, n uint32, ok bool) {
	v, ok := b.indirect(pos)
	if !ok {
		return 0, 0, false
	}
	if n, ok = b.u32(v); !ok {
		return 0, 0, false
	}
	start = v + 4
	if uint64(start)+4*uint64(n) > uint64(len(b)) {
		return 0, 0, false
	}
	return start, n, true
}
