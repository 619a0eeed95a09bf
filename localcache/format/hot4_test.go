package format

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/energyscope/energyscope/localcache/internal/mmap"
)

// openParts maps index.arrow and data.arrow of a snapshot directory and
// opens them (closed at the end of the test).
func openParts(t *testing.T, dir string, m *Manifest) (ib, db []byte, x *Index, d *Data) {
	t.Helper()
	xf, err := mmap.Open(filepath.Join(dir, IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { xf.Close() })
	df, err := mmap.Open(filepath.Join(dir, DataFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { df.Close() })
	if x, err = OpenIndex(xf.Bytes, m.PeriodType, m.Series); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	if d, err = OpenData(df.Bytes, m.PeriodType, m.Batches); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return xf.Bytes, df.Bytes, x, d
}

// openHotOver opens the hot tables of a snapshot directory over hb (its
// index.hash, possibly damaged or rewritten), without Verify.
func openHotOver(t *testing.T, dir string, m *Manifest, hb []byte) (*HotIndex, *Index) {
	t.Helper()
	ib, db, x, d := openParts(t, dir, m)
	h, err := OpenHot(m.Version, aligned(hb), ib, db, x, d)
	if err != nil {
		t.Fatal(err)
	}
	return h, x
}

// v4Table has n daily series with ids of 1 to MaxSeriesIDLen bytes (most
// inline, every 37th longer than 40 bytes: in index.arrow; every 37th of
// 35 to 41 bytes: around the inline lengths of versions 4 and 5).
func v4Table(n int) *Table {
	tb := &Table{}
	for i := range n {
		id := fmt.Sprintf("S%d", i)
		switch {
		case i%37 == 5:
			id += "." + strings.Repeat("x", 40+i%50)
		case i%37 == 6:
			id += "." + strings.Repeat("y", 35+i%7-len(id)-1)
		case i == 11:
			id = strings.Repeat("L", MaxSeriesIDLen)
		case i == 12:
			id = "z"
		}
		tb.Series = append(tb.Series, SeriesMeta{ID: id, Frequency: Daily})
		tb.Append(uint32(i), int64(i)*86400, float64(i))
		tb.Append(uint32(i), int64(i+1)*86400, float64(i)+0.5)
	}
	return tb
}

// TestV4Lookups: format versions 4 and 5 find every id, inline or not,
// at the record whose row is its row; Rec and Row are inverse; misses
// miss; the records are in bucket order with about four (version 4) or
// sixteen (version 5) a bucket; Verify
// passes.
func TestV4Lookups(t *testing.T) {
	for _, version := range []int{4, 5} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) { hashOrderLookups(t, version) })
	}
}

func hashOrderLookups(t *testing.T, version int) {
	tb := v4Table(5000)
	dir, m := writeSnap(t, tb, WriteOptions{Version: version})
	if m.Version != version {
		t.Fatalf("wrote version %d", m.Version)
	}
	if _, err := Verify(dir); err != nil {
		t.Fatal(err)
	}
	hb := readFile(t, dir, HashFile)
	h, x := openHotOver(t, dir, m, hb)
	// About four series a bucket in version 4, sixteen in version 5 (a
	// directory of at most 64 KiB).
	per := map[int]int{4: 4, 5: 16}[version]
	if k := binary.LittleEndian.Uint32(hb[12:]); k != bucketLog2(version, 5000) || 1<<k < 5000/per/2 || 1<<k > 5000/per*2 {
		t.Fatalf("2^%d buckets for 5000 series", k)
	}
	prev := uint64(0)
	for rec := range uint32(x.N) {
		row, ok := h.Row(rec)
		if !ok {
			t.Fatalf("record %d names no row", rec)
		}
		if b := HashID(x.ID(row)) >> h.shift; b < prev {
			t.Fatalf("record %d (bucket %d) after bucket %d", rec, b, prev)
		} else {
			prev = b
		}
	}
	for row := range uint32(x.N) {
		id := x.ID(row)
		rec, ok := h.Find(id)
		if !ok {
			t.Fatalf("Find(%.20q) missed", id)
		}
		if r, ok := h.Row(rec); !ok || r != row {
			t.Fatalf("Find(%.20q) = record %d of row %d, want row %d", id, rec, r, row)
		}
		if r, ok := h.Rec(row); !ok || r != rec {
			t.Fatalf("Rec(%d) = %d, %v; want %d", row, r, ok, rec)
		}
		if r, ok := h.Lookup(id); !ok || r != row {
			t.Fatalf("Lookup(%.20q) = %d, %v", id, r, ok)
		}
		if got, ok := h.ID(row); !ok || got != id {
			t.Fatalf("ID(%d) = %.20q, %v", row, got, ok)
		}
		days, vals, _, ok := h.HotRangeDays(rec, math.MinInt32, math.MaxInt32)
		wd, wv, _, wok := h.HotDays(row)
		if !ok || !wok || len(days) != 2 || &days[0] != &wd[0] || &vals[0] != &wv[0] || vals[1] != vals[0]+0.5 {
			t.Fatalf("HotRangeDays(record of row %d) = %v %v %v, HotDays %v %v", row, days, vals, ok, wd, wv)
		}
		for _, miss := range []string{id + "?", "?" + id, id[:len(id)-1] + "?"} { // no id has a '?'
			if _, ok := h.Find(miss); ok {
				t.Fatalf("Find(%.20q) found a record", miss)
			}
		}
	}
}

