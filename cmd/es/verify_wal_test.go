package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/energyscope/localcache"
)

// TestVerifyChecksWAL: es verify reads every dataset's write-ahead log.
// A flipped byte in the first frame of a segment (issue 10 item 4: verify
// said ok, as it did not read the log) is reported with segment and
// offset and exit status 1, while the healthy dataset beside it is ok; a
// torn tail is not a failure. Nothing verify reads is changed.
func TestVerifyChecksWAL(t *testing.T) {
	home := t.TempDir()
	for _, ds := range []string{"stocks", "other"} {
		mustES(t, "cook", "--home", home, "--dataset", ds, "--in", "../../server/cook/samples/stocks.csv",
			"--series-col", "symbol", "--period-col", "date", "--value-col", "price")
	}
	dir := t.TempDir()
	for i := range 3 {
		up := filepath.Join(dir, fmt.Sprintf("up%d.csv", i))
		os.WriteFile(up, fmt.Appendf(nil, "series_id,period,value\nMSFT,2000-0%d-15,%d.5\nNEWCO,2026-11-2%d,1.25\n", i+1, i, i), 0o644)
		for _, ds := range []string{"stocks", "other"} {
			mustES(t, "put", "--home", home, "--dataset", ds, up)
		}
	}
	out := mustES(t, "verify", "--home", home)
	for _, want := range []string{"ok   stocks/wal: 6 records in 3 frames", "seq 1..6", "ok   other/wal: 6 records"} {
		if !strings.Contains(out, want) {
			t.Fatalf("verify of healthy logs lacks %q:\n%s", want, out)
		}
	}

	walDir := filepath.Join(home, localcache.DatasetsDir, "stocks", localcache.WALDir)
	ents, err := os.ReadDir(walDir)
	if err != nil || len(ents) != 1 {
		t.Fatalf("wal directory: %v %v", ents, err)
	}
	seg := filepath.Join(walDir, ents[0].Name())
	good, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}

	// A torn tail (half of a frame being appended) is reported, not failed.
	torn := append(bytes.Clone(good), 40, 0, 0, 0, 1, 2)
	os.WriteFile(seg, torn, 0o644)
	if out := mustES(t, "verify", "--home", home, "--dataset", "stocks"); !strings.Contains(out, "torn tail of 6 bytes") {
		t.Fatalf("verify of a torn tail:\n%s", out)
	}

	// One flipped byte in the first frame (its payload starts at 8+8).
	bad := bytes.Clone(good)
	bad[8+8+2] ^= 0x20
	os.WriteFile(seg, bad, 0o644)
	code, out, _ := es(t, "verify", "--home", home)
	if code != 1 || !strings.Contains(out, "FAIL stocks/wal") || !strings.Contains(out, seg) || !strings.Contains(out, "offset 8") {
		t.Fatalf("verify after a flipped byte: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "ok   other/wal") {
		t.Fatalf("the healthy dataset is not reported ok:\n%s", out)
	}
	if b, _ := os.ReadFile(seg); !bytes.Equal(b, bad) {
		t.Fatal("verify changed the segment")
	}

	// The next put must not cut the log and reuse seq 1 (it did): whatever
	// it answers, every byte of the damaged segment is still there.
	up := filepath.Join(dir, "up9.csv")
	os.WriteFile(up, []byte("series_id,period,value\nMSFT,2000-09-15,9\n"), 0o644)
	es(t, "put", "--home", home, "--dataset", "stocks", up)
	if b, _ := os.ReadFile(seg); !bytes.HasPrefix(b, bad) {
		t.Fatalf("a put after the corruption cut the segment to %d bytes (had %d)", len(b), len(bad))
	}
	if code, out, _ := es(t, "verify", "--home", home, "--dataset", "stocks"); code != 1 || !strings.Contains(out, "offset 8") {
		t.Fatalf("verify after the put: exit %d\n%s", code, out)
	}
}
