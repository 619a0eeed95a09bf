package localcache

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
)

// truncRecs are seqs first..last upserting A at 2026-11-10+i with value
// seq (and a new series N at seq 6).
func truncRecs(first, last uint64) []format.Record {
	var out []format.Record
	for q := first; q <= last; q++ {
		r := format.Record{Seq: q, Op: format.Upsert, SeriesID: "A", Period: day("2026-11-10") + int64(q)*86400, Value: float64(q)}
		if q == 6 {
			r = format.Record{Seq: q, Op: format.Upsert, SeriesID: "N", Period: day("2026-11-10"), Value: 6, Meta: &format.RecordMeta{Name: "n", Frequency: format.Daily}}
		}
		out = append(out, r)
	}
	return out
}

func lastSeq(t *testing.T, s *Store) uint64 {
	t.Helper()
	q, err := s.LastSeq("d")
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestTruncateDropsRecordsAboveAndSurvivesReopen(t *testing.T) {
	home := cookHome(t)
	s, err := Open(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Two batches, and a rotation in between, so the log has two segments.
	if _, err := s.Apply("d", truncRecs(1, 3)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CompactThrough("d", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply("d", truncRecs(4, 8)); err != nil {
		t.Fatal(err)
	}
	_, snapBefore, _, _ := s.State("d")

	var changed [][]string
	cancel := s.Watch(func(_ string, ids []string) { changed = append(changed, ids) })
	n, err := s.Truncate("d", 5)
	cancel()
	if err != nil || n != 3 {
		t.Fatalf("truncate through 5: dropped %d, %v; want 3 dropped", n, err)
	}
	if len(changed) != 1 || changed[0] != nil {
		t.Fatalf("watchers: %v, want one call with ids == nil", changed)
	}
	wantA := []int64{day("2026-11-02"), day("2026-11-03")}
	wantV := []float64{2, 3}
	for q := uint64(1); q <= 5; q++ {
		if q == 6 {
			continue
		}
		wantA = append(wantA, day("2026-11-10")+int64(q)*86400)
		wantV = append(wantV, float64(q))
	}
	wantA = append([]int64{day("2026-11-01")}, wantA...)
	wantV = append([]float64{1}, wantV...)
	check := func(s *Store, when string) {
		t.Helper()
		if q := lastSeq(t, s); q != 5 {
			t.Fatalf("%s: last seq %d, want 5", when, q)
		}
		if _, snap, _, _ := s.State("d"); snap != snapBefore {
			t.Fatalf("%s: snapshot %s, want %s unchanged", when, snap, snapBefore)
		}
		p, v := getAll(t, s, "A")
		if !slices.Equal(p, wantA) || !slices.Equal(v, wantV) {
			t.Fatalf("%s: A = %v %v, want %v %v", when, p, v, wantA, wantV)
		}
		if _, err := s.Info("N"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: series N (only in dropped seq 6) still served: %v", when, err)
		}
	}
	check(s, "after truncate")

	// Appends go on from the truncation point.
	if _, err := s.Apply("d", truncRecs(6, 6)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Truncate("d", 5); err != nil || n != 1 {
		t.Fatalf("second truncate: %d %v", n, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s, "after reopen")
	for _, sib := range []string{WALDir + ".new", WALDir + ".old"} {
		if _, err := os.Stat(filepath.Join(home, DatasetsDir, "d", sib)); !os.IsNotExist(err) {
			t.Fatalf("%s left behind: %v", sib, err)
		}
	}

	// A no-op: nothing above through.
	if n, err := s.Truncate("d", 5); err != nil || n != 0 {
		t.Fatalf("truncate at last seq: %d %v, want a no-op", n, err)
	}
	if n, err := s.Truncate("d", 99); err != nil || n != 0 {
		t.Fatalf("truncate above last seq: %d %v, want a no-op", n, err)
	}
	// New records after reopen, then compaction, still work.
	if _, err := s.Apply("d", truncRecs(6, 7)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Compact("d"); err != nil {
		t.Fatal(err)
	}
	if q := lastSeq(t, s); q != 7 {
		t.Fatalf("last seq %d, want 7", q)
	}
	if _, err := s.Info("N"); err != nil {
		t.Fatalf("N after re-applying seq 6: %v", err)
	}
}

func TestTruncateRefusesBelowSnapshot(t *testing.T) {
	home := cookHome(t)
	s, err := Open(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Apply("d", truncRecs(1, 5)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CompactThrough("d", 3); err != nil {
		t.Fatal(err)
	}
	n, err := s.Truncate("d", 2)
	if !errors.Is(err, ErrBelowSnapshot) || n != 0 {
		t.Fatalf("truncate below the snapshot: %d %v, want ErrBelowSnapshot", n, err)
	}
	if q := lastSeq(t, s); q != 5 {
		t.Fatalf("refused truncate changed last seq to %d", q)
	}
	// Exactly at the snapshot's seq drops every pending record.
	if n, err := s.Truncate("d", 3); err != nil || n != 2 {
		t.Fatalf("truncate at covers: %d %v, want 2", n, err)
	}
	if q := lastSeq(t, s); q != 3 {
		t.Fatalf("last seq %d, want 3", q)
	}
}

func TestTruncateRecoversInterruptedReplace(t *testing.T) {
	// A crash between the two renames of delta.WAL.Replace leaves wal.old
	// and a complete wal.new: the open rolls forward.
	home := cookHome(t)
	s, err := Open(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply("d", truncRecs(1, 5)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Truncate("d", 3); err != nil {
		t.Fatal(err)
	}
	s.Close()
	dsDir := filepath.Join(home, DatasetsDir, "d")
	wal := filepath.Join(dsDir, WALDir)
	if err := os.Rename(wal, wal+".new"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(wal+".old", 0o755); err != nil { // stands for the old log
		t.Fatal(err)
	}
	s, err = Open(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if q := lastSeq(t, s); q != 3 {
		t.Fatalf("last seq after roll-forward %d, want 3", q)
	}
	if _, err := os.Stat(wal + ".old"); !os.IsNotExist(err) {
		t.Fatalf("wal.old not removed: %v", err)
	}
}
