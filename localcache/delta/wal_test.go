package delta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
)

// liveLog returns a logger writing into a buffer, to check warnings.
func liveLog() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewTextHandler(&buf, nil)), &buf
}

func liveBatch(first uint64, n int) []format.Record {
	b := make([]format.Record, n)
	for i := range b {
		seq := first + uint64(i)
		b[i] = format.Record{Seq: seq, Op: format.Upsert, SeriesID: fmt.Sprintf("s%d", seq%3), Period: int64(seq) * 86400, Value: float64(seq)}
		if seq%4 == 0 {
			b[i].Op = format.Delete
		}
		if seq%5 == 0 {
			b[i].Meta = &format.RecordMeta{Name: fmt.Sprint("name", seq), Unit: "u", Source: "src", Frequency: "D"}
		}
	}
	return b
}

func liveOpenWAL(t *testing.T, dir string, skip uint64) (*WAL, []format.Record, string) {
	t.Helper()
	log, buf := liveLog()
	w, recs, err := OpenWAL(dir, false, skip, log)
	if err != nil {
		t.Fatalf("open wal: %v", err)
	}
	return w, recs, buf.String()
}

func liveSeqs(recs []format.Record) []uint64 {
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
	var all []format.Record
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

func liveFrame(batch []format.Record) []byte {
	p := format.EncodeBatch(nil, batch)
	f := binary.LittleEndian.AppendUint32(nil, uint32(len(p)))
	f = binary.LittleEndian.AppendUint32(f, crc32.Checksum(p, castagnoli))
	return append(f, p...)
}

// liveSameRecords compares batches bit for bit (NaN values included).
func liveSameRecords(a, b []format.Record) bool {
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
	f.Add(format.EncodeBatch(nil, liveBatch(1, 5)))
	f.Add(format.EncodeBatch(nil, nil))
	f.Add(format.EncodeBatch(nil, []format.Record{{Seq: 1, Op: format.Upsert, SeriesID: "A", Value: math.NaN(), Meta: &format.RecordMeta{Frequency: "M"}}}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 'a', 2})
	f.Fuzz(func(t *testing.T, p []byte) {
		recs, err := format.DecodeBatch(p)
		if err != nil {
			return
		}
		enc := format.EncodeBatch(nil, recs)
		size := format.BatchHeaderSize(len(recs))
		for i := range recs {
			size += format.EncodedSize(&recs[i])
		}
		if size != len(enc) {
			t.Fatalf("EncodedSize sums to %d, format.EncodeBatch wrote %d bytes", size, len(enc))
		}
		again, err := format.DecodeBatch(enc)
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
	f.Add(format.EncodeBatch(nil, liveBatch(1, 5)))
	f.Add(format.EncodeBatch(nil, []format.Record{{Seq: 1, Op: format.Upsert, SeriesID: "A", Period: math.MaxInt64, Meta: &format.RecordMeta{Frequency: "monthly"}}}))
	f.Fuzz(func(t *testing.T, p []byte) {
		recs, err := format.DecodeBatch(p)
		if err != nil || format.ValidateRecords(recs) != nil {
			return
		}
		seg := append([]byte(walMagic), liveFrame(recs)...)
		good, batches, why := scanFrames(seg)
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

// bruteIntactAfter is intactFrameAfter without its shortcuts: whether a
// frame holding at least one record starts at any offset after from.
func bruteIntactAfter(b []byte, from int) bool {
	for p := from + 1; p < len(b); p++ {
		if batch, _, err := readFrame(b[p:]); err == nil && len(batch) > 0 {
			return true
		}
	}
	return false
}

// FuzzScanSegment: any bytes of a segment scan without a panic into an
// intact prefix that scans cleanly on its own and takes another frame,
// and damage is called a torn tail exactly when no intact frame starts
// after it. (OpenWAL cuts a torn tail of the last segment to that
// prefix; FuzzOpenWAL and the tests below cover the files.)
func FuzzScanSegment(f *testing.F) {
	f.Add(append([]byte(walMagic), liveFrame(liveBatch(1, 3))...))
	f.Add(append(append([]byte(walMagic), liveFrame(liveBatch(1, 3))...), liveFrame(liveBatch(4, 1))[:5]...))
	f.Add(append(append([]byte(walMagic), 0, 0, 0, 0, 0, 0, 0, 0), liveFrame(liveBatch(4, 1))...))
	f.Add([]byte(walMagic[:3]))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, seg []byte) {
		sc := scanSegment(seg)
		good, batches, why := sc.good, sc.batches, sc.damage
		if good < 0 || good > len(seg) || (why == nil && good != len(seg)) || (why != nil && good == len(seg) && good > 0) {
			t.Fatalf("good %d of %d, why %v", good, len(seg), why)
		}
		if why != nil && sc.torn == bruteIntactAfter(seg, good) {
			t.Fatalf("damage at %d (%v) called torn=%v, but an intact frame after it: %v", good, why, sc.torn, !sc.torn)
		}
		if why == nil && sc.torn {
			t.Fatal("a clean segment called torn")
		}
		if good == 0 {
			return // OpenWAL rewrites the header
		}
		prefix := seg[:good:good]
		g2, b2, why := scanFrames(prefix)
		if why != nil || g2 != good || len(b2) != len(batches) {
			t.Fatalf("prefix does not scan cleanly: %d %v", g2, why)
		}
		extra := []format.Record{{Seq: 1, Op: format.Upsert, SeriesID: "x", Value: 1}}
		g3, b3, why := scanFrames(append(prefix, liveFrame(extra)...))
		if why != nil || len(b3) != len(batches)+1 || !liveSameRecords(b3[len(b3)-1], extra) || g3 <= good {
			t.Fatalf("appended frame lost: %v", why)
		}
	})
}

func liveFlatten(batches [][]format.Record) []format.Record {
	var out []format.Record
	for _, b := range batches {
		out = append(out, b...)
	}
	return out
}

// FuzzOpenWAL opens a log whose last (or, with a valid segment after it,
// first) segment holds arbitrary bytes. Open either refuses with a
// *CorruptionError and changes no byte, or returns the records of the
// intact frames and cuts only bytes holding no intact frame; a refusal
// happens exactly when intact data follows the damage (or the damage is
// in a segment that is not the last). What opens takes appends that a
// second open reads back.
func FuzzOpenWAL(f *testing.F) {
	full := append(append([]byte(walMagic), liveFrame(liveBatch(1, 3))...), liveFrame(liveBatch(4, 2))...)
	f.Add(full, false)
	f.Add(full[:len(full)-4], false)
	f.Add(full[:len(full)-4], true)
	flipped := bytes.Clone(full)
	flipped[len(walMagic)+10] ^= 1
	f.Add(flipped, false)
	f.Add(append(bytes.Clone(full), make([]byte, 100)...), false)
	f.Add([]byte(walMagic[:5]), false)
	f.Fuzz(func(t *testing.T, seg []byte, notLast bool) {
		dir := t.TempDir()
		first := filepath.Join(dir, fmt.Sprintf("%020d.wal", 1))
		if err := os.WriteFile(first, seg, 0o644); err != nil {
			t.Fatal(err)
		}
		var next []byte
		if notLast {
			next = append([]byte(walMagic), liveFrame(liveBatch(1000, 2))...)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d.wal", 1000)), next, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		good, batches, damage := scanFrames(seg)
		wantRefuse := damage != nil && (notLast || bruteIntactAfter(seg, good))
		log, _ := liveLog()
		w, recs, err := OpenWAL(dir, false, 0, log)
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("open failed with %v, not a CorruptionError", err)
			}
			if !wantRefuse || ce.Segment != first || ce.Offset != int64(good) || ce.Unwrap() == nil {
				t.Fatalf("refused (%v); want refusal %v at %d in %s", err, wantRefuse, good, first)
			}
			if b, _ := os.ReadFile(first); !bytes.Equal(b, seg) {
				t.Fatal("a refused open changed the segment")
			}
			return
		}
		if wantRefuse {
			t.Fatalf("opened past damage at %d (%v) with intact data after it", good, damage)
		}
		want := liveFlatten(batches)
		if notLast {
			want = append(want, liveBatch(1000, 2)...)
		}
		if !liveSameRecords(recs, want) {
			t.Fatalf("replayed %v, want %v", liveSeqs(recs), liveSeqs(want))
		}
		extra := liveBatch(2000, 1)
		if err := w.Append(extra); err != nil {
			t.Fatal(err)
		}
		w.Close()
		w, again, err := OpenWAL(dir, false, 0, log)
		if err != nil {
			t.Fatalf("reopen after an append: %v", err)
		}
		w.Close()
		if !liveSameRecords(again, append(want, extra...)) {
			t.Fatalf("reopen replayed %v, want %v", liveSeqs(again), liveSeqs(append(want, extra...)))
		}
	})
}

// liveWriteLog writes batches of per records (seqs from 1) into dir,
// rotating at the given seqs, and returns the segment paths.
func liveWriteLog(t *testing.T, dir string, batches, per int, rotateAt ...uint64) []string {
	t.Helper()
	w, _, _ := liveOpenWAL(t, dir, 0)
	seq := uint64(1)
	for range batches {
		if slices.Contains(rotateAt, seq) {
			if err := w.Rotate(seq); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Append(liveBatch(seq, per)); err != nil {
			t.Fatal(err)
		}
		seq += uint64(per)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, n := range liveSegments(t, dir) {
		paths = append(paths, filepath.Join(dir, n))
	}
	return paths
}

// liveFrameOffsets returns the offset of every frame of a segment.
func liveFrameOffsets(t *testing.T, b []byte) []int {
	t.Helper()
	var offs []int
	for off := len(walMagic); off < len(b); {
		_, n, err := readFrame(b[off:])
		if err != nil {
			t.Fatalf("frame at %d: %v", off, err)
		}
		offs = append(offs, off)
		off += n
	}
	return offs
}

// liveRefused checks that opening dir (writable and read-only) fails with
// a CorruptionError at seg:off and that no file of the log changed.
func liveRefused(t *testing.T, dir, seg string, off int) {
	t.Helper()
	before := map[string][]byte{}
	for _, n := range liveSegments(t, dir) {
		b, _ := os.ReadFile(filepath.Join(dir, n))
		before[n] = b
	}
	for _, readOnly := range []bool{false, true} {
		log, buf := liveLog()
		w, recs, err := OpenWAL(dir, readOnly, 0, log)
		if err == nil {
			w.Close()
			t.Fatalf("read-only %v: opened past corruption with %d records (log: %s)", readOnly, len(recs), buf)
		}
		var ce *CorruptionError
		if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("read-only %v: error %v is not a CorruptionError", readOnly, err)
		}
		if ce.Segment != seg || ce.Offset != int64(off) {
			t.Fatalf("read-only %v: corruption reported at %s:%d, want %s:%d", readOnly, ce.Segment, ce.Offset, seg, off)
		}
		if msg := err.Error(); !strings.Contains(msg, seg) || !strings.Contains(msg, fmt.Sprintf("offset %d", off)) {
			t.Fatalf("message %q does not name the segment and offset", msg)
		}
	}
	after := liveSegments(t, dir)
	if len(after) != len(before) {
		t.Fatalf("segments %v after a refused open, had %d", after, len(before))
	}
	for _, n := range after {
		if b, _ := os.ReadFile(filepath.Join(dir, n)); !bytes.Equal(b, before[n]) {
			t.Fatalf("%s changed by a refused open (%d bytes, had %d)", n, len(b), len(before[n]))
		}
	}
}

// TestWALFlippedByteInFirstFrame is the case of issue 10 item 4: a
// segment holding 600,000 acknowledged rows, one flipped byte in its
// first frame. The old open called everything from there a torn tail,
// cut the segment to its header without an error, and the next append
// reused seq 1. Now the open refuses, names segment and offset, and keeps
// every byte, however often it is retried.
func TestWALFlippedByteInFirstFrame(t *testing.T) {
	dir := t.TempDir()
	const per, batches = 4096, 147 // 602,112 rows
	segs := liveWriteLog(t, dir, batches, per)
	seg := segs[0]
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	// The first frame's payload, its length and its checksum.
	for _, at := range []int{len(walMagic) + frameHeader + 100, len(walMagic) + 1, len(walMagic) + 5} {
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			bad := bytes.Clone(b)
			bad[at] ^= 0x04
			if err := os.WriteFile(seg, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			liveRefused(t, dir, seg, len(walMagic))
			liveRefused(t, dir, seg, len(walMagic)) // and again: nothing was repaired in between
		})
	}
	// Restored, every row is there.
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	w, recs, warn := liveOpenWAL(t, dir, 0)
	w.Close()
	if len(recs) != per*batches || warn != "" || recs[len(recs)-1].Seq != per*batches {
		t.Fatalf("restored log: %d records, warning %q", len(recs), warn)
	}
}

// TestWALCorruptionNotTornTail: damage that a crash cannot make is
// refused wherever it is; each case names where.
func TestWALCorruptionNotTornTail(t *testing.T) {
	type layout struct {
		dir  string
		segs []string // three segments: seqs 1-12, 13-24, 25-36, frames of 3
		data [][]byte
		offs [][]int
	}
	setup := func(t *testing.T) *layout {
		l := &layout{dir: t.TempDir()}
		l.segs = liveWriteLog(t, l.dir, 12, 3, 13, 25)
		if len(l.segs) != 3 {
			t.Fatalf("segments %v", l.segs)
		}
		for _, p := range l.segs {
			b, _ := os.ReadFile(p)
			l.data = append(l.data, b)
			l.offs = append(l.offs, liveFrameOffsets(t, b))
		}
		return l
	}
	write := func(t *testing.T, path string, b []byte) {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		// damage changes the log and returns the segment index and offset
		// the error must name.
		damage func(t *testing.T, l *layout) (int, int)
	}{
		{"checksum of a middle frame of the last segment", func(t *testing.T, l *layout) (int, int) {
			b := bytes.Clone(l.data[2])
			off := l.offs[2][1]
			b[off+frameHeader+3] ^= 0xff
			write(t, l.segs[2], b)
			return 2, off
		}},
		{"last frame of a segment that is not the last", func(t *testing.T, l *layout) (int, int) {
			b := bytes.Clone(l.data[1])
			off := l.offs[1][len(l.offs[1])-1]
			b[len(b)-1] ^= 0x01
			write(t, l.segs[1], b)
			return 1, off
		}},
		{"segment that is not the last cut short", func(t *testing.T, l *layout) (int, int) {
			off := l.offs[0][len(l.offs[0])-1]
			write(t, l.segs[0], l.data[0][:len(l.data[0])-2])
			return 0, off
		}},
		{"length past the end in a segment that is not the last", func(t *testing.T, l *layout) (int, int) {
			b := bytes.Clone(l.data[1])
			off := l.offs[1][len(l.offs[1])-1]
			binary.LittleEndian.PutUint32(b[off:], 1<<20)
			write(t, l.segs[1], b)
			return 1, off
		}},
		{"length past the end with intact frames after it", func(t *testing.T, l *layout) (int, int) {
			b := bytes.Clone(l.data[2])
			off := l.offs[2][0]
			binary.LittleEndian.PutUint32(b[off:], 1<<20)
			write(t, l.segs[2], b)
			return 2, off
		}},
		{"zeroed frame header with intact frames after it", func(t *testing.T, l *layout) (int, int) {
			b := bytes.Clone(l.data[2])
			off := l.offs[2][1]
			clear(b[off : off+frameHeader])
			write(t, l.segs[2], b)
			return 2, off
		}},
		{"bad magic with frames after it", func(t *testing.T, l *layout) (int, int) {
			b := bytes.Clone(l.data[2])
			b[0] = 'X'
			write(t, l.segs[2], b)
			return 2, 0
		}},
		{"empty segment that is not the last", func(t *testing.T, l *layout) (int, int) {
			write(t, l.segs[1], nil)
			return 1, 0
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := setup(t)
			i, off := c.damage(t, l)
			liveRefused(t, l.dir, l.segs[i], off)
		})
	}
}

// TestWALTornTailShapes: what a crash while appending the last frame can
// leave (a prefix of the frame, zeros where the file grew but the data
// did not reach the disk, a zeroed page inside the frame) is cut back to
// the last intact frame, and appends go on from there.
func TestWALTornTailShapes(t *testing.T) {
	base := append([]byte(walMagic), liveFrame(liveBatch(1, 3))...)
	last := liveFrame(liveBatch(4, 300)) // several KiB
	zeroPage := bytes.Clone(last)
	clear(zeroPage[4096:min(8192, len(zeroPage))])
	cases := map[string][]byte{
		"half a frame":               last[:len(last)/2],
		"half a frame, then zeros":   append(bytes.Clone(last[:len(last)/2]), make([]byte, 4096)...),
		"zeros past the last frame":  make([]byte, 8192),
		"zeroed page inside a frame": zeroPage,
		"zeroed header, then data":   append(make([]byte, frameHeader), last[frameHeader:]...),
		"header only":                last[:frameHeader],
	}
	for name, tail := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			seg := filepath.Join(dir, fmt.Sprintf("%020d.wal", 1))
			if err := os.WriteFile(seg, append(bytes.Clone(base), tail...), 0o644); err != nil {
				t.Fatal(err)
			}
			w, recs, _ := liveOpenWAL(t, dir, 0)
			if got := fmt.Sprint(liveSeqs(recs)); got != "[1 2 3]" {
				t.Fatalf("replayed %s", got)
			}
			if tt := w.TornTail(); tt.Segment != seg || tt.Offset != int64(len(base)) || tt.Bytes != int64(len(tail)) || tt.Reason == nil {
				t.Fatalf("torn tail reported as %+v, want %d bytes at %s:%d", tt, len(tail), seg, len(base))
			}
			if st, _ := os.Stat(seg); st.Size() != int64(len(base)) {
				t.Fatalf("cut to %d, want %d", st.Size(), len(base))
			}
			if err := w.Append(liveBatch(4, 2)); err != nil {
				t.Fatal(err)
			}
			w.Close()
			w, recs, _ = liveOpenWAL(t, dir, 0)
			w.Close()
			if got := fmt.Sprint(liveSeqs(recs)); got != "[1 2 3 4 5]" || w.TornTail().Bytes != 0 {
				t.Fatalf("second open replayed %s (torn tail %+v)", got, w.TornTail())
			}
		})
	}
}

