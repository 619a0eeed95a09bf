package format

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/energyscope/energyscope/localcache/internal/mmap"
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
	dir, m := writeSnap(t, tb, WriteOptions{})
	if m.Version != 3 {
		t.Fatalf("wrote version %d", m.Version)
	}
	if _, err := Verify(dir); err != nil {
		t.Fatal(err)
	}
	hb := readFile(t, dir, HashFile)
	L, stride := binary.LittleEndian.Uint32(hb[32:]), binary.LittleEndian.Uint32(hb[36:])
	if L != 9 || stride != 32 {
		t.Fatalf("inline %d stride %d, want 9 and 32 (ids of 9 bytes, 8 longer ones)", L, stride)
	}
	xf, err := mmap.Open(filepath.Join(dir, IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	defer xf.Close()
	df, err := mmap.Open(filepath.Join(dir, DataFile))
	if err != nil {
		t.Fatal(err)
	}
	defer df.Close()
	x, err := OpenIndex(xf.Bytes, m.PeriodType, m.Series)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	d, err := OpenData(df.Bytes, m.PeriodType, m.Batches)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// index.arrow's bytes as the lookup sees them, with every id byte
	// zeroed: an inline id must still resolve, an out-of-line one not.
	ib := append([]byte(nil), xf.Bytes...)
	for _, s := range x.BufferSpans(xf.Bytes) {
		if id0 := x.ID(0); s.Lo <= int(offsetOf(t, xf.Bytes, id0)) && int(offsetOf(t, xf.Bytes, id0)) < s.Hi {
			clear(ib[s.Lo:s.Hi])
		}
	}
	h, err := OpenHot(3, hb, ib, df.Bytes, x, d)
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
	h, err = OpenHot(3, hb, xf.Bytes, df.Bytes, x, d)
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

// TestChooseInline: L keeps all but 1% of the ids of at most 48 bytes
// inside their records, within 8..48.
func TestChooseInline(t *testing.T) {
	many := func(n, l int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = l
		}
		return out
	}
	for _, c := range []struct {
		lens []int
		want uint32
	}{
		{nil, minInline},
		{[]int{1, 2, 3}, minInline},
		{[]int{9, 9, 9, 9}, 9},
		{[]int{30, 30, 30, 1000}, 30},           // the long one out of line
		{[]int{60, 60, 60}, minInline},          // none fits: the smallest records
		{[]int{33, 33, 33, 38, 38}, 38},         // fewer than 100 ids: all of them
		{append(many(200, 20), 40, 41), 20},     // 2 of 202: the 1% out of line
		{append(many(200, 20), 40, 41, 42), 40}, // 3 of 203: one more than 1%
		{[]int{48, 49}, 48},
	} {
		ids := make([]string, len(c.lens))
		for i, l := range c.lens {
			ids[i] = strings.Repeat("a", l)
		}
		if got := chooseInline(func(r uint32) string { return ids[r] }, len(ids)); got != c.want {
			t.Errorf("lengths %v: L %d, want %d", c.lens, got, c.want)
		}
	}
}
