package localcache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// TestCompactSortedMatchesWrite holds compaction's fold (folding, written
// by format.WriteSorted, which copies the base's columns, and by
// format.Write) against a fresh format.Write of a reference fold
// (refFoldTable): every file must be
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
	f := newFolding(rs.snap, pending)
	st, err := f.sorted()
	if err != nil {
		t.Fatal(err)
	}
	ft, err := f.table()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := refFoldTable(rs.snap, pending)
	if err != nil {
		t.Fatal(err)
	}
	ms, _, err := format.WriteSorted(filepath.Join(dir, "sorted"), st, o)
	if err != nil {
		t.Fatalf("write sorted: %v", err)
	}
	if _, _, err := format.Write(filepath.Join(dir, "table"), ft, o); err != nil {
		t.Fatalf("write: %v", err)
	}
	mr, _, err := format.Write(filepath.Join(dir, "ref"), ref, o)
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	sameFiles(t, filepath.Join(dir, "ref"), mr, filepath.Join(dir, "sorted"), ms)
	sameFiles(t, filepath.Join(dir, "ref"), mr, filepath.Join(dir, "table"), ms)
}

// sameFiles fails unless the snapshots in dirs a and b have the same id
// and the same bytes in every file, the manifest included.
func sameFiles(t *testing.T, a string, ma *format.Manifest, b string, mb *format.Manifest) {
	t.Helper()
	if ma.SnapshotID != mb.SnapshotID || len(ma.Files) != len(mb.Files) {
		t.Fatalf("%s gives %s with %d files, %s gives %s with %d", filepath.Base(a), ma.SnapshotID, len(ma.Files), filepath.Base(b), mb.SnapshotID, len(mb.Files))
	}
	for _, f := range append([]format.FileInfo{{Name: format.ManifestFile}}, ma.Files...) {
		x, err := os.ReadFile(filepath.Join(a, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Fatalf("%s differs between %s and %s", f.Name, filepath.Base(a), filepath.Base(b))
		}
	}
}

// refFoldTable is the reference fold, independent of folding (it was
// compaction's second fold path before there was one): every base series
// in index row order, its points merged with the delta's and its
// metadata overridden, then every series only the delta has; format.Write
// sorts and normalizes the result.
func refFoldTable(snap *snapshot.Snapshot, pending map[string]*delta.Series) (*format.Table, error) {
	t := &format.Table{}
	add := func(meta format.SeriesMeta, pts snapshot.Points) {
		si := uint32(len(t.Series))
		t.Series = append(t.Series, meta)
		for i := 0; i < pts.Len(); i++ {
			t.SeriesIdx = append(t.SeriesIdx, si)
			t.Period = append(t.Period, pts.Unix(i))
		}
		t.Value = append(t.Value, pts.Values...)
	}
	for row := uint32(0); row < uint32(snap.NumSeries()); row++ {
		in := snap.Info(row)
		meta := format.SeriesMeta{ID: in.ID, Name: in.Name, Unit: in.Unit, Source: in.Source, Frequency: snap.Frequency(row), Tier: in.Tier}
		pts, err := snap.Get(row, snapshot.MinTime, snapshot.MaxTime)
		if err != nil {
			return nil, err
		}
		if p := pending[in.ID]; p != nil {
			if p.Meta != nil {
				meta.Name, meta.Unit, meta.Source = p.Meta.Name, p.Meta.Unit, p.Meta.Source
			}
			pts = mergePoints(pts, p.Points)
		}
		add(meta, pts)
	}
	for id, p := range pending {
		if _, ok := snap.Lookup(id); ok {
			continue
		}
		meta := format.SeriesMeta{ID: id, Frequency: p.Freq}
		if p.Meta != nil {
			meta.Name, meta.Unit, meta.Source = p.Meta.Name, p.Meta.Unit, p.Meta.Source
		}
		add(meta, mergePoints(snapshot.Points{}, p.Points))
	}
	return t, nil
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

// TestCompactUnsortedBase: a base whose columns are not in the form
// Write gives them (here its series are monthly by the index while their
// points are daily, as a snapshot written under another normalization
// would be) is refused by WriteSorted; compaction folds it through the
// same fold into Write, which sorts and normalizes, and gives exactly the
// snapshot the reference fold gives.
func TestCompactUnsortedBase(t *testing.T) {
	home := liveTempDir(t)
	tb := &format.Table{}
	day0 := liveDay("2026-01-05")
	for s := range 5 {
		tb.Series = append(tb.Series, format.SeriesMeta{ID: fmt.Sprintf("S%d", s), Name: "n", Frequency: format.Daily})
		for p := range 90 {
			tb.Append(uint32(s), day0+int64(p)*86400, float64(s*1000+p))
		}
	}
	// Format version 3: the hot records are rewritten below in its layout.
	m := liveCook(t, home, "d", tb, format.WriteOptions{Epoch: 1, Version: 3})
	// Every series monthly in index.arrow: the frequency column's bytes
	// are the five "D"s in a row.
	idx := filepath.Join(home, DatasetsDir, "d", format.SnapshotsDir, m.SnapshotID, format.IndexFile)
	b, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b, []byte("DDDDD"))
	if at < 0 || bytes.Count(b, []byte("DDDDD")) != 1 {
		t.Fatalf("the frequency column is not one run of D in %s", format.IndexFile)
	}
	copy(b[at:], "MMMMM")
	if err := os.WriteFile(idx, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// And in index.hash's hot records (format v3, FORMAT.md), whose
	// checksums are recomputed: frequency code 4 (M) at byte 13 of each.
	hf := filepath.Join(filepath.Dir(idx), format.HashFile)
	h, err := os.ReadFile(hf)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	if le.Uint32(h[8:]) != 3 || le.Uint32(h[16:]) != 5 {
		t.Fatalf("%s: version %d with %d series, want version 3 with 5", format.HashFile, le.Uint32(h[8:]), le.Uint32(h[16:]))
	}
	stride := int(le.Uint32(h[36:])) // version 3: the record's size
	batchAt := 64 + 8<<le.Uint32(h[12:])
	recAt := (batchAt + 24*int(le.Uint32(h[24:])) + 63) &^ 63
	for i := range 5 {
		if h[recAt+stride*i+13] != 2 {
			t.Fatalf("hot record %d: frequency code %d, want 2 (D)", i, h[recAt+stride*i+13])
		}
		h[recAt+stride*i+13] = 4
	}
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	le.PutUint32(h[28:], crc32.Checksum(h[batchAt:], castagnoli))
	le.PutUint32(h[60:], crc32.Checksum(h[:60], castagnoli))
	if err := os.WriteFile(hf, h, 0o644); err != nil {
		t.Fatal(err)
	}
	s := liveOpen(t, home, &Options{CompactRows: -1, CompactBytes: -1, ScrubBytesPerSec: -1})
	defer s.Close()
	if _, err := s.Apply("d", []format.Record{
		{Seq: 1, Op: format.Upsert, SeriesID: "S1", Period: day0 + 40*86400, Value: -1},
		{Seq: 2, Op: format.Delete, SeriesID: "S2", Period: day0},
		{Seq: 3, Op: format.Upsert, SeriesID: "S10", Period: day0, Value: 7, Meta: &format.RecordMeta{Frequency: format.Daily}},
	}); err != nil {
		t.Fatal(err)
	}

	d, err := s.Dataset("d")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := d.acquire()
	if err != nil {
		t.Fatal(err)
	}
	pending, last := rs.delta.Snapshot()
	o := format.WriteOptions{Dataset: "d", Epoch: 1, CoversThroughSeq: last}
	st, err := newFolding(rs.snap, pending).sorted()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := format.WriteSorted(filepath.Join(t.TempDir(), "s"), st, o); !errors.Is(err, format.ErrNotSorted) {
		t.Fatalf("WriteSorted of the unsorted base: %v, want ErrNotSorted", err)
	}
	ref, err := refFoldTable(rs.snap, pending)
	if err != nil {
		t.Fatal(err)
	}
	rs.snap.Unref()
	refDir := filepath.Join(t.TempDir(), "ref")
	mr, _, err := format.Write(refDir, ref, o)
	if err != nil {
		t.Fatal(err)
	}

	mc, err := s.Compact("d")
	if err != nil {
		t.Fatal(err)
	}
	if mc.SnapshotID != mr.SnapshotID {
		t.Fatalf("compaction of the unsorted base gave %s, the reference fold %s", mc.SnapshotID, mr.SnapshotID)
	}
	for _, f := range mr.Files {
		x, _ := os.ReadFile(filepath.Join(refDir, f.Name))
		y, _ := os.ReadFile(filepath.Join(home, DatasetsDir, "d", format.SnapshotsDir, mc.SnapshotID, f.Name))
		if !bytes.Equal(x, y) {
			t.Fatalf("%s differs from the reference fold's", f.Name)
		}
	}
	// Write normalized the monthly series: one point a month, the last.
	p, v, err := s.Copy("S3", snapshot.MinTime, snapshot.MaxTime)
	// Jan 5 .. Apr 4: the last day of each month in the base.
	if err != nil || !slices.Equal(v, []float64{3026, 3054, 3085, 3089}) || len(p) != 4 || p[0] != liveDay("2026-01-01") {
		t.Fatalf("S3 after compaction: %v %v %v", p, v, err)
	}
}