// TestVerifyWAL: verification reads every frame without changing a byte;
// it accepts a torn tail (reported, not an error) and names segment and
// offset of corruption and of a seq that does not increase.
func TestVerifyWAL(t *testing.T) {
	dir := t.TempDir()
	segs := liveWriteLog(t, dir, 12, 3, 13, 25)
	c, err := VerifyWAL(dir)
	if err != nil || c.Segments != 3 || c.Frames != 12 || c.Records != 36 || c.FirstSeq != 1 || c.LastSeq != 36 || c.TornTail != 0 {
		t.Fatalf("clean log: %+v, %v", c, err)
	}
	if c, err := VerifyWAL(filepath.Join(dir, "missing")); err != nil || c.Segments != 0 {
		t.Fatalf("missing log: %+v, %v", c, err)
	}

	last, _ := os.ReadFile(segs[2])
	torn := append(bytes.Clone(last), liveFrame(liveBatch(37, 2))[:9]...)
	os.WriteFile(segs[2], torn, 0o644)
	if c, err := VerifyWAL(dir); err != nil || c.TornTail != 9 || c.Records != 36 {
		t.Fatalf("torn tail: %+v, %v", c, err)
	}
	if b, _ := os.ReadFile(segs[2]); !bytes.Equal(b, torn) {
		t.Fatal("VerifyWAL changed the segment")
	}
	os.WriteFile(segs[2], last, 0o644)

	mid, _ := os.ReadFile(segs[1])
	offs := liveFrameOffsets(t, mid)
	bad := bytes.Clone(mid)
	bad[offs[2]+frameHeader+1] ^= 0x40
	os.WriteFile(segs[1], bad, 0o644)
	var ce *CorruptionError
	if _, err := VerifyWAL(dir); !errors.As(err, &ce) || ce.Segment != segs[1] || ce.Offset != int64(offs[2]) {
		t.Fatalf("flipped byte: %v, want corruption at %s:%d", err, segs[1], offs[2])
	}
	os.WriteFile(segs[1], mid, 0o644)

	// Intact frames whose seqs go backwards: 13..15, 16..18, then 14..16.
	back := append(bytes.Clone(mid[:offs[2]]), liveFrame(liveBatch(14, 3))...)
	os.WriteFile(segs[1], back, 0o644)
	if _, err := VerifyWAL(dir); !errors.As(err, &ce) || ce.Segment != segs[1] || ce.Offset != int64(offs[2]) {
		t.Fatalf("seq going backwards: %v, want corruption at %s:%d", err, segs[1], offs[2])
	}
}

