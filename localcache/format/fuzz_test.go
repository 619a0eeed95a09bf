package format

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// fuzzSnap is a real written snapshot used as seed corpus and, for the
// decoders that need context (period type, counts, the ids), as that
// context.
type fuzzSnap struct {
	m                     *Manifest
	manifest, data, index []byte
	hash                  []byte
	ids                   []string
}

var (
	fuzzOnce  sync.Once
	fuzzSnaps []fuzzSnap
)

// fuzzSnapshots cooks a handful of different snapshots once per process:
// date32 and timestamp, one and several batches, no series, a series
// without rows.
func fuzzSnapshots(f testing.TB) []fuzzSnap {
	fuzzOnce.Do(func() {
		rng := rand.New(rand.NewPCG(11, 0))
		empty := &Table{}
		noRows := &Table{Series: []SeriesMeta{{ID: "a", Name: "nothing"}, {ID: "b"}}}
		noRows.Append(1, 0, 1)
		for _, c := range []struct {
			tb      *Table
			batch   int
			version int // 0: FormatVersion
		}{
			{goldenTable(false), 0, 0},
			{goldenTable(true), 16, 0},
			{randomTable(rng, 30, 12, false), 20, 0},
			{empty, 0, 0},
			{noRows, 0, 0},
			{goldenTable(false), 0, 2},
			{goldenTable(false), 0, 3},
			{randomTable(rng, 30, 12, false), 20, 3},
			{goldenTable(false), 0, 4},
			{randomTable(rng, 30, 12, false), 20, 4},
		} {
			dir, m := writeSnap(f, c.tb, WriteOptions{BatchRows: c.batch, Version: c.version})
			s := fuzzSnap{
				m:        m,
				manifest: readFile(f, dir, ManifestFile),
				data:     readFile(f, dir, DataFile),
				index:    readFile(f, dir, IndexFile),
				hash:     readFile(f, dir, HashFile),
			}
			x, err := OpenIndex(aligned(s.index), m.PeriodType, m.Series)
			if err != nil {
				f.Fatal(err)
			}
			for r := uint32(0); r < uint32(x.N); r++ {
				s.ids = append(s.ids, x.ID(r)+"") // copy: the bytes go away
			}
			x.Close()
			fuzzSnaps = append(fuzzSnaps, s)
		}
	})
	return fuzzSnaps
}

// pick chooses the context snapshot for a fuzz input.
func pick(snaps []fuzzSnap, which uint8) fuzzSnap { return snaps[int(which)%len(snaps)] }

func isCorruption(t *testing.T, err error) {
	t.Helper()
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *CorruptionError", err, err)
	}
}

func FuzzParseManifest(f *testing.F) {
	for _, s := range fuzzSnapshots(f) {
		f.Add(s.manifest)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"format":"energyscope-snapshot","version":1,"files":[{"name":"data.arrow","size":-1}]}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"format":"energyscope-snapshot","Version":5,"extra":[1,{"a":null}],"dataset":"a\u0062"}`))
	f.Add([]byte(`{"rows":-0,"epoch":18446744073709551615,"series":-9223372036854775808,"files":[{},{"chunks":[]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		// The fast decoder says yes only where encoding/json makes the
		// same Manifest of b.
		if fast, ok := parseManifestFast(b); ok {
			var slow Manifest
			if err := json.Unmarshal(b, &slow); err != nil {
				t.Fatalf("parseManifestFast accepted what encoding/json refuses (%v): %q", err, b)
			}
			if !reflect.DeepEqual(fast, slow) {
				t.Fatalf("parseManifestFast and encoding/json disagree on %q:\n%+v\n%+v", b, fast, slow)
			}
		}
		m, err := ParseManifest(b)
		if err != nil {
			isCorruption(t, err)
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("ParseManifest accepted a manifest Validate refuses: %v", err)
		}
		for _, name := range []string{DataFile, IndexFile, HashFile} {
			if m.File(name) == nil {
				t.Fatalf("accepted manifest lists no %s", name)
			}
		}
		// What was accepted survives a round trip unchanged.
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := ParseManifest(out)
		if err != nil {
			t.Fatalf("re-encoded manifest refused: %v", err)
		}
		if !reflect.DeepEqual(m.Files, m2.Files) || m.SnapshotID != m2.SnapshotID || m.Rows != m2.Rows {
			t.Fatalf("round trip changed the manifest: %+v -> %+v", m, m2)
		}
	})
}

// exerciseIndex reads every field of every row, as Info and Lookup do.
func exerciseIndex(x *Index) {
	for r := uint32(0); r < uint32(x.N); r++ {
		_ = x.ID(r) + x.Name(r) + x.Unit(r) + x.Source(r) + string(x.Frequency(r))
		_, _ = x.First(r), x.Last(r)
		_, _, _, _, _ = x.Batch[r], x.Offset[r], x.Length[r], x.Latest[r], x.Tier[r]
	}
}

