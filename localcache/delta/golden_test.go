package delta

import (
	"encoding/hex"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata golden files")

// goldenRecords is a fixed set of records covering every field of the
// encoding: both ops, with and without metadata, empty and UTF-8 strings,
// negative and extreme periods, seqs and values of every varint width.
func goldenRecords() [][]format.Record {
	return [][]format.Record{
		{
			{Seq: 1, Op: format.Upsert, SeriesID: "A", Period: 0, Value: 1},
			{Seq: 2, Op: format.Upsert, SeriesID: "PET.RWTC.D", Period: 1700000000, Value: 71.5, Meta: &format.RecordMeta{Name: "WTI", Unit: "$/bbl", Source: "EIA", Frequency: format.Daily}},
			{Seq: 300, Op: format.Delete, SeriesID: "PET.RWTC.D", Period: 1700086400},
			{Seq: 70000, Op: format.Upsert, SeriesID: "Zürich/Ölpreis €", Period: -86400 * 365 * 50, Value: math.Copysign(0, -1), Meta: &format.RecordMeta{}},
		},
		{
			{Seq: 1 << 40, Op: format.Upsert, SeriesID: strings.Repeat("i", 200), Period: format.MinRecordPeriod, Value: math.SmallestNonzeroFloat64, Meta: &format.RecordMeta{Name: strings.Repeat("n", 130), Frequency: format.Hourly}},
			{Seq: 1<<40 + 1, Op: format.Upsert, SeriesID: "B", Period: format.MaxPeriod, Value: -math.MaxFloat64},
			{Seq: math.MaxUint64, Op: format.Delete, SeriesID: "B", Period: -1, Value: 0},
		},
	}
}

// compareGolden compares got with the hex in testdata/name (rewriting it
// under -update).
func compareGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.WriteFile(path, []byte(hex.Dump(got)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if hex.Dump(got) != string(want) {
		t.Errorf("%s: encoding changed:\n got:\n%s\nwant:\n%s", name, hex.Dump(got), want)
	}
}

// TestGoldenWAL pins the bytes of a write-ahead log segment: the log
// written by an old build must stay readable, byte for byte the same.
func TestGoldenWAL(t *testing.T) {
	dir := t.TempDir()
	w, recs, err := OpenWAL(dir, false, 0, nil)
	if err != nil || len(recs) != 0 {
		t.Fatalf("open: %v, %d records", err, len(recs))
	}
	for _, b := range goldenRecords() {
		if err := w.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 1 {
		t.Fatalf("want one segment, got %v (%v)", ents, err)
	}
	seg, err := os.ReadFile(filepath.Join(dir, ents[0].Name()))
	if err != nil {
		t.Fatal(err)
	}
	compareGolden(t, "golden.wal.hex", seg)

	w, recs, err = OpenWAL(dir, true, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var want []format.Record
	for _, b := range goldenRecords() {
		want = append(want, b...)
	}
	if len(recs) != len(want) {
		t.Fatalf("read back %d records, want %d", len(recs), len(want))
	}
	for i := range want {
		a, b := recs[i], want[i]
		if a.Seq != b.Seq || a.Op != b.Op || a.SeriesID != b.SeriesID || a.Period != b.Period ||
			math.Float64bits(a.Value) != math.Float64bits(b.Value) || (a.Meta == nil) != (b.Meta == nil) ||
			(a.Meta != nil && *a.Meta != *b.Meta) {
			t.Errorf("record %d: read %+v, wrote %+v", i, a, b)
		}
	}
}