// TestSalvageSeq: behind a flipped byte in the first frame, the highest
// seq of the log is still found (and the segment names count), so a
// store that sets the log aside never hands out an acknowledged seq
// again.
func TestSalvageSeq(t *testing.T) {
	dir := t.TempDir()
	segs := liveWriteLog(t, dir, 12, 3, 13, 25) // seqs 1..36 in segments 1, 13, 25
	for i, p := range segs {
		b, _ := os.ReadFile(p)
		b[len(walMagic)+frameHeader+1] ^= 0x08 // the first frame of every segment
		if i == 2 {
			b[0] = 'X' // and the magic of the last
		}
		os.WriteFile(p, b, 0o644)
	}
	if got, err := SalvageSeq(dir); err != nil || got != 36 {
		t.Fatalf("SalvageSeq = %d, %v; want 36", got, err)
	}
	// Only a segment name left.
	os.WriteFile(segs[2], []byte("garbage"), 0o644)
	if got, err := SalvageSeq(dir); err != nil || got != 25 {
		t.Fatalf("SalvageSeq = %d, %v; want 25 (the last segment's name)", got, err)
	}
	if got, err := SalvageSeq(filepath.Join(dir, "missing")); err != nil || got != 0 {
		t.Fatalf("missing log: %d, %v", got, err)
	}
}