func FuzzOpenIndex(f *testing.F) {
	snaps := fuzzSnapshots(f)
	for i, s := range snaps {
		f.Add(s.index, uint8(i))
	}
	f.Fuzz(func(t *testing.T, b []byte, which uint8) {
		s := pick(snaps, which)
		b = aligned(b) // lives until the end of this function, past x.Close
		x, err := OpenIndex(b, s.m.PeriodType, s.m.Series)
		if err != nil {
			isCorruption(t, err)
			return
		}
		defer x.Close()
		if x.N != s.m.Series {
			t.Fatalf("index has %d rows, asked for %d", x.N, s.m.Series)
		}
		exerciseIndex(x)
		// The real hash table over a mutated index: lookups must stay safe
		// and never return a row whose id differs.
		h, err := OpenHash(aligned(s.hash), s.m.Series)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range s.ids {
			if r, ok := h.Lookup(id, x.ID); ok && x.ID(r) != id {
				t.Fatalf("Lookup(%q) = row %d holding %q", id, r, x.ID(r))
			}
		}
	})
}

func FuzzOpenHash(f *testing.F) {
	snaps := fuzzSnapshots(f)
	for i, s := range snaps {
		f.Add(s.hash, uint8(i))
	}
	f.Fuzz(func(t *testing.T, b []byte, which uint8) {
		s := pick(snaps, which)
		b = aligned(b)
		h, err := OpenHash(b, s.m.Series)
		if err != nil {
			isCorruption(t, err)
			return
		}
		idAt := func(r uint32) string {
			if int(r) >= len(s.ids) {
				t.Fatalf("Lookup asked for row %d of %d", r, len(s.ids))
			}
			return s.ids[r]
		}
		for _, id := range append(s.ids, "", "missing", "PET.RWTC.D\x00") {
			if r, ok := h.Lookup(id, idAt); ok && s.ids[r] != id {
				t.Fatalf("Lookup(%q) = row %d holding %q", id, r, s.ids[r])
			}
		}
		// Verify's check of the slot table must not panic either.
		_ = verifyHash(b, idAt, s.m.Series)
	})
}

func FuzzOpenData(f *testing.F) {
	snaps := fuzzSnapshots(f)
	for i, s := range snaps {
		f.Add(s.data, uint8(i))
	}
	f.Fuzz(func(t *testing.T, b []byte, which uint8) {
		s := pick(snaps, which)
		b = aligned(b)
		d, err := OpenData(b, s.m.PeriodType, s.m.Batches)
		if err != nil {
			isCorruption(t, err)
			return
		}
		defer d.Close()
		for i := range d.NumBatches {
			bt, err := d.Batch(i)
			if err != nil {
				isCorruption(t, err)
				continue
			}
			n := bt.Len()
			oneKind := (bt.Days == nil) != (bt.Secs == nil)
			if len(bt.Series) != n || len(bt.Days)+len(bt.Secs) != n || (n > 0 && !oneKind) {
				t.Fatalf("batch %d: columns of %d, %d, %d, %d rows", i, len(bt.Series), len(bt.Days), len(bt.Secs), n)
			}
			for k := range n {
				_, _ = bt.Series[k], bt.Values[k]
			}
		}
		// Every series of the real index over the mutated data, the way
		// snapshot.Get slices it.
		x, err := OpenIndex(aligned(s.index), s.m.PeriodType, s.m.Series)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		for r := range uint32(x.N) {
			if x.Length[r] == 0 {
				continue
			}
			bt, err := d.Batch(int(x.Batch[r]))
			if err != nil {
				continue
			}
			off, n := x.Offset[r], x.Length[r]
			if bt.Check(off, n) != nil {
				continue
			}
			if bt.Secs != nil {
				_ = bt.Secs[off : off+n]
			} else {
				_ = bt.Days[off : off+n]
			}
			_ = bt.Values[off : off+n]
		}
	})
}

// FuzzOpenHot: a damaged index.hash (versions 2 and 3: slots, batch
// table, records with or without the ids; versions 4 and 5: directory,
// row table, records in hash order, version 5's with each series' first
// and last period) over the real index.arrow and data.arrow. Open refuses it with a
// CorruptionError or serves it; serving never panics, never returns a row
// that does not exist, and never slices points outside data.arrow (a
// damaged record may misdirect a lookup to another row, as damaged data
// gives wrong values: the scrub's chunk hashes and Verify catch both). Each
// input is offered as every version (version 1: records built at open;
// versions 2 to 5 refuse each other's files by the version field).
var fuzzSink float64

