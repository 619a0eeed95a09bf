package localcache

import (
	"errors"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

func day(s string) int64 {
	t, err := time.Parse("2006-01-02", s)
	if err != nil {
		panic(err)
	}
	return t.Unix()
}

// cookHome publishes one dataset "d" with series A (daily, 3 points) and
// M (monthly, 2 points).
func cookHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	tb := &format.Table{Series: []format.SeriesMeta{{ID: "A", Frequency: format.Daily, Name: "a"}, {ID: "M", Frequency: format.Monthly}}}
	tb.Append(0, day("2026-11-01"), 1)
	tb.Append(0, day("2026-11-02"), 2)
	tb.Append(0, day("2026-11-03"), 3)
	tb.Append(1, day("2026-09-01"), 10)
	tb.Append(1, day("2026-10-01"), 11)
	dsDir := filepath.Join(home, DatasetsDir, "d")
	tmp, err := format.TempSnapshotDir(dsDir)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := format.Write(tmp, tb, format.WriteOptions{Dataset: "d", Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := format.Publish(dsDir, tmp, m); err != nil {
		t.Fatal(err)
	}
	return home
}

func getAll(t *testing.T, s *Store, id string) ([]int64, []float64) {
	t.Helper()
	p, v, err := s.Copy(id, snapshot.MinTime, snapshot.MaxTime)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return p, v
}

func TestApplyMergeCompactReopen(t *testing.T) {
	home := cookHome(t)
	s, err := Open(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	batch := []format.Record{
		{Seq: 1, Op: format.Upsert, SeriesID: "A", Period: day("2026-11-03") + 14*3600, Value: 30}, // revises 11-03
		{Seq: 2, Op: format.Delete, SeriesID: "A", Period: day("2026-11-01")},
		{Seq: 3, Op: format.Upsert, SeriesID: "A", Period: day("2026-11-04"), Value: 4},
		{Seq: 4, Op: format.Upsert, SeriesID: "M", Period: day("2026-11-17"), Value: 12}, // monthly -> 11-01
		{Seq: 5, Op: format.Upsert, SeriesID: "NEW", Period: day("2026-11-05"), Value: 7, Meta: &format.RecordMeta{Name: "new one", Frequency: format.Daily}},
	}
	if n, err := s.Apply("d", batch); err != nil || n != 5 {
		t.Fatalf("apply: %d %v", n, err)
	}
	if n, err := s.Apply("d", batch); err != nil || n != 0 {
		t.Fatalf("re-apply must be a no-op: %d %v", n, err)
	}
	check := func(s *Store) {
		t.Helper()
		p, v := getAll(t, s, "A")
		if len(p) != 3 || p[0] != day("2026-11-02") || v[1] != 30 || v[2] != 4 {
			t.Fatalf("A merged: %v %v", p, v)
		}
		p, v = getAll(t, s, "M")
		if len(p) != 3 || p[2] != day("2026-11-01") || v[2] != 12 {
			t.Fatalf("M merged: %v %v", p, v)
		}
		in, err := s.Info("NEW")
		if err != nil || in.Name != "new one" || in.Count != 1 || in.LatestValue != 7 {
			t.Fatalf("NEW info %+v %v", in, err)
		}
		per, val, err := s.Latest("A")
		if err != nil || per != day("2026-11-04") || val != 4 {
			t.Fatalf("latest A %v %v %v", per, val, err)
		}
	}
	check(s)
	// Bad input changes nothing.
	for _, bad := range [][]format.Record{
		{{Seq: 9, Op: format.Upsert, SeriesID: "A", Period: 0, Value: math.NaN()}},
		{{Seq: 9, Op: format.Upsert, SeriesID: "A"}, {Seq: 8, Op: format.Upsert, SeriesID: "A"}},
		{{Seq: 9, Op: 7, SeriesID: "A"}},
	} {
		if _, err := s.Apply("d", bad); !errors.Is(err, format.ErrBadRecord) {
			t.Fatalf("bad batch accepted: %v", err)
		}
	}
	if _, err := s.Apply("nope", batch); !errors.Is(err, ErrNoDataset) {
		t.Fatalf("unknown dataset: %v", err)
	}
	s.Close()

	// Reopen: the WAL replays.
	s, err = Open(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	check(s)
	m1, err := s.Compact("d")
	if err != nil {
		t.Fatal(err)
	}
	if m1.CoversThroughSeq != 5 {
		t.Fatalf("covers %d", m1.CoversThroughSeq)
	}
	check(s)
	if seq, _ := s.LastSeq("d"); seq != 5 {
		t.Fatalf("last seq %d", seq)
	}
	s.Close()
	s, err = Open(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s)
	st, _ := s.Status()
	if st[0].DeltaRecords != 0 || st[0].Manifest.SnapshotID != m1.SnapshotID {
		t.Fatalf("after compaction: %+v", st[0])
	}
}

func TestCompactionDeterministicAndInstall(t *testing.T) {
	batch := []format.Record{
		{Seq: 1, Op: format.Upsert, SeriesID: "A", Period: day("2026-11-04"), Value: 4},
		{Seq: 2, Op: format.Upsert, SeriesID: "Z", Period: day("2026-11-05"), Value: 5, Meta: &format.RecordMeta{Unit: "u"}},
	}
	var ids []string
	var stores []*Store
	for range 2 {
		s, err := Open(cookHome(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Apply("d", batch); err != nil {
			t.Fatal(err)
		}
		m, err := s.Compact("d")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.SnapshotID)
		stores = append(stores, s)
	}
	if ids[0] != ids[1] {
		t.Fatalf("compactions of the same base and delta differ: %v", ids)
	}

	// A third store that never saw the batch installs the compacted
	// snapshot, keeping its own later records.
	s3, err := Open(cookHome(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	later := []format.Record{{Seq: 3, Op: format.Upsert, SeriesID: "A", Period: day("2026-11-06"), Value: 6}}
	if _, err := s3.Apply("d", append(append([]format.Record{}, batch...), later...)); err != nil {
		t.Fatal(err)
	}
	st, _ := stores[0].Status()
	if _, err := s3.Install("d", st[0].Dir); err != nil {
		t.Fatal(err)
	}
	p, v := getAll(t, s3, "A")
	if len(p) != 5 || v[4] != 6 || v[3] != 4 {
		t.Fatalf("after install: %v %v", p, v)
	}
	if seq, _ := s3.LastSeq("d"); seq != 3 {
		t.Fatalf("seq after install %d", seq)
	}
	// A corrupt snapshot is refused and the old one keeps serving.
	bad := t.TempDir()
	for _, f := range []string{format.ManifestFile, format.DataFile, format.IndexFile, format.HashFile} {
		if err := copyFileSync(filepath.Join(st[0].Dir, f), filepath.Join(bad, f)); err != nil {
			t.Fatal(err)
		}
	}
	flipByte(t, filepath.Join(bad, format.DataFile), 200)
	if _, err := s3.Install("d", bad); err == nil {
		t.Fatal("corrupt snapshot installed")
	}
	if p2, _ := getAll(t, s3, "A"); len(p2) != 5 {
		t.Fatalf("store changed after refused install: %v", p2)
	}
}
