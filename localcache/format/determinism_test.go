package format

import (
	"bytes"
	"encoding/json"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

var cookedFiles = []string{DataFile, IndexFile, HashFile}

// assertSameCook checks that two snapshot directories hold byte-identical
// cooked files, agree on their SHA-256 and get the same snapshot id.
func assertSameCook(t *testing.T, dirA string, a *Manifest, dirB string, b *Manifest) {
	t.Helper()
	for _, name := range cookedFiles {
		if !bytes.Equal(readFile(t, dirA, name), readFile(t, dirB, name)) {
			t.Errorf("%s differs between the two cooks", name)
		}
		if fa, fb := a.File(name), b.File(name); fa.SHA256 != fb.SHA256 || fa.Size != fb.Size {
			t.Errorf("%s: manifest entries differ: %+v vs %+v", name, fa, fb)
		}
	}
	if a.SnapshotID != b.SnapshotID {
		t.Errorf("snapshot ids differ: %s vs %s", a.SnapshotID, b.SnapshotID)
	}
}

func shuffled(rng *rand.Rand, tb *Table) *Table {
	out := &Table{Series: tb.Series}
	for _, i := range rng.Perm(tb.Len()) {
		out.Append(tb.SeriesIdx[i], tb.Period[i], tb.Value[i])
	}
	return out
}

func TestDeterministicCook(t *testing.T) {
	for _, c := range []struct {
		name   string
		seed   uint64
		hourly bool
		batch  int
	}{
		{"date32", 1, false, 0},
		{"timestamp", 2, true, 0},
		{"many batches", 3, false, 40},
		{"many batches timestamp", 4, true, 40},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(c.seed, 0))
			tb := randomTable(rng, 60, 50, c.hourly)
			// Created is the one wall-clock field: it must not matter.
			dirA, a := writeSnap(t, tb, WriteOptions{Epoch: 3, CoversThroughSeq: 9, BatchRows: c.batch, Created: time.Unix(1, 0)})
			dirB, b := writeSnap(t, tb, WriteOptions{Epoch: 3, CoversThroughSeq: 9, BatchRows: c.batch, Created: time.Unix(2e9, 0)})
			assertSameCook(t, dirA, a, dirB, b)
			if c.batch > 0 && a.Batches < 5 {
				t.Errorf("expected several batches, got %d", a.Batches)
			}

			// Without duplicates the input order does not matter either,
			// nor does the order of the series table.
			sh := shuffled(rng, tb)
			perm := rng.Perm(len(sh.Series))
			sh2 := &Table{Series: make([]SeriesMeta, len(sh.Series))}
			for old, nw := range perm {
				sh2.Series[nw] = sh.Series[old]
			}
			for i := range sh.Len() {
				sh2.Append(uint32(perm[sh.SeriesIdx[i]]), sh.Period[i], sh.Value[i])
			}
			dirC, cm := writeSnap(t, sh2, WriteOptions{Epoch: 3, CoversThroughSeq: 9, BatchRows: c.batch})
			assertSameCook(t, dirA, a, dirC, cm)

			// The id names epoch and sequence; the files do not depend on them.
			dirD, d := writeSnap(t, tb, WriteOptions{Epoch: 4, CoversThroughSeq: 10, BatchRows: c.batch})
			for _, name := range cookedFiles {
				if !bytes.Equal(readFile(t, dirA, name), readFile(t, dirD, name)) {
					t.Errorf("%s depends on epoch/seq", name)
				}
			}
			if d.SnapshotID == a.SnapshotID || d.SnapshotID[:7] != "e4-s10-" {
				t.Errorf("snapshot id %s (other cook %s)", d.SnapshotID, a.SnapshotID)
			}

			// One changed value changes the data file and the id.
			tb2 := &Table{Series: tb.Series, SeriesIdx: tb.SeriesIdx, Period: tb.Period, Value: append([]float64(nil), tb.Value...)}
			tb2.Value[len(tb2.Value)/2] += 0.5
			_, e := writeSnap(t, tb2, WriteOptions{Epoch: 3, CoversThroughSeq: 9, BatchRows: c.batch})
			if e.SnapshotID == a.SnapshotID || e.File(DataFile).SHA256 == a.File(DataFile).SHA256 {
				t.Errorf("a changed value kept snapshot id %s", e.SnapshotID)
			}
		})
	}
}

