package format

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func day(s string) int64 {
	t, err := time.Parse("2006-01-02", s)
	if err != nil {
		panic(err)
	}
	return t.Unix()
}

func TestWriteAndRead(t *testing.T) {
	tb := &Table{Series: []SeriesMeta{{ID: "B", Name: "bee", Unit: "$"}, {ID: "A", Frequency: Monthly}}}
	tb.Append(0, day("2020-01-02"), 1)
	tb.Append(1, day("2020-02-15"), 20)
	tb.Append(0, day("2020-01-01"), 2)
	tb.Append(1, day("2020-01-03"), 10)
	tb.Append(1, day("2020-01-20"), 11) // same month as 2020-01-03: last wins
	dir := filepath.Join(t.TempDir(), "s")
	m, st, err := Write(dir, tb, WriteOptions{Dataset: "t", Created: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if st.Duplicates != 1 || m.Rows != 4 || m.Series != 2 || m.PeriodType != PeriodDate32 {
		t.Fatalf("stats %+v manifest %+v", st, m)
	}
	if _, err := Verify(dir); err != nil {
		t.Fatal(err)
	}
	ib, _ := os.ReadFile(filepath.Join(dir, IndexFile))
	x, err := OpenIndex(ib, m.PeriodType, m.Series)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if x.ID(0) != "A" || x.ID(1) != "B" || x.Name(1) != "bee" || x.Frequency(1) != Daily || x.Length[0] != 2 {
		t.Fatalf("index: %q %q %q %q %d", x.ID(0), x.ID(1), x.Name(1), x.Frequency(1), x.Length[0])
	}
	if x.First(0) != day("2020-01-01") || x.Latest[0] != 20 {
		t.Fatalf("A first %d latest %v", x.First(0), x.Latest[0])
	}
	db, _ := os.ReadFile(filepath.Join(dir, DataFile))
	d, err := OpenData(db, m.PeriodType, m.Batches)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b, err := d.Batch(0)
	if err != nil {
		t.Fatal(err)
	}
	if b.Values[0] != 11 || b.Values[1] != 20 || b.Values[2] != 2 || b.Values[3] != 1 {
		t.Fatalf("values %v", b.Values)
	}
}

func TestWriteCanonicalFrequency(t *testing.T) {
	tb := &Table{Series: []SeriesMeta{{ID: "X", Frequency: "daily"}}}
	tb.Append(0, day("2020-01-17"), 1)
	dir := filepath.Join(t.TempDir(), "s")
	m, _, err := Write(dir, tb, WriteOptions{Dataset: "t", Created: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	ib, _ := os.ReadFile(filepath.Join(dir, IndexFile))
	x, err := OpenIndex(ib, m.PeriodType, m.Series)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if x.Frequency(0) != Daily || x.First(0) != day("2020-01-17") {
		t.Fatalf("frequency %q first %d: a spelled-out frequency must normalize as its code", x.Frequency(0), x.First(0))
	}
}
