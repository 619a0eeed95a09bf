package format

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"unsafe"
)

// TestInlineIDs: a version 3 index.hash stores the ids of up to L bytes
// inside their records and the longer ones in index.arrow (L chosen from
// the ids); lookups, ID and Verify agree with the index for both kinds,
// ids of 1 and of MaxSeriesIDLen bytes included, and a lookup of a
// version 3 snapshot reads no index.arrow byte for an inline id.
func TestInlineIDs(t *testing.T) {
	tb := &Table{}
	for i := range 300 {
		id := fmt.Sprintf("S.%05d.D", i) // 9 bytes: inline
		switch {
		case i%50 == 7:
			id += "." + strings.Repeat("x", 40+i%13) // 51..63 bytes: out of line
		case i == 11:
			id = strings.Repeat("L", MaxSeriesIDLen)
		case i == 12:
			id = "z"
		}
		tb.Series = append(tb.Series, SeriesMeta{ID: id, Frequency: Daily})
		tb.Append(uint32(i), int64(i)*86400, float64(i))
	}
	dir, m := writeSnap(t, tb, WriteOptions{Version: 3})
	if m.Version != 3 {
		t.Fatalf("wrote version %d", m.Version)
	}
	if _, err := Verify(dir); err != nil {
		t.Fatal(err)
	}
	hb := readFile(t, dir, HashFile)
	L, stride := binary.LittleEndian.Uint32(hb[32:]), binary.LittleEndian.Uint32(hb[36:])
	if L != 16 || stride != 32 {
		t.Fatalf("inline %d stride %d, want 16 and 32 (ids of 9 bytes, 8 longer ones)", L, stride)
	}
	mb, db, x, d := openParts(t, dir, m)
	// index.arrow's bytes as the lookup sees them, with every id byte
	// zeroed: an inline id must still resolve, an out-of-line one not.
	ib := append([]byte(nil), mb...)
	for _, s := range x.BufferSpans(mb) {
		if id0 := x.ID(0); s.Lo <= int(offsetOf(t, mb, id0)) && int(offsetOf(t, mb, id0)) < s.Hi {
			clear(ib[s.Lo:s.Hi])
		}
	}
	h, err := OpenHot(3, hb, ib, db, x, d)
	if err != nil {
		t.Fatal(err)
	}
	for row := range uint32(x.N) {
		id := x.ID(row)
		r, ok := h.Lookup(id)
		if inline := len(id) <= int(L); ok != inline || (ok && r != row) {
			t.Fatalf("Lookup(%.20q) with index.arrow's ids zeroed = %d, %v; inline %v, row %d", id, r, ok, inline, row)
		}
		if got, ok := h.ID(row); !ok || (len(id) <= int(L) && got != id) {
			t.Fatalf("ID(%d) = %.20q, %v; want %.20q", row, got, ok, id)
		}
	}
	h, err = OpenHot(3, hb, mb, db, x, d)
	if err != nil {
		t.Fatal(err)
	}
	for row := range uint32(x.N) {
		id := x.ID(row)
		if r, ok := h.Lookup(id); !ok || r != row {
			t.Fatalf("Lookup(%.20q) = %d, %v; want row %d", id, r, ok, row)
		}
		if got, ok := h.ID(row); !ok || got != id {
			t.Fatalf("ID(%d) = %.20q, %v", row, got, ok)
		}
		for _, miss := range []string{id + "x", id[:len(id)-1]} {
			if r, ok := h.Lookup(miss); ok {
				t.Fatalf("Lookup(%.20q) = row %d", miss, r)
			}
		}
	}
	// A record's id bytes, offset or length changed (checksums fixed):
	// Verify finds it.
	long, short := -1, -1
	for row := range x.N {
		if len(x.ID(uint32(row))) > int(L) {
			long = row
		} else {
			short = row
		}
	}
	for _, c := range []struct {
		name string
		row  int
		at   uint64
	}{{"out-of-line offset", long, recordHead}, {"inline byte", short, recordHead + 3}, {"id length", long, 14}} {
		bad := copyDir(t, dir)
		rewriteHash(t, bad, func(b []byte, recAt uint64) { b[recAt+uint64(c.row)*uint64(stride)+c.at]++ })
		if _, err := Verify(bad); err == nil {
			t.Fatalf("%s: Verify passed", c.name)
		} else {
			wantCorruption(t, err, HashFile)
		}
	}
}

func offsetOf(t *testing.T, b []byte, s string) uint64 {
	at, ok := offsetIn(b, unsafe.Pointer(unsafe.StringData(s)))
	if !ok {
		t.Fatal("id outside index.arrow")
	}
	return at
}