// TestV4DamageServesSafely: a version 4 index.hash damaged past its
// checksums (as a disk could, before the scrub sees it) is served without
// a fault or a row out of range: a directory entry beyond the records
// finds nothing in its bucket, a row table entry naming another record
// makes that row's lookups and Record refuse, a record naming a row out
// of range is found by Find but named by no Lookup.
func TestV4DamageServesSafely(t *testing.T) {
	for _, version := range []int{4, 5} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) { hashOrderDamage(t, version) })
	}
}

func hashOrderDamage(t *testing.T, version int) {
	tb := v4Table(400)
	dir, m := writeSnap(t, tb, WriteOptions{Version: version})
	orig := readFile(t, dir, HashFile)
	k, n := binary.LittleEndian.Uint32(orig[12:]), binary.LittleEndian.Uint32(orig[16:])
	dirAt, posAt, recAt, _ := hotLayout4(uint64(k), uint64(n), uint64(binary.LittleEndian.Uint32(orig[24:])))
	h0, x := openHotOver(t, dir, m, orig)
	const victim = 7 // a row whose record the cases damage
	vrec, _ := h0.Rec(victim)
	vid := x.ID(victim)
	bucket := HashID(vid) >> h0.shift

	t.Run("directory beyond the records", func(t *testing.T) {
		b := append([]byte(nil), orig...)
		binary.LittleEndian.PutUint32(b[dirAt+4*(bucket+1):], n+1000)
		h, _ := openHotOver(t, dir, m, b)
		if _, ok := h.Find(vid); ok {
			t.Fatal("found an id through a directory entry beyond the records")
		}
		for row := range uint32(n) {
			if r, ok := h.Lookup(x.ID(row)); ok && r != row {
				t.Fatalf("Lookup(%.20q) = row %d, want %d or nothing", x.ID(row), r, row)
			}
		}
	})
	t.Run("row table names another record", func(t *testing.T) {
		b := append([]byte(nil), orig...)
		binary.LittleEndian.PutUint32(b[posAt+4*victim:], (vrec+1)%n)
		h, _ := openHotOver(t, dir, m, b)
		if r, ok := h.Lookup(vid); ok {
			t.Fatalf("Lookup of the damaged row's id = %d", r)
		}
		if _, ok := h.Record(victim); ok {
			t.Fatal("Record of a row whose table entry names another record")
		}
		if _, ok := h.ID(victim); ok {
			t.Fatal("ID of a row whose table entry names another record")
		}
		if _, ok := h.Rec(victim); ok {
			t.Fatal("Rec of a row whose table entry names another record")
		}
	})
	t.Run("record names a row out of range", func(t *testing.T) {
		b := append([]byte(nil), orig...)
		binary.LittleEndian.PutUint32(b[recAt+v4Stride*uint64(vrec)+v4RowAt:], n+5)
		h, _ := openHotOver(t, dir, m, b)
		rec, ok := h.Find(vid)
		if !ok || rec != vrec {
			t.Fatalf("Find = %d, %v; want the record %d", rec, ok, vrec)
		}
		if r, ok := h.Row(rec); ok {
			t.Fatalf("Row of a record naming row %d = %d", n+5, r)
		}
		if r, ok := h.Lookup(vid); ok {
			t.Fatalf("Lookup = row %d", r)
		}
	})
}

