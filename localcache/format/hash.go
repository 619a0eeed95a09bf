package format

import (
	"encoding/binary"
	"hash/crc32"
	"math/bits"

	"github.com/zeebo/xxh3"
)

// index.hash layout, version 1 (little-endian):
//
//	0   [8]byte  magic "ESHASH\x00\x01"
//	8   uint32   version (1)
//	12  uint32   log2 of the slot count
//	16  uint32   series count
//	20  uint32   CRC-32C of the slot table
//	24  uint32   reserved (0)
//	28  uint32   CRC-32C of bytes 0..28
//	32  [slots]uint64 slot table
//
// Versions 2 and 3 (hot.go) have a 64-byte header, then the batch table,
// the same slot table, and the hot records.
//
// A slot is 0 when empty, otherwise (hi32(xxh3(id)) << 32) | (row + 1).
// Probing is linear from xxh3(id) & (slots-1). The load factor is <= 0.5,
// so a miss ends after a short run.
const (
	hashMagic      = "ESHASH\x00\x01"
	hashVersion    = 1
	hashHeaderSize = 32
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// HashID is the hash of a series id used by index.hash.
func HashID(id string) uint64 { return xxh3.HashString(id) }

// buildHash builds the slot table for ids (sorted, unique), row i = ids[i].
func buildHash(ids []string) []byte {
	n := len(ids)
	log2 := slotLog2(n)
	buf := make([]byte, hashHeaderSize+8*(uint64(1)<<log2))
	fillSlots(buf[hashHeaderSize:], ids)
	copy(buf, hashMagic)
	binary.LittleEndian.PutUint32(buf[8:], hashVersion)
	binary.LittleEndian.PutUint32(buf[12:], log2)
	binary.LittleEndian.PutUint32(buf[16:], uint32(n))
	binary.LittleEndian.PutUint32(buf[20:], crc32.Checksum(buf[hashHeaderSize:], castagnoli))
	binary.LittleEndian.PutUint32(buf[28:], crc32.Checksum(buf[:28], castagnoli))
	return buf
}

// slotLog2 is the log2 of the slot count for n series: load <= 0.5, at
// least 16 slots.
func slotLog2(n int) uint32 {
	log2 := uint32(bits.Len(uint(2*n - 1)))
	if n == 0 {
		log2 = 1
	}
	return max(log2, 4)
}

// fillSlots fills the slot table (zeroed, a power of two of 8-byte
// slots) for ids, row i = ids[i].
func fillSlots(table []byte, ids []string) {
	mask := uint64(len(table)/8) - 1
	for row, id := range ids {
		h := HashID(id)
		entry := (h>>32)<<32 | uint64(row+1)
		for i := h & mask; ; i = (i + 1) & mask {
			if binary.LittleEndian.Uint64(table[8*i:]) == 0 {
				binary.LittleEndian.PutUint64(table[8*i:], entry)
				break
			}
		}
	}
}

// Hash is a read-only view of index.hash's slot table. It holds no copy
// of the table: its lifetime is the lifetime of the bytes it was opened on.
type Hash struct {
	table   []byte
	mask    uint64
	n       uint32
	version int    // 1..5
	log2    uint32 // of the slot count (versions 4 and 5: of the bucket count)
	batches uint32 // versions 2 and 3: data.arrow's batch count
	stride  uint32 // versions 2 and 3: bytes a hot record
	inline  uint32 // versions 3..5: the longest id stored in its record
	base    int64  // version 5: what the records' first and last periods count from
}

// OpenHash checks the header of index.hash (version 1 or 2) and returns a
// view of its slot table. It does not checksum the tables (that is
// proportional to the data); Verify does. OpenHot opens the rest of a
// version 2 file.
func OpenHash(b []byte, series int) (Hash, error) {
	const f = "index.hash"
	if len(b) < hashHeaderSize {
		return Hash{}, corrupt(f, 0, "file is %d bytes, shorter than its %d-byte header", len(b), hashHeaderSize)
	}
	if string(b[:8]) != hashMagic {
		return Hash{}, corrupt(f, 0, "bad magic %q", b[:8])
	}
	header := hashHeaderSize
	switch v := binary.LittleEndian.Uint32(b[8:]); v {
	case hashVersion:
		if got, want := binary.LittleEndian.Uint32(b[28:]), crc32.Checksum(b[:28], castagnoli); got != want {
			return Hash{}, corrupt(f, 28, "header checksum %08x, want %08x", got, want)
		}
	case hashVersion2, hashVersion3, hashVersion4, hashVersion5:
		header = hotHeaderSize
		if len(b) < hotHeaderSize {
			return Hash{}, corrupt(f, 0, "file is %d bytes, shorter than its %d-byte header", len(b), hotHeaderSize)
		}
		if got, want := binary.LittleEndian.Uint32(b[60:]), crc32.Checksum(b[:60], castagnoli); got != want {
			return Hash{}, corrupt(f, 60, "header checksum %08x, want %08x", got, want)
		}
		reserved := 32
		if v == hashVersion3 || v == hashVersion5 {
			reserved = 40
		}
		for i := reserved; i < 60; i++ {
			if b[i] != 0 {
				return Hash{}, corrupt(f, int64(i), "reserved header byte is %#x, not 0", b[i])
			}
		}
		if v >= hashVersion4 {
			return openHash4(b, series, int(v))
		}
	default:
		return Hash{}, corrupt(f, 8, "unsupported version %d", v)
	}
	h := Hash{version: int(binary.LittleEndian.Uint32(b[8:])), stride: HotRecordSize}
	if h.version == hashVersion3 {
		h.inline, h.stride = binary.LittleEndian.Uint32(b[32:]), binary.LittleEndian.Uint32(b[36:])
		if h.inline < minInline || h.inline > maxInline {
			return Hash{}, corrupt(f, 32, "inline id length %d outside %d..%d", h.inline, minInline, maxInline)
		}
		if h.stride != recordStride(h.inline) {
			return Hash{}, corrupt(f, 36, "record stride %d, want %d for inline ids of %d bytes", h.stride, recordStride(h.inline), h.inline)
		}
	}
	h.log2 = binary.LittleEndian.Uint32(b[12:])
	n := binary.LittleEndian.Uint32(b[16:])
	if h.log2 > 40 {
		return Hash{}, corrupt(f, 12, "slot count 2^%d is absurd", h.log2)
	}
	slots := uint64(1) << h.log2
	size := uint64(header) + 8*slots
	if h.version != hashVersion {
		h.batches = binary.LittleEndian.Uint32(b[24:])
		var slotAt uint64
		slotAt, _, size = hotLayout(uint64(h.log2), uint64(n), uint64(h.batches), uint64(h.stride))
		header = int(slotAt)
	}
	if uint64(len(b)) != size {
		return Hash{}, corrupt(f, -1, "size %d does not match %d slots", len(b), slots)
	}
	if int(n) != series {
		return Hash{}, corrupt(f, 16, "holds %d series, index has %d", n, series)
	}
	if uint64(n)*2 > slots {
		return Hash{}, corrupt(f, 12, "%d series in %d slots exceeds the load factor", n, slots)
	}
	h.table, h.mask, h.n = b[header:uint64(header)+8*slots], slots-1, n
	return h, nil
}

// Lookup returns the index row of id. idAt returns the id stored at an
// index row; it is consulted only when the 32-bit hash tag matches.
func (h Hash) Lookup(id string, idAt func(row uint32) string) (uint32, bool) {
	if h.table == nil {
		return 0, false
	}
	hv := HashID(id)
	tag := hv >> 32
	for i, probes := hv&h.mask, uint64(0); probes <= h.mask; i, probes = (i+1)&h.mask, probes+1 {
		e := binary.LittleEndian.Uint64(h.table[8*i:])
		if e == 0 {
			return 0, false
		}
		if e>>32 == tag {
			row := uint32(e) - 1
			if row < h.n && idAt(row) == id {
				return row, true
			}
		}
	}
	return 0, false
}

// verifyHash checks the table checksum and that every series resolves to its
// own row.
func verifyHash(b []byte, ids func(row uint32) string, n int) error {
	h, err := OpenHash(b, n)
	if err != nil || h.version >= hashVersion4 { // no slot table: verifyHot4
		return err
	}
	if got, want := crc32.Checksum(h.table, castagnoli), binary.LittleEndian.Uint32(b[20:]); got != want {
		return corrupt("index.hash", int64(cap(b)-cap(h.table)), "slot table checksum %08x, want %08x", got, want)
	}
	for row := uint32(0); row < uint32(n); row++ {
		if r, ok := h.Lookup(ids(row), ids); !ok || r != row {
			return corrupt("index.hash", -1, "series %q (row %d) does not resolve", ids(row), row)
		}
	}
	return nil
}
