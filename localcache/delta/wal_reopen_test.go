package delta

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestWALReopenAfterFailedAppend: Reopen recovers a Failed WAL in place.
// What the failed append left after the last acknowledged frame is cut,
// a torn half frame and an intact whole one alike: after a failed fsync
// the page cache may show a frame the disk does not hold (fsyncgate), and
// it was never acknowledged. Appends then continue, and a fresh open
// reads exactly the acknowledged records.
func TestWALReopenAfterFailedAppend(t *testing.T) {
	for _, tc := range []struct {
		name string
		left func(frame []byte) []byte // what the failed append left on disk
	}{
		{"torn half frame", func(f []byte) []byte { return f[:len(f)/2] }},
		{"intact unacknowledged frame", func(f []byte) []byte { return f }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w, _, _ := liveOpenWAL(t, dir, 0)
			if err := w.Append(liveBatch(1, 2)); err != nil {
				t.Fatal(err)
			}
			seg := filepath.Join(dir, liveSegments(t, dir)[0])
			f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(tc.left(liveFrame(liveBatch(3, 2))))
			f.Close()
			w.f.Close() // the next write fails: EBADF, as a dead disk would
			if err := w.Append(liveBatch(3, 2)); err == nil {
				t.Fatal("append to a closed segment succeeded")
			}
			if !w.Failed() {
				t.Fatal("a WAL whose append and cut-back failed is not Failed")
			}
			if err := w.Append(liveBatch(3, 2)); !errors.Is(err, ErrFailed) {
				t.Fatalf("append to a failed WAL: %v, want ErrFailed", err)
			}
			log, _ := liveLog()
			recs, err := w.Reopen(0, log)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(liveSeqs(recs)); got != "[1 2]" || w.Failed() {
				t.Fatalf("reopened: records %s, failed %v; want [1 2], not failed", got, w.Failed())
			}
			if err := w.Append(liveBatch(3, 3)); err != nil {
				t.Fatalf("append after Reopen: %v", err)
			}
			w.Close()
			_, recs, _ = liveOpenWAL(t, dir, 0)
			if got := fmt.Sprint(liveSeqs(recs)); got != "[1 2 3 4 5]" {
				t.Fatalf("after reopen and append: %s", got)
			}
			if c, err := VerifyWAL(dir); err != nil || c.TornTail != 0 || c.Records != 5 {
				t.Fatalf("verify: %+v %v", c, err)
			}
		})
	}
}