// recordBounds is the first and last period of record rec of a version 5
// index.hash, as the lookup reads them (ok false: noBounds).
func recordBounds(h *HotIndex, rec uint32) (first, last int64, ok bool) {
	rb := h.recs[uint64(rec)*v4Stride:][:v4Stride]
	f, l := binary.LittleEndian.Uint32(rb[v5FirstAt:]), binary.LittleEndian.Uint32(rb[v5LastAt:])
	if f == noBounds {
		return 0, 0, false
	}
	return h.base + int64(f), h.base + int64(l), true
}

// TestV5Bounds: a version 5 record holds its series' first and last
// period counted from the header's base (the smallest first period), or
// noBounds for an empty or cold series and for one whose periods lie more
// than 2^32-2 from the base (seconds 136 years apart); every lookup then
// gives exactly sort.Search's range, whether it took the bounds from the
// record or read them from the points.
func TestV5Bounds(t *testing.T) {
	for _, hourly := range []bool{false, true} {
		t.Run(fmt.Sprintf("timestamps=%v", hourly), func(t *testing.T) {
			tb := goldenTable(hourly)
			far := "none"
			if hourly {
				// Seconds beyond the 32 bits from the base: this series
				// keeps its bounds in data.arrow.
				far = "far.future"
				tb.Series = append(tb.Series, SeriesMeta{ID: far, Frequency: Hourly})
				for i := range 3 {
					tb.Append(uint32(len(tb.Series)-1), ts("2001-01-01T00:00:00Z")+(1<<32)+int64(i)*3600, float64(i))
				}
			}
			o := WriteOptions{Version: 5, BatchRows: 16, Tail: TailList(tb.Series[2].ID)}
			dir, m := writeSnap(t, tb, o)
			if _, err := Verify(dir); err != nil {
				t.Fatal(err)
			}
			hb := readFile(t, dir, HashFile)
			h, x := openHotOver(t, dir, m, hb)
			if !h.bounds {
				t.Fatal("a version 5 index opened without the records' bounds")
			}
			minFirst := int64(math.MaxInt64)
			for row := range uint32(x.N) {
				rec, _ := h.Rec(row)
				first, last, ok := recordBounds(h, rec)
				r, _ := h.Record(row)
				days, secs, _, err := h.Slice(r)
				var ps []int64
				for _, d := range days {
					ps = append(ps, int64(d))
				}
				ps = append(ps, secs...)
				switch {
				case err != nil || r.Tier != Hot || len(ps) == 0 || x.ID(row) == far:
					if ok {
						t.Fatalf("row %d (%s, tier %d, %d points): bounds %d..%d, want none", row, x.ID(row), r.Tier, len(ps), first, last)
					}
				case !ok || first != ps[0] || last != ps[len(ps)-1]:
					t.Fatalf("row %d (%s): bounds %d..%d (%v), the points run %d..%d", row, x.ID(row), first, last, ok, ps[0], ps[len(ps)-1])
				}
				if len(ps) > 0 && r.Tier == Hot && x.ID(row) != far {
					minFirst = min(minFirst, ps[0])
				}
				if r.Tier == Hot && len(ps) > 0 {
					checkHotRange(t, h, row, true, r.Frequency(), days, secs, func() []float64 { _, _, v, _ := h.Slice(r); return v }())
				}
			}
			if h.base != minFirst || int64(binary.LittleEndian.Uint64(hb[32:])) != minFirst {
				t.Fatalf("base %d, the smallest first period is %d", h.base, minFirst)
			}
		})
	}
}

