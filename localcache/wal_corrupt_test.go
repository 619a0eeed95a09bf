package localcache

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/format"
)

// TestWALCorruptionMarksDamagedNoSeqReuse is issue 10 item 4 at the
// store: a flipped byte in the first frame of a dataset's log used to cut
// every acknowledged record without a word, and the next put reused seq
// 1. Now the dataset is damaged with a *delta.CorruptionError naming
// segment and offset, the log is left as it is, the other dataset
// serves, and once a good snapshot is installed over the damage the
// dataset's seq is above every seq the damaged log acknowledged.
func TestWALCorruptionMarksDamagedNoSeqReuse(t *testing.T) {
	home := liveTempDir(t)
	liveCook(t, home, "good", trustTable("G", 3, 10), format.WriteOptions{Epoch: 1})
	mb := liveCook(t, home, "bad", trustTable("B", 3, 20), format.WriteOptions{Epoch: 1})
	spare := liveCopyDir(t, trustSnapDir(home, "bad", mb))

	s := liveOpen(t, home, &Options{ScrubBytesPerSec: -1, CompactRows: -1, CompactBytes: -1})
	const batches, per = 20, 50
	seq := uint64(0)
	for range batches {
		batch := make([]format.Record, per)
		for i := range batch {
			seq++
			batch[i] = format.Record{Seq: seq, Op: format.Upsert, SeriesID: "B1", Period: liveDay("2024-01-01") + int64(seq)*86400, Value: float64(seq)}
		}
		if _, err := s.Apply("bad", batch); err != nil {
			t.Fatal(err)
		}
	}
	acked := seq
	s.Close()

	walDir := filepath.Join(home, DatasetsDir, "bad", WALDir)
	ents, err := os.ReadDir(walDir)
	if err != nil || len(ents) != 1 {
		t.Fatalf("wal: %v %v", ents, err)
	}
	seg := filepath.Join(walDir, ents[0].Name())
	flipByte(t, seg, 8+8+3) // in the first frame's payload
	damaged, _ := os.ReadFile(seg)

	s = liveOpen(t, home, &Options{ScrubBytesPerSec: -1, CompactRows: -1, CompactBytes: -1})
	defer func() { s.Close() }()
	var ce *delta.CorruptionError
	if err := s.Damaged("bad"); !errors.Is(err, ErrDamaged) || !errors.As(err, &ce) || ce.Segment != seg || ce.Offset != 8 {
		t.Fatalf("Damaged(bad) = %v; want ErrDamaged with a delta.CorruptionError at %s offset 8", err, seg)
	}
	trustWantServes(t, s, "good:G1", 11)
	next := []format.Record{{Seq: 1, Op: format.Upsert, SeriesID: "B1", Period: liveDay("2024-01-01"), Value: -1}}
	if _, err := s.Apply("bad", next); err == nil {
		t.Fatal("a put into the dataset with the corrupt log was taken")
	}
	if b, _ := os.ReadFile(seg); !bytes.Equal(b, damaged) {
		t.Fatalf("the corrupt segment changed: %d bytes, had %d", len(b), len(damaged))
	}

	// Healed by a snapshot covering nothing of the log: the log is set
	// aside, and the seq goes on above everything it acknowledged.
	if _, err := s.Install("bad", spare); err != nil {
		t.Fatalf("install over the damage: %v", err)
	}
	if last, err := s.LastSeq("bad"); err != nil || last < acked {
		t.Fatalf("after healing LastSeq = %d, %v; the damaged log acknowledged up to %d, so seqs would be handed out again", last, err, acked)
	}
}
