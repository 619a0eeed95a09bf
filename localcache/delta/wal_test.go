package delta

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
)

// liveLog returns a logger writing into a buffer, to check warnings.
func liveLog() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewTextHandler(&buf, nil)), &buf
}

func liveBatch(first uint64, n int) []Record {
	b := make([]Record, n)
	for i := range b {
		seq := first + uint64(i)
		b[i] = Record{Seq: seq, Op: Upsert, SeriesID: fmt.Sprintf("s%d", seq%3), Period: int64(seq) * 86400, Value: float64(seq)}
		if seq%4 == 0 {
			b[i].Op = Delete
		}
		if seq%5 == 0 {
			b[i].Meta = &Meta{Name: fmt.Sprint("name", seq), Unit: "u", Source: "src", Frequency: "D"}
		}
	}
	return b
}

func liveOpenWAL(t *testing.T, dir string, skip uint64) (*WAL, []Record, string) {
	t.Helper()
	log, buf := liveLog()
	w, recs, err := OpenWAL(dir, false, skip, log)
	if err != nil {
		t.Fatalf("open wal: %v", err)
	}
	return w, recs, buf.String()
}

func liveSeqs(recs []Record) []uint64 {
	out := make([]uint64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}

func liveSegments(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestWALRoundTripRotateDrop(t *testing.T) {
	dir := t.TempDir()
	w, recs, warn := liveOpenWAL(t, dir, 0)
	if len(recs) != 0 || warn != "" {
		t.Fatalf("fresh wal: %v %q", recs, warn)
	}
	var all []Record
	for first := uint64(1); first <= 30; first += 3 {
		b := liveBatch(first, 3)
		if err := w.Append(b); err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
		if first == 10 || first == 19 {
			if err := w.Rotate(first + 3); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if segs := liveSegments(t, dir); len(segs) != 3 {
		t.Fatalf("segments %v", segs)
	}
	w, recs, warn = liveOpenWAL(t, dir, 0)
	if warn != "" || !reflect.DeepEqual(recs, all) {
		t.Fatalf("replay differs (warn %q):\n%v\n%v", warn, recs, all)
	}
	var size int64
	for _, n := range liveSegments(t, dir) {
		st, _ := os.Stat(filepath.Join(dir, n))
		size += st.Size()
	}
	if w.Size() != size {
		t.Fatalf("Size %d, files %d", w.Size(), size)
	}
	// Dropping through 12 keeps the segment that starts at 13 and holds
	// 13..21; through 21 drops it too; the active one always stays.
	if err := w.DropThrough(12); err != nil {
		t.Fatal(err)
	}
	if segs := liveSegments(t, dir); len(segs) != 2 {
		t.Fatalf("after drop through 12: %v", segs)
	}
	if err := w.DropThrough(1000); err != nil {
		t.Fatal(err)
	}
	if segs := liveSegments(t, dir); len(segs) != 1 {
		t.Fatalf("after drop through 1000: %v", segs)
	}
	w.Close()
	_, recs, _ = liveOpenWAL(t, dir, 24)
	if fmt.Sprint(liveSeqs(recs)) != "[25 26 27 28 29 30]" {
		t.Fatalf("skip through 24: %v", liveSeqs(recs))
	}
}

// TestWALTornTail cuts the last frame at every byte and flips every byte
// of it: the open succeeds with a warning, every earlier batch is kept,
// and the log takes new batches that a second open sees.
func TestWALTornTail(t *testing.T) {
	src := t.TempDir()
	w, _, _ := liveOpenWAL(t, src, 0)
	for first := uint64(1); first <= 10; first += 2 {
		if err := w.Append(liveBatch(first, 2)); err != nil {
			t.Fatal(err)
		}
	}
	seg := filepath.Join(src, liveSegments(t, src)[0])
	st, _ := os.Stat(seg)
	start := st.Size()
	last := liveBatch(11, 3)
	if err := w.Append(last); err != nil {
		t.Fatal(err)
	}
	w.Close()
	full, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, b []byte, name string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(seg)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		w, recs, warn := liveOpenWAL(t, dir, 0)
		if got := fmt.Sprint(liveSeqs(recs)); got != "[1 2 3 4 5 6 7 8 9 10]" {
			t.Fatalf("%s: replayed %s", name, got)
		}
		if !strings.Contains(warn, "level=WARN") {
			t.Fatalf("%s: no warning", name)
		}
		if st, _ := os.Stat(filepath.Join(dir, filepath.Base(seg))); st.Size() != start {
			t.Fatalf("%s: cut to %d, want %d", name, st.Size(), start)
		}
		if err := w.Append(last); err != nil {
			t.Fatalf("%s: append after cut: %v", name, err)
		}
		w.Close()
		_, recs, warn = liveOpenWAL(t, dir, 0)
		if got := fmt.Sprint(liveSeqs(recs)); got != "[1 2 3 4 5 6 7 8 9 10 11 12 13]" || warn != "" {
			t.Fatalf("%s: second open replayed %s (warn %q)", name, got, warn)
		}
	}
	for off := start + 1; off < int64(len(full)); off++ {
		check(t, full[:off], fmt.Sprintf("cut at %d", off))
	}
	for off := start; off < int64(len(full)); off++ {
		b := bytes.Clone(full)
		b[off] ^= 0x10
		check(t, b, fmt.Sprintf("flip at %d", off))
	}
	// Garbage after the last frame.
	check(t, append(bytes.Clone(full[:start]), 0, 0, 0, 0, 0, 0, 0, 0, 0, 1), "trailing zeros")
}

// TestWALTornHeader: a crash between creating a segment and writing its
// header leaves 0..7 bytes. The open must leave a segment that later
// appends can be read back from.
func TestWALTornHeader(t *testing.T) {
	for n := 0; n < len(walMagic); n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			dir := t.TempDir()
			w, _, _ := liveOpenWAL(t, dir, 0)
			if err := w.Append(liveBatch(1, 2)); err != nil {
				t.Fatal(err)
			}
			if err := w.Rotate(3); err != nil {
				t.Fatal(err)
			}
			w.Close()
			segs := liveSegments(t, dir)
			if err := os.WriteFile(filepath.Join(dir, segs[len(segs)-1]), []byte(walMagic[:n]), 0o644); err != nil {
				t.Fatal(err)
			}
			w, recs, warn := liveOpenWAL(t, dir, 0)
			if len(recs) != 2 || warn == "" {
				t.Fatalf("replayed %v, warning %q", liveSeqs(recs), warn)
			}
			if err := w.Append(liveBatch(3, 2)); err != nil {
				t.Fatal(err)
			}
			w.Close()
			_, recs, warn = liveOpenWAL(t, dir, 0)
			if got := fmt.Sprint(liveSeqs(recs)); got != "[1 2 3 4]" {
				t.Fatalf("acknowledged records lost: replayed %s (warning %q)", got, warn)
			}
		})
	}
	// A fresh, empty log directory with an empty segment in it.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d.wal", 1)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w, _, _ := liveOpenWAL(t, dir, 0)
	if err := w.Append(liveBatch(1, 1)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if _, recs, _ := liveOpenWAL(t, dir, 0); len(recs) != 1 {
		t.Fatalf("empty segment: replayed %v", liveSeqs(recs))
	}
}

// TestWALFailedStaysFailed: after an append fails and the partial frame
// could not be cut off, the log must not take further batches (a rotation
// included) until it is reopened: they would land behind the torn frame
// and the next open would cut them off with it.
func TestWALFailedStaysFailed(t *testing.T) {
	dir := t.TempDir()
	w, _, _ := liveOpenWAL(t, dir, 0)
	if err := w.Append(liveBatch(1, 2)); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, liveSegments(t, dir)[0])
	// Simulate a write that failed half way and a truncate that failed
	// too: half a frame stays on disk and the file handle is unusable.
	frame := liveFrame(liveBatch(3, 2))
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(frame[:len(frame)/2])
	f.Close()
	w.f.Close()
	if err := w.Append(liveBatch(3, 2)); err == nil {
		t.Fatal("append to a closed segment succeeded")
	}
	if err := w.Append(liveBatch(3, 2)); err == nil {
		t.Fatal("failed wal took a batch")
	}
	if err := w.Rotate(3); err == nil {
		if err := w.Append(liveBatch(3, 2)); err == nil {
			// Acknowledged: it must survive a reopen.
			w.Close()
			_, recs, _ := liveOpenWAL(t, dir, 0)
			if got := fmt.Sprint(liveSeqs(recs)); got != "[1 2 3 4]" {
				t.Fatalf("acknowledged batch lost behind a torn frame: replayed %s", got)
			}
			return
		}
	}
	w.Close()
	w, recs, _ := liveOpenWAL(t, dir, 0)
	if got := fmt.Sprint(liveSeqs(recs)); got != "[1 2]" {
		t.Fatalf("replayed %s", got)
	}
	if err := w.Append(liveBatch(3, 2)); err != nil {
		t.Fatalf("reopened wal refuses appends: %v", err)
	}
	w.Close()
}