// With duplicates, shuffling changes which row wins; cooking the same rows
// in the same order twice still agrees byte for byte.
func TestDeterministicCookWithDuplicates(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 0))
	tb := randomTable(rng, 20, 30, false)
	for i := range tb.Len() / 3 {
		tb.Append(tb.SeriesIdx[i], tb.Period[i]+3600, float64(i)) // same bucket except for hourly
	}
	dirA, a := writeSnap(t, tb, WriteOptions{})
	dirB, b := writeSnap(t, tb, WriteOptions{})
	assertSameCook(t, dirA, a, dirB, b)
	if a.Duplicates == 0 {
		t.Fatal("expected duplicates")
	}
}

type golden struct {
	SnapshotID string            `json:"snapshot_id"`
	Files      map[string]string `json:"sha256"`
}

// TestGoldenCook pins the bytes of a small cook. Clients prove by SHA-256
// that their local compaction produced the server's snapshot, so a change
// here (a new arrow-go version, a writer change) breaks that proof across
// versions and must be deliberate: rerun with -update and bump the format
// version if readers are affected.
func TestGoldenCook(t *testing.T) {
	// Format version 1 is still written byte for byte as before version 2
	// (a companion can reproduce a version 1 server's snapshot).
	for _, c := range []struct {
		file    string
		hourly  bool
		version int
		tail    bool // the first and third series in the cold tier
	}{
		{"golden_date32.json", false, 1, false}, {"golden_timestamp.json", true, 1, false},
		{"golden_v2_date32.json", false, 2, false}, {"golden_v2_timestamp.json", true, 2, false},
		{"golden_v3_date32.json", false, 3, false}, {"golden_v3_timestamp.json", true, 3, false},
		{"golden_v4_date32.json", false, 4, false}, {"golden_v4_timestamp.json", true, 4, false},
		{"golden_v5_date32.json", false, 5, false}, {"golden_v5_timestamp.json", true, 5, false},
		// tail.parquet's bytes (written by tailwrite through the hook).
		{"golden_tail_date32.json", false, 2, true}, {"golden_tail_timestamp.json", true, 2, true},
	} {
		t.Run(c.file, func(t *testing.T) {
			tb := goldenTable(c.hourly)
			o := WriteOptions{Epoch: 1, BatchRows: 64, Version: c.version}
			if c.tail {
				o.Tail = TailList(tb.Series[0].ID, tb.Series[2].ID)
			}
			_, m := writeSnap(t, tb, o)
			if m.Version != c.version {
				t.Fatalf("manifest version %d, want %d", m.Version, c.version)
			}
			got := golden{SnapshotID: m.SnapshotID, Files: map[string]string{}}
			for _, f := range m.Files {
				got.Files[f.Name] = f.SHA256
			}
			path := filepath.Join("testdata", c.file)
			if *update {
				b, _ := json.MarshalIndent(got, "", "  ")
				if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			var want golden
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			if got.SnapshotID != want.SnapshotID {
				t.Errorf("snapshot id %s, golden %s", got.SnapshotID, want.SnapshotID)
			}
			for name, sum := range want.Files {
				if got.Files[name] != sum {
					t.Errorf("%s: sha256 %s, golden %s", name, got.Files[name], sum)
				}
			}
		})
	}
}

// goldenTable is a fixed table built without a random generator, so that
// its bytes do not depend on math/rand's algorithms.
func goldenTable(hourly bool) *Table {
	ids := []string{"PET.RWTC.D", "PET.RBRTE.M", "ELEC.GEN.ALL-US-99.A", "Zürich.temp", "東京.load", "a", "ab", "abc", "empty"}
	freqs := []Frequency{Daily, Monthly, Annual, Weekly, Quarterly, Daily, Monthly, Annual, Daily}
	if hourly {
		freqs[3] = Hourly
	}
	tb := &Table{}
	for i, id := range ids {
		tb.Series = append(tb.Series, SeriesMeta{ID: id, Name: "Series " + id, Unit: "u" + id[:1], Source: "golden", Frequency: freqs[i]})
		if id == "empty" {
			continue
		}
		p := ts("2001-01-01T00:00:00Z") + int64(i)*86400
		for k := range 7 + 3*i {
			tb.Append(uint32(i), p, float64(k*k)/4-float64(i))
			p = nextPeriod(freqs[i], freqs[i].Normalize(p))
		}
	}
	return tb
}
