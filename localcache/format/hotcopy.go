package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"unsafe"
)

// Over returns a HotIndex that reads index.hash's tables (the slot table,
// the directory, the row table and the records) from b, a copy of the
// index.hash bytes hb that t was opened on, and everything else as t
// does. hb is not read (only where its tables lie in it), so it may have
// been unmapped since. The copy is checked first: its header must be the
// one t was opened on, byte for byte, and its tables must match the
// header's two checksums (one pass
// of CRC-32C over the copy, ~20 ms at full scale). So a copy read from a
// file damaged since open, or a short or torn copy, is refused with a
// CorruptionError rather than served. A version 1 index.hash (records
// built at open, no tables in the file to copy) is refused too.
//
// Lookups may move from t to the result at any time: both answer every
// lookup alike.
func (t *HotIndex) Over(hb, b []byte) (*HotIndex, error) {
	if t.Built {
		return nil, errors.New("index.hash version 1: its records are built at open, not read from the file")
	}
	if len(b) != len(hb) {
		return nil, corrupt(HashFile, -1, "copy of %d bytes, the file has %d", len(b), len(hb))
	}
	if len(b) < hotHeaderSize || !bytes.Equal(b[:hotHeaderSize], t.head) {
		return nil, corrupt(HashFile, 0, "the copy's header differs from the file's")
	}
	h, err := OpenHash(b, int(t.n))
	if err != nil {
		return nil, err
	}
	var tablesAt, recAt uint64
	if h.version >= hashVersion4 {
		tablesAt, _, recAt, _ = hotLayout4(uint64(h.log2), uint64(h.n), uint64(h.batches))
	} else {
		tablesAt, recAt, _ = hotLayout(uint64(h.log2), uint64(h.n), uint64(h.batches), uint64(h.stride))
	}
	if recAt > uint64(len(b)) {
		return nil, corrupt(HashFile, -1, "tables end at %d, the file has %d bytes", recAt, len(b))
	}
	if got, want := crc32.Checksum(b[tablesAt:recAt], castagnoli), binary.LittleEndian.Uint32(b[20:]); got != want {
		return nil, corrupt(HashFile, int64(tablesAt), "copy: table checksum %08x, want %08x", got, want)
	}
	if got, want := hotCRC(b, tablesAt, recAt), binary.LittleEndian.Uint32(b[28:]); got != want {
		return nil, corrupt(HashFile, batchAt, "copy: batch table and records checksum %08x, want %08x", got, want)
	}
	u := &HotIndex{
		mask: t.mask, n: t.n, locs: t.locs, index: t.index, data: t.data, head: t.head,
		pt: t.pt, secs: t.secs, stride: t.stride, inline: t.inline,
		shift: t.shift, bounds: t.bounds, base: t.base,
	}
	for _, f := range []struct{ from, to *[]byte }{{&t.slots, &u.slots}, {&t.recs, &u.recs}, {&t.dir, &u.dir}, {&t.pos, &u.pos}} {
		if *f.to, err = rebase(*f.from, hb, b); err != nil {
			return nil, err
		}
	}
	// The first lookups' prefetches are for data.arrow's pages as much as
	// for index.hash's: the count carries over.
	u.cold.Store(t.cold.Load())
	return u, nil
}

// rebase returns the bytes of b at the offset and length s has in hb (nil
// for a nil s).
func rebase(s, hb, b []byte) ([]byte, error) {
	if s == nil {
		return nil, nil
	}
	off := int(uintptr(unsafe.Pointer(unsafe.SliceData(s))) - uintptr(unsafe.Pointer(unsafe.SliceData(hb))))
	if len(s) == 0 {
		off = 0
	}
	if off < 0 || off > len(hb)-len(s) {
		return nil, errors.New("index.hash table outside the file")
	}
	return b[off : off+len(s) : off+len(s)], nil
}
