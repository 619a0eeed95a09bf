package localcache

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
)

// TestCompactRefusesUnreadableBase: a compaction that cannot read a base
// series (its cold-tier block corrupted on disk after the snapshot was
// opened) fails and keeps serving the old state, rather than writing a
// snapshot without that series' points.
func TestCompactRefusesUnreadableBase(t *testing.T) {
	home := liveTempDir(t)
	tb := liveGenBase()
	for i := range tb.Series {
		if i%2 == 1 {
			tb.Series[i].Tier = format.Cold
		}
	}
	m := liveCook(t, home, "d", tb, format.WriteOptions{Epoch: 1})
	// No background scrub: it re-hashes the snapshot and would (rightly)
	// mark the dataset damaged if it read the corrupted tail before the
	// compaction does; this test is about what the compaction does.
	s := liveOpen(t, home, &Options{CompactRows: -1, CompactBytes: -1, ScrubBytesPerSec: -1})
	defer s.Close()
	if _, err := s.Apply("d", []format.Record{{Seq: 1, Op: format.Upsert, SeriesID: liveGenID(0), Period: liveGenPeriod(1), Value: 42}}); err != nil {
		t.Fatal(err)
	}

	// Overwrite the middle of tail.parquet (its data pages; the footer at
	// the end stays readable) before any cold series was read.
	tail := filepath.Join(s.DatasetDir("d"), format.SnapshotsDir, m.SnapshotID, format.TailFile)
	b, err := os.ReadFile(tail)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(tail, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, len(b)/2)
	for i := range junk {
		junk[i] = byte(i*131 + 7)
	}
	if _, err := f.WriteAt(junk, int64(len(b)/8)); err != nil {
		t.Fatal(err)
	}
	f.Close()

	if _, err := s.Compact("d"); err == nil {
		t.Fatal("compaction over an unreadable cold block succeeded")
	}
	if _, id, seq, _ := s.State("d"); id != m.SnapshotID || seq != 1 {
		t.Fatalf("after the failed compaction: snapshot %s seq %d, want %s seq 1", id, seq, m.SnapshotID)
	}
	r, err := s.Get("d:"+liveGenID(0), liveGenPeriod(0), liveGenPeriod(liveGenPeriods))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if r.Points.Len() != liveGenPeriods+1 || r.Points.Values[1] != 42 {
		t.Fatalf("hot series after the failed compaction: %d points, [1] = %v", r.Points.Len(), r.Points.Values[1])
	}
}
