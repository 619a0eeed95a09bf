package localcache

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
)

// TestCompactSortedMatchesWrite holds the compaction path (foldSorted +
// format.WriteSorted, which copies the base's columns) against a fresh
// format.Write of the folded table (foldTable): every file must be
// identical byte for byte, whatever the batches did (revisions, deletes,
// new series of any frequency, an intraday series turning the snapshot
// into timestamps, cold series, renames).
func TestCompactSortedMatchesWrite(t *testing.T) {
	for _, tail := range []*format.TailRule{nil, format.TailList("M", "Old")} {
		for seed := uint64(1); seed <= 4; seed++ {
			rng := rand.New(rand.NewPCG(seed, 99))
			home := liveTempDir(t)
			base := liveMetaBase(rng)
			liveCook(t, home, "d", base, format.WriteOptions{Epoch: 1, Tail: tail})
			s := liveOpen(t, home, &Options{CompactRows: -1, CompactBytes: -1})
			model := liveModelOf(base)
			gen := &liveMetaGen{rng: rng, m: model}
			for round := range 8 {
				for range 1 + rng.IntN(6) {
					b := gen.batch()
					if _, err := s.Apply("d", b); err != nil {
						t.Fatal(err)
					}
					model.apply(b)
				}
				liveSameAsWrite(t, s, "d")
				if rng.IntN(2) == 0 || round == 7 {
					if _, err := s.Compact("d"); err != nil {
						t.Fatalf("seed %d round %d: compact: %v", seed, round, err)
					}
					if err := liveCheck(s, model, rng); err != nil {
						t.Fatalf("seed %d round %d: after compaction: %v", seed, round, err)
					}
				}
			}
			s.Close()
		}
	}
}

// liveSameAsWrite folds the dataset's current base + delta both ways and
// compares the files.
func liveSameAsWrite(t *testing.T, s *Store, dataset string) {
	t.Helper()
	d, err := s.Dataset(dataset)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := d.acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.snap.Unref()
	pending, last := rs.delta.Snapshot()
	o := format.WriteOptions{Dataset: dataset, Epoch: 3, CoversThroughSeq: last, Created: time.Unix(1e9, 0), BatchRows: 50}
	dir := t.TempDir()
	st, err := foldSorted(rs.snap, pending)
	if err != nil {
		t.Fatal(err)
	}
	ft, err := foldTable(rs.snap, pending)
	if err != nil {
		t.Fatal(err)
	}
	ma, _, err := format.WriteSorted(filepath.Join(dir, "sorted"), st, o)
	if err != nil {
		t.Fatalf("write sorted: %v", err)
	}
	mb, _, err := format.Write(filepath.Join(dir, "fresh"), ft, o)
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	if ma.SnapshotID != mb.SnapshotID || len(ma.Files) != len(mb.Files) {
		t.Fatalf("sorted write gives %s with %d files, fresh write %s with %d", ma.SnapshotID, len(ma.Files), mb.SnapshotID, len(mb.Files))
	}
	for _, f := range append([]format.FileInfo{{Name: format.ManifestFile}}, mb.Files...) {
		a, err := os.ReadFile(filepath.Join(dir, "sorted", f.Name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "fresh", f.Name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("%s differs between the sorted and the fresh write", f.Name)
		}
	}
}

// TestWriteSortedRefuses: a table that is not in sorted, normalized form
// is refused with ErrNotSorted and nothing is written.
func TestWriteSortedRefuses(t *testing.T) {
	day := liveDay("2026-01-05")
	cases := map[string]func(*format.SortedTable){
		"ids out of order": func(st *format.SortedTable) {
			st.AddSeries(format.SeriesMeta{ID: "B", Frequency: format.Daily})
			st.AddSeries(format.SeriesMeta{ID: "A", Frequency: format.Daily})
		},
		"periods out of order": func(st *format.SortedTable) {
			st.AddSeries(format.SeriesMeta{ID: "A", Frequency: format.Daily})
			st.Append(day+86400, 1)
			st.Append(day, 2)
		},
		"not normalized": func(st *format.SortedTable) {
			st.AddSeries(format.SeriesMeta{ID: "A", Frequency: format.Monthly})
			st.Append(day, 1)
		},
		"intraday in date32": func(st *format.SortedTable) {
			st.AddSeries(format.SeriesMeta{ID: "A", Frequency: format.Hourly})
		},
		"no frequency": func(st *format.SortedTable) {
			st.AddSeries(format.SeriesMeta{ID: "A"})
		},
	}
	for name, fill := range cases {
		st := format.NewSortedTable(format.PeriodDate32, 2, 2)
		fill(st)
		dir := filepath.Join(t.TempDir(), "s")
		if _, _, err := format.WriteSorted(dir, st, format.WriteOptions{Dataset: "d"}); !errors.Is(err, format.ErrNotSorted) {
			t.Errorf("%s: got %v, want ErrNotSorted", name, err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s: the directory was created", name)
		}
	}
}