// TestV5DamagedBoundsServeSafely: a version 5 record whose bounds are
// wrong (damage past the checksums, before the scrub sees it) gives a
// part of its own series' points, never a fault or points outside it;
// Verify names the record.
func TestV5DamagedBoundsServeSafely(t *testing.T) {
	tb := v4Table(300)
	for i := range 300 { // long enough series to search (more than shortSeries points)
		for k := range 100 {
			tb.Append(uint32(i), int64(i+2+k)*86400, float64(k))
		}
	}
	dir, m := writeSnap(t, tb, WriteOptions{Version: 5})
	orig := readFile(t, dir, HashFile)
	_, x := openHotOver(t, dir, m, orig)
	k, n := binary.LittleEndian.Uint32(orig[12:]), binary.LittleEndian.Uint32(orig[16:])
	_, _, recAt, _ := hotLayout4(uint64(k), uint64(n), uint64(binary.LittleEndian.Uint32(orig[24:])))
	for _, bounds := range [][2]uint32{{0, 0}, {1 << 31, 5}, {7, noBounds - 1}, {0, noBounds}, {noBounds, 3}, {200, 100}} {
		b := append([]byte(nil), orig...)
		for rec := range uint64(n) {
			binary.LittleEndian.PutUint32(b[recAt+v4Stride*rec+v5FirstAt:], bounds[0])
			binary.LittleEndian.PutUint32(b[recAt+v4Stride*rec+v5LastAt:], bounds[1])
		}
		h, _ := openHotOver(t, dir, m, b)
		for row := range uint32(x.N) {
			rec, ok := h.Rec(row)
			r, _ := h.Record(row)
			all, _, vals, err := h.Slice(r)
			if !ok || err != nil {
				t.Fatalf("row %d: %v %v", row, ok, err)
			}
			for _, q := range [][2]int64{{math.MinInt32, math.MaxInt32}, {int64(all[0]), int64(all[0])}, {int64(all[len(all)/2]), int64(all[len(all)-1]) - 3}} {
				days, got, _, ok := h.HotRangeDays(rec, q[0], q[1])
				if !ok || len(days) != len(got) {
					t.Fatalf("row %d bounds %v: HotRangeDays %v, %d days %d values", row, bounds, ok, len(days), len(got))
				}
				if len(got) > 0 {
					lo := (uintptr(unsafe.Pointer(&got[0])) - uintptr(unsafe.Pointer(&vals[0]))) / 8
					if uintptr(unsafe.Pointer(&got[0])) < uintptr(unsafe.Pointer(&vals[0])) || int(lo)+len(got) > len(vals) || &days[0] != &all[lo] {
						t.Fatalf("row %d bounds %v: %d points outside the series' %d", row, bounds, len(got), len(vals))
					}
				}
			}
		}
		if bounds == [2]uint32{0, 0} {
			d2 := copyDir(t, dir)
			rewriteHash4(t, d2, func(hb []byte, _, _, _ uint64) { copy(hb, b) })
			_, err := Verify(d2)
			var ce *CorruptionError
			if !errors.As(err, &ce) || ce.File != HashFile || !strings.Contains(err.Error(), "first or last period") {
				t.Fatalf("Verify of records with wrong bounds: %v", err)
			}
		}
	}
}

// TestBucketLog2: version 5 has about sixteen series a bucket while the
// directory holds at most 2^14 entries, about eight beyond; version 4
// about four; never fewer than 16 buckets.
func TestBucketLog2(t *testing.T) {
	for _, c := range []struct {
		version, n int
		want       uint32
	}{
		{4, 0, 4}, {5, 0, 4}, {4, 100, 5}, {5, 100, 4},
		{4, 175_000, 16}, {5, 175_000, 14}, // pet: 64 KiB against 256 KiB
		{5, 1<<18 - 1, 14}, {5, 1 << 18, 16}, // the step to eight a bucket
		{4, 2_820_000, 20}, {5, 2_820_000, 19}, // full: 2 MiB against 4 MiB
	} {
		if got := bucketLog2(c.version, c.n); got != c.want {
			t.Errorf("bucketLog2(%d, %d) = %d, want %d", c.version, c.n, got, c.want)
		}
	}
}
