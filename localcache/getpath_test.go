package localcache

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// publishDataset cooks dataset name with one daily series per id, each
// with the points (day("2026-11-01")+i days, value base+i) for i < n.
func publishDataset(t *testing.T, home, name string, base float64, ids ...string) {
	t.Helper()
	tb := &format.Table{}
	for si, id := range ids {
		tb.Series = append(tb.Series, format.SeriesMeta{ID: id, Frequency: format.Daily})
		for i := range 3 {
			tb.Append(uint32(si), day("2026-11-01")+int64(i)*86400, base+float64(i))
		}
	}
	dir := filepath.Join(home, DatasetsDir, name)
	tmp, err := format.TempSnapshotDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := format.Write(tmp, tb, format.WriteOptions{Dataset: name, Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := format.Publish(dir, tmp, m); err != nil {
		t.Fatal(err)
	}
}

// TestGetAcrossDatasets: Get answers from the first dataset in name order
// that holds the series, in its snapshot or in its delta, whichever path
// answers (the plain one for an unchanged snapshot series, locate for the
// rest): a series only in "b"; a series "a"'s delta created that "b"'s
// snapshot also has (a's wins); a series of "a" with pending changes
// (merged); "b:id" naming the later dataset; a damaged "a" (the series of
// "b" still answer, one that only "a" has is not found with the damage).
func TestGetAcrossDatasets(t *testing.T) {
	home := t.TempDir()
	publishDataset(t, home, "a", 100, "A1", "A2")
	publishDataset(t, home, "b", 200, "A1", "B1", "N")
	s, err := Open(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Apply("a", []format.Record{
		{Seq: 1, Op: format.Upsert, SeriesID: "N", Period: day("2026-11-05"), Value: 7, Meta: &format.RecordMeta{Frequency: format.Daily}},
		{Seq: 2, Op: format.Upsert, SeriesID: "A2", Period: day("2026-11-02"), Value: 42},
	}); err != nil {
		t.Fatal(err)
	}
	type want struct {
		dataset string
		values  []float64
	}
	cases := map[string]want{
		"A1":   {"a", []float64{100, 101, 102}},
		"B1":   {"b", []float64{200, 201, 202}},
		"N":    {"a", []float64{7}},
		"A2":   {"a", []float64{100, 42, 102}},
		"b:A1": {"b", []float64{200, 201, 202}},
		"b:N":  {"b", []float64{200, 201, 202}},
	}
	check := func(ref string, w want) {
		t.Helper()
		r, err := s.Get(ref, snapshot.MinTime, snapshot.MaxTime)
		if err != nil {
			t.Fatalf("Get %s: %v", ref, err)
		}
		defer r.Release()
		if r.Dataset != w.dataset || r.Frequency != format.Daily || len(r.Points.Values) != len(w.values) {
			t.Fatalf("Get %s: dataset %s frequency %s values %v, want %s D %v", ref, r.Dataset, r.Frequency, r.Points.Values, w.dataset, w.values)
		}
		for i, v := range w.values {
			if r.Points.Values[i] != v {
				t.Fatalf("Get %s: values %v, want %v", ref, r.Points.Values, w.values)
			}
		}
	}
	for ref, w := range cases {
		check(ref, w)
	}
	if _, err := s.Get("nope", snapshot.MinTime, snapshot.MaxTime); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get nope: %v, want ErrNotFound", err)
	}

	da, err := s.Dataset("a")
	if err != nil {
		t.Fatal(err)
	}
	s.markDamaged(da, &format.CorruptionError{File: "test", Offset: -1, Err: errors.New("damaged by the test")})
	check("A1", cases["b:A1"])
	check("B1", cases["B1"])
	_, err = s.Get("A2", snapshot.MinTime, snapshot.MaxTime)
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, ErrDamaged) {
		t.Fatalf("Get A2 with a damaged: %v, want ErrNotFound and ErrDamaged", err)
	}
	for _, name := range []string{"a", "b"} {
		d, _ := s.Dataset(name)
		if rs := d.cur.Load(); rs != nil && rs.snap.Refs() != 1 {
			t.Fatalf("dataset %s: %d snapshot references after the reads, want the store's 1", name, rs.snap.Refs())
		}
	}
}