func TestWALReadOnly(t *testing.T) {
	dir := t.TempDir()
	log, _ := liveLog()
	if _, recs, err := OpenWAL(filepath.Join(dir, "missing"), true, 0, log); err != nil || len(recs) != 0 {
		t.Fatalf("read-only open of a missing log: %v %v", recs, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Fatal("read-only open created the directory")
	}
	w, _, _ := liveOpenWAL(t, dir, 0)
	w.Append(liveBatch(1, 2))
	w.Append(liveBatch(3, 2))
	w.Close()
	seg := filepath.Join(dir, liveSegments(t, dir)[0])
	b, _ := os.ReadFile(seg)
	os.WriteFile(seg, b[:len(b)-3], 0o644)
	r, recs, err := OpenWAL(dir, true, 0, log)
	if err != nil || len(recs) != 2 {
		t.Fatalf("read-only open: %v %v", liveSeqs(recs), err)
	}
	if err := r.Append(liveBatch(5, 1)); err == nil {
		t.Fatal("read-only wal appended")
	}
	if st, _ := os.Stat(seg); st.Size() != int64(len(b)-3) {
		t.Fatal("read-only open cut the torn tail")
	}
}

func liveFrame(batch []Record) []byte {
	p := EncodeBatch(nil, batch)
	f := binary.LittleEndian.AppendUint32(nil, uint32(len(p)))
	f = binary.LittleEndian.AppendUint32(f, crc32.Checksum(p, castagnoli))
	return append(f, p...)
}

// liveSameRecords compares batches bit for bit (NaN values included).
func liveSameRecords(a, b []Record) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if math.Float64bits(x.Value) != math.Float64bits(y.Value) {
			return false
		}
		x.Value, y.Value = 0, 0
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(EncodeBatch(nil, liveBatch(1, 5)))
	f.Add(EncodeBatch(nil, nil))
	f.Add(EncodeBatch(nil, []Record{{Seq: 1, Op: Upsert, SeriesID: "A", Value: math.NaN(), Meta: &Meta{Frequency: "M"}}}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 'a', 2})
	f.Fuzz(func(t *testing.T, p []byte) {
		recs, err := DecodeBatch(p)
		if err != nil {
			return
		}
		again, err := DecodeBatch(EncodeBatch(nil, recs))
		if err != nil {
			t.Fatalf("re-encoded batch does not decode: %v", err)
		}
		if !liveSameRecords(recs, again) {
			t.Fatalf("round trip differs:\n%+v\n%+v", recs, again)
		}
	})
}