func FuzzOpenHot(f *testing.F) {
	snaps := fuzzSnapshots(f)
	for i, s := range snaps {
		f.Add(s.hash, uint8(i))
	}
	f.Fuzz(func(t *testing.T, b []byte, which uint8) {
		s := pick(snaps, which)
		ib, db := aligned(s.index), aligned(s.data)
		x, err := OpenIndex(ib, s.m.PeriodType, s.m.Series)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		d, err := OpenData(db, s.m.PeriodType, s.m.Batches)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		b = aligned(b)
		for _, version := range []int{1, 2, 3, 4, 5} {
			h, err := OpenHot(version, b, ib, db, x, d)
			if err != nil {
				isCorruption(t, err)
				continue
			}
			for _, id := range append(s.ids, "", "missing", "PET.RWTC.D\x00") {
				if rec, ok := h.Find(id); ok {
					// Find's record is in range and names a row.
					if int(rec) >= x.N {
						t.Fatalf("Find(%q) = record %d of %d", id, rec, x.N)
					}
					if row, ok := h.Row(rec); ok && int(row) >= x.N {
						t.Fatalf("Find(%q): record %d names row %d of %d", id, rec, row, x.N)
					}
				}
				if r, ok := h.Lookup(id); ok && int(r) >= x.N {
					t.Fatalf("Lookup(%q) = row %d of %d", id, r, x.N)
				} else if got, idOK := h.ID(r); ok && (!idOK || got != id) {
					// The id a lookup compared is the id the row names.
					t.Fatalf("Lookup(%q) = row %d, whose id is %q (%v)", id, r, got, idOK)
				}
			}
			for row := uint32(0); row <= uint32(x.N); row++ {
				_, _ = h.ID(row) // in bounds of the records or index.arrow, or this faults
				hd, hv, hf, hok := h.HotDays(row)
				hs, hv2, hf2, hok2 := h.HotSecs(row)
				if hok && hok2 {
					t.Fatalf("row %d: both HotDays and HotSecs answer", row)
				}
				if hok2 {
					hv, hf, hok = hv2, hf2, true
				}
				rec, ok := h.Record(row)
				if !ok {
					if hok {
						t.Fatalf("row %d: HotDays/HotSecs answer a row Record does not have", row)
					}
					continue
				}
				_ = rec.Frequency()
				if rec.Tier != Hot {
					if hok {
						t.Fatalf("row %d: HotDays/HotSecs answer a cold series", row)
					}
					continue
				}
				days, secs, vals, err := h.Slice(rec)
				if err != nil {
					isCorruption(t, err)
					if hok {
						t.Fatalf("row %d: HotDays/HotSecs answer a record Slice refuses (%v)", row, err)
					}
					continue
				}
				// HotDays/HotSecs are Record + Slice in one call: the same
				// points, or declined (an empty series).
				if hok != (len(vals) > 0) || (hok && hf != rec.Frequency()) || len(hv) != len(vals) || len(hd) != len(days) || len(hs) != len(secs) ||
					(len(vals) > 0 && (&hv[0] != &vals[0] || (len(days) > 0 && &hd[0] != &days[0]) || (len(secs) > 0 && &hs[0] != &secs[0]))) {
					t.Fatalf("row %d: HotDays/HotSecs (%v, %d/%d/%d, %s) differs from Record + Slice (%d/%d/%d, %s)", row, hok, len(hd), len(hs), len(hv), hf, len(days), len(secs), len(vals), rec.Frequency())
				}
				if len(vals) != int(rec.Length) || len(days)+len(secs) != int(rec.Length) {
					t.Fatalf("row %d: slices of %d/%d/%d for %d rows", row, len(days), len(secs), len(vals), rec.Length)
				}
				checkHotRange(t, h, row, hok, hf, days, secs, vals)
				for i := range vals { // in bounds of data.arrow or this faults
					fuzzSink += vals[i]
				}
			}
			_ = verifyHot(b, ib, db, x, d)
		}
	})
}

// boundsMatch reports whether record rec's first and last period, when
// it holds them (version 5), are those of its points ps.
func boundsMatch(h *HotIndex, rec uint32, ps []int64) bool {
	if !h.bounds || rec >= h.n || len(ps) == 0 {
		return true
	}
	first, last, ok := recordBounds(h, rec)
	return !ok || first == ps[0] && last == ps[len(ps)-1]
}

