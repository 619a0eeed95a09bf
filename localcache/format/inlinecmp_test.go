package format

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
)

// TestLookupComparesEveryIDByte: Lookup compares an inline id of 8 bytes
// or more a word at a time (the last word overlapping): with any one byte
// of a record's id changed, the id is not found (its slot's tag still
// matches, so this is the compare's answer), and with the bytes restored
// it is, for ids of every length from 1 to 48.
func TestLookupComparesEveryIDByte(t *testing.T) {
	tb := &Table{}
	for n := 1; n <= 48; n++ {
		id := fmt.Sprintf("%02d", n) + strings.Repeat("abcdefghij", 5)[:max(n-2, 0)]
		id = id[:n]
		tb.Series = append(tb.Series, SeriesMeta{ID: id, Frequency: Daily})
		tb.Append(uint32(n-1), int64(n)*86400, float64(n))
	}
	dir, m := writeSnap(t, tb, WriteOptions{Version: 3})
	hb := readFile(t, dir, HashFile)
	if L := binary.LittleEndian.Uint32(hb[32:]); L != 48 {
		t.Fatalf("inline %d, want 48", L)
	}
	mb, db, x, d := openParts(t, dir, m)
	log2, n, nb := binary.LittleEndian.Uint32(hb[12:]), binary.LittleEndian.Uint32(hb[16:]), binary.LittleEndian.Uint32(hb[24:])
	stride := uint64(binary.LittleEndian.Uint32(hb[36:]))
	slotAt, recAt, _ := hotLayout(uint64(log2), uint64(n), uint64(nb), stride)
	open := func(b []byte) *HotIndex {
		t.Helper()
		binary.LittleEndian.PutUint32(b[28:], hotCRC(b, slotAt, recAt))
		binary.LittleEndian.PutUint32(b[60:], crc32.Checksum(b[:60], castagnoli))
		h, err := OpenHot(3, b, mb, db, x, d)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for row := range uint32(x.N) {
		id := x.ID(row)
		for k := range len(id) {
			b := append([]byte(nil), hb...)
			b[recAt+uint64(row)*stride+recordHead+uint64(k)] ^= 0x20
			if r, ok := open(b).Lookup(id); ok {
				t.Fatalf("id %q with its record's byte %d changed: Lookup = row %d", id, k, r)
			}
		}
		if r, ok := open(append([]byte(nil), hb...)).Lookup(id); !ok || r != row {
			t.Fatalf("Lookup(%q) = %d, %v; want row %d", id, r, ok, row)
		}
	}
}