// TestChooseInline: L is 16 (32-byte records) when all but 1% of the
// ids of at most 48 bytes fit in 16 bytes, else 48 (64-byte records);
// legacyInline is the smallest length that keeps them (at least 8), as
// version 3 writers chose it before.
func TestChooseInline(t *testing.T) {
	many := func(n, l int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = l
		}
		return out
	}
	for _, c := range []struct {
		lens         []int
		want, legacy uint32
	}{
		{nil, 16, minInline},
		{[]int{1, 2, 3}, 16, minInline},
		{[]int{9, 9, 9, 9}, 16, 9},
		{[]int{16, 16, 16}, 16, 16},
		{[]int{17, 17, 17}, 48, 17},
		{[]int{30, 30, 30, 1000}, 48, 30},           // the long one out of line
		{[]int{60, 60, 60}, 16, minInline},          // none fits: the smallest records
		{[]int{33, 33, 33, 38, 38}, 48, 38},         // fewer than 100 ids: all of them
		{append(many(200, 12), 40, 41), 16, 12},     // 2 of 202: the 1% out of line
		{append(many(200, 12), 40, 41, 42), 48, 40}, // 3 of 203: one more than 1%
		{[]int{48, 49}, 48, 48},
	} {
		ids := make([]string, len(c.lens))
		for i, l := range c.lens {
			ids[i] = strings.Repeat("a", l)
		}
		id := func(r uint32) string { return ids[r] }
		if got := chooseInline(id, len(ids)); got != c.want {
			t.Errorf("lengths %v: L %d, want %d", c.lens, got, c.want)
		}
		if got := legacyInline(id, len(ids)); got != c.legacy {
			t.Errorf("lengths %v: legacy L %d, want %d", c.lens, got, c.legacy)
		}
		if got := recordStride(chooseInline(id, len(ids))); got != 32 && got != 64 {
			t.Errorf("lengths %v: stride %d", c.lens, got)
		}
	}
}

// TestLegacyInlineStillOpens: a version 3 snapshot of a writer before
// 64-byte records (L the ids' smallest length, here 38: 56-byte records)
// still verifies, opens and looks up every id; an L that neither rule
// gives is refused by Verify.
func TestLegacyInlineStillOpens(t *testing.T) {
	tb := &Table{}
	for i := range 300 {
		id := fmt.Sprintf("DATASET.REGION-%03d.SERIES-%06d", i%7, i) // 32 bytes
		if i%40 == 3 {
			id += ".LONG6" // 38
		}
		tb.Series = append(tb.Series, SeriesMeta{ID: id, Frequency: Daily})
		tb.Append(uint32(i), int64(i)*86400, float64(i))
	}
	dir, m := writeSnap(t, tb, WriteOptions{Version: 3})
	if hb := readFile(t, dir, HashFile); binary.LittleEndian.Uint32(hb[32:]) != 48 || binary.LittleEndian.Uint32(hb[36:]) != 64 {
		t.Fatalf("this writer: inline %d stride %d, want 48 and 64", binary.LittleEndian.Uint32(hb[32:]), binary.LittleEndian.Uint32(hb[36:]))
	}
	// withInline rewrites dir's index.hash as a writer choosing L would
	// have written it (records rebuilt at its stride, checksums fixed).
	withInline := func(dir string, L uint32) {
		t.Helper()
		ib, db, x, d := openParts(t, dir, m)
		_, recs, err := buildHotTables(x, d, ib, db, L)
		if err != nil {
			t.Fatal(err)
		}
		old := readFile(t, dir, HashFile)
		log2, n, nb := binary.LittleEndian.Uint32(old[12:]), binary.LittleEndian.Uint32(old[16:]), binary.LittleEndian.Uint32(old[24:])
		slotAt, recAt, size := hotLayout(uint64(log2), uint64(n), uint64(nb), uint64(recordStride(L)))
		b := make([]byte, size)
		copy(b, old[:slotAt+8<<log2])
		copy(b[recAt:], recs)
		binary.LittleEndian.PutUint32(b[32:], L)
		binary.LittleEndian.PutUint32(b[36:], recordStride(L))
		binary.LittleEndian.PutUint32(b[28:], hotCRC(b, slotAt, recAt))
		binary.LittleEndian.PutUint32(b[60:], crc32.Checksum(b[:60], castagnoli))
		putHash(t, dir, b)
	}
	legacy := copyDir(t, dir)
	withInline(legacy, 38)
	if _, err := Verify(legacy); err != nil {
		t.Fatalf("a 56-byte-record snapshot: %v", err)
	}
	h, x := openHotOver(t, legacy, m, readFile(t, legacy, HashFile))
	if h.stride != 56 || h.inline != 38 {
		t.Fatalf("opened stride %d inline %d, want 56 and 38", h.stride, h.inline)
	}
	for row := range uint32(x.N) {
		if r, ok := h.Lookup(x.ID(row)); !ok || r != row {
			t.Fatalf("Lookup(%q) = %d, %v; want row %d", x.ID(row), r, ok, row)
		}
	}
	neither := copyDir(t, dir)
	withInline(neither, 30)
	if _, err := Verify(neither); err == nil {
		t.Fatal("Verify passed an inline length that no writer chooses for these ids")
	} else {
		wantCorruption(t, err, HashFile)
	}
}