// FuzzValidate: Validate never panics, and a batch it accepts survives a
// log frame and applies whole, normalized and sorted.
func FuzzValidate(f *testing.F) {
	f.Add(EncodeBatch(nil, liveBatch(1, 5)))
	f.Add(EncodeBatch(nil, []Record{{Seq: 1, Op: Upsert, SeriesID: "A", Period: math.MaxInt64, Meta: &Meta{Frequency: "monthly"}}}))
	f.Fuzz(func(t *testing.T, p []byte) {
		recs, err := DecodeBatch(p)
		if err != nil || Validate(recs) != nil {
			return
		}
		seg := append([]byte(walMagic), liveFrame(recs)...)
		good, batches, why := scanSegment(seg)
		if why != nil || good != len(seg) || len(batches) != 1 || !liveSameRecords(batches[0], recs) {
			t.Fatalf("frame does not scan back: %v", why)
		}
		d := New(&liveBase{ids: []string{"A"}, freqs: []format.Frequency{format.Daily}}, 0)
		if n := d.Apply(recs); n != len(recs) {
			t.Fatalf("applied %d of %d", n, len(recs))
		}
		for _, id := range d.SeriesIDs() {
			pts, freq, _, _ := d.Range(id, math.MinInt64, math.MaxInt64)
			for i, pt := range pts {
				if freq.Normalize(pt.Period) != pt.Period || (i > 0 && pts[i-1].Period >= pt.Period) {
					t.Fatalf("series %s (%s): points not normalized and sorted: %v", id, freq, pts)
				}
			}
		}
	})
}

// FuzzScanSegment: any bytes of a segment scan without a panic into an
// intact prefix that scans cleanly on its own and takes another frame.
// (OpenWAL cuts the segment to that prefix; TestWALTornTail and
// TestWALTornHeader cover the files.)
func FuzzScanSegment(f *testing.F) {
	f.Add(append([]byte(walMagic), liveFrame(liveBatch(1, 3))...))
	f.Add(append(append([]byte(walMagic), liveFrame(liveBatch(1, 3))...), liveFrame(liveBatch(4, 1))[:5]...))
	f.Add([]byte(walMagic[:3]))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, seg []byte) {
		good, batches, why := scanSegment(seg)
		if good < 0 || good > len(seg) || (why == nil && good != len(seg)) || (why != nil && good == len(seg) && good > 0) {
			t.Fatalf("good %d of %d, why %v", good, len(seg), why)
		}
		if good == 0 {
			return // OpenWAL rewrites the header
		}
		prefix := seg[:good:good]
		g2, b2, why := scanSegment(prefix)
		if why != nil || g2 != good || len(b2) != len(batches) {
			t.Fatalf("prefix does not scan cleanly: %d %v", g2, why)
		}
		extra := []Record{{Seq: 1, Op: Upsert, SeriesID: "x", Value: 1}}
		g3, b3, why := scanSegment(append(prefix, liveFrame(extra)...))
		if why != nil || len(b3) != len(batches)+1 || !liveSameRecords(b3[len(b3)-1], extra) || g3 <= good {
			t.Fatalf("appended frame lost: %v", why)
		}
	})
}