// checkHotRange checks HotRangeDays/HotRangeSecs of row against Slice's
// days/secs/vals narrowed by sort.Search (the same probes as theirs, so
// the same answer on unsorted periods too): the same points of the
// mapping, nil for an empty range, declined exactly when HotDays/HotSecs
// decline (hok).
func checkHotRange(t *testing.T, h *HotIndex, row uint32, hok bool, hf Frequency, days []int32, secs []int64, vals []float64) {
	t.Helper()
	rec, ok := h.Rec(row)
	if !ok {
		rec = math.MaxUint32
	}
	var ps []int64
	for _, d := range days {
		ps = append(ps, int64(d))
	}
	ps = append(ps, secs...)
	bounds := [][2]int64{{math.MinInt64, math.MaxInt64}, {0, -1}}
	if n := len(ps); n > 0 {
		bounds = append(bounds, [2]int64{ps[0], ps[n-1]}, [2]int64{ps[n/2], ps[n/2]}, [2]int64{ps[n/2] + 1, math.MaxInt64}, [2]int64{math.MinInt64, ps[n/2] - 1})
	}
	for _, b := range bounds {
		from, to := b[0], b[1]
		var rd []int32
		var rs []int64
		var rv []float64
		var rf Frequency
		var rok bool
		if days != nil || (secs == nil && !h.secs) {
			from, to = max(from, math.MinInt32), min(to, math.MaxInt32)
			rd, rv, rf, rok = h.HotRangeDays(rec, from, to)
		} else {
			rs, rv, rf, rok = h.HotRangeSecs(rec, from, to)
		}
		if rok != hok || rf != hf {
			t.Fatalf("row %d [%d, %d]: HotRange* ok %v %q, HotDays/HotSecs %v %q", row, from, to, rok, rf, hok, hf)
		}
		if !rok {
			continue
		}
		if !slices.IsSorted(ps) || !boundsMatch(h, rec, ps) {
			// A record misdirected to points out of order, or whose first
			// and last period are not its points' (damage): the range
			// search promises only a part of the series' points.
			lo := 0
			if len(rv) > 0 {
				lo = int((uintptr(unsafe.Pointer(&rv[0])) - uintptr(unsafe.Pointer(&vals[0]))) / 8)
			}
			if len(rv) != len(rd)+len(rs) || lo < 0 || lo+len(rv) > len(vals) || (len(rd) > 0 && &rd[0] != &days[lo]) || (len(rs) > 0 && &rs[0] != &secs[lo]) {
				t.Fatalf("row %d [%d, %d] (periods out of order): HotRange* gives %d/%d/%d points outside the series' %d", row, from, to, len(rd), len(rs), len(rv), len(vals))
			}
			continue
		}
		lo := sort.Search(len(ps), func(i int) bool { return ps[i] >= from })
		hi := len(ps)
		if (days != nil && to < math.MaxInt32) || (secs != nil && to < math.MaxInt64) {
			hi = sort.Search(len(ps), func(i int) bool { return ps[i] >= to+1 })
		}
		if lo >= hi {
			if rd != nil || rs != nil || rv != nil {
				t.Fatalf("row %d [%d, %d]: empty range gives %d/%d/%d points, not nil", row, from, to, len(rd), len(rs), len(rv))
			}
			continue
		}
		if len(rv) != hi-lo || len(rd)+len(rs) != hi-lo || &rv[0] != &vals[lo] || (days != nil && &rd[0] != &days[lo]) || (secs != nil && &rs[0] != &secs[lo]) {
			t.Fatalf("row %d [%d, %d]: HotRange* gives %d/%d/%d points, want [%d, %d) of the series", row, from, to, len(rd), len(rs), len(rv), lo, hi)
		}
	}
}

// The manifests Write makes (every format version, both period types, no
// series, no rows) take the fast decoder, and what it refuses still
// decodes through encoding/json.
func TestParseManifestFast(t *testing.T) {
	for _, s := range fuzzSnapshots(t) {
		fast, ok := parseManifestFast(s.manifest)
		if !ok {
			t.Fatalf("parseManifestFast refused a manifest Write wrote:\n%s", s.manifest)
		}
		if !reflect.DeepEqual(&fast, s.m) {
			t.Fatalf("parseManifestFast: %+v, Write wrote %+v", fast, *s.m)
		}
	}
	s := fuzzSnapshots(t)[0]
	for name, edit := range map[string]func(string) string{
		"an unknown key":      func(j string) string { return strings.Replace(j, "{", `{"comment": "from a newer writer",`, 1) },
		"a key in upper case": func(j string) string { return strings.Replace(j, `"rows"`, `"Rows"`, 1) },
		"an escape":           func(j string) string { return strings.Replace(j, `"date`, `"d\u0061te`, 1) },
		"null":                func(j string) string { return strings.Replace(j, `"duplicates": 0`, `"duplicates": null`, 1) },
	} {
		b := []byte(edit(string(s.manifest)))
		if bytes.Equal(b, s.manifest) {
			t.Fatalf("%s: the edit changed nothing", name)
		}
		if _, ok := parseManifestFast(b); ok {
			t.Fatalf("%s: parseManifestFast accepted %s", name, b)
		}
		m, err := ParseManifest(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(m, s.m) {
			t.Fatalf("%s: %+v, want %+v", name, *m, *s.m)
		}
	}
}
