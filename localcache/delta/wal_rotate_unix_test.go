//go:build unix

package delta

import (
	"fmt"
	"syscall"
	"testing"
)

// TestWALFailedRotateLeavesNoSegment: a Rotate whose new segment cannot
// be written (here RLIMIT_FSIZE, as a full disk: the 8-byte header is cut
// short) leaves no segment file behind. A stray segment named next would
// claim that the records appended meanwhile to the active segment are
// below next, and a later DropThrough deleted them with that segment.
// Not parallel: the limit holds for the whole process.
func TestWALFailedRotateLeavesNoSegment(t *testing.T) {
	dir := t.TempDir()
	w, _, _ := liveOpenWAL(t, dir, 0)
	if err := w.Append(liveBatch(1, 2)); err != nil {
		t.Fatal(err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = 4
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	err := w.Rotate(3)
	if rerr := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); rerr != nil {
		panic(rerr)
	}
	if err == nil {
		t.Fatal("rotate past RLIMIT_FSIZE succeeded")
	}
	if segs := liveSegments(t, dir); len(segs) != 1 {
		t.Fatalf("a failed rotate left segments %v", segs)
	}
	if err := w.Append(liveBatch(3, 2)); err != nil { // acknowledged
		t.Fatal(err)
	}
	w.Close()
	w, recs, _ := liveOpenWAL(t, dir, 0)
	if got := fmt.Sprint(liveSeqs(recs)); got != "[1 2 3 4]" {
		t.Fatalf("reopened: %s", got)
	}
	if err := w.DropThrough(2); err != nil {
		t.Fatal(err)
	}
	w.Close()
	_, recs, _ = liveOpenWAL(t, dir, 0)
	if got := fmt.Sprint(liveSeqs(recs)); got != "[1 2 3 4]" && got != "[3 4]" {
		t.Fatalf("after dropping through seq 2 the log holds %s: acknowledged 3 and 4 lost", got)
	}
}
