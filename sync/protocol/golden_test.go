package protocol

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

// goldenRecords is the fixed set of localcache/delta's golden test (kept byte-identical across the move of the codec to localcache/format): every
// field of the record encoding, both ops, with and without metadata.
func goldenRecords() []format.Record {
	return []format.Record{
		{Seq: 1, Op: format.Upsert, SeriesID: "A", Period: 0, Value: 1},
		{Seq: 2, Op: format.Upsert, SeriesID: "PET.RWTC.D", Period: 1700000000, Value: 71.5, Meta: &format.RecordMeta{Name: "WTI", Unit: "$/bbl", Source: "EIA", Frequency: format.Daily}},
		{Seq: 300, Op: format.Delete, SeriesID: "PET.RWTC.D", Period: 1700086400},
		{Seq: 70000, Op: format.Upsert, SeriesID: "Zürich/Ölpreis €", Period: -86400 * 365 * 50, Value: math.Copysign(0, -1), Meta: &format.RecordMeta{}},
		{Seq: 1 << 40, Op: format.Upsert, SeriesID: strings.Repeat("i", 200), Period: format.MinRecordPeriod, Value: math.SmallestNonzeroFloat64, Meta: &format.RecordMeta{Name: strings.Repeat("n", 130), Frequency: format.Hourly}},
		{Seq: 1<<40 + 1, Op: format.Upsert, SeriesID: "B", Period: format.MaxPeriod, Value: -math.MaxFloat64},
		{Seq: math.MaxUint64, Op: format.Delete, SeriesID: "B", Period: -1, Value: 0},
	}
}

// TestGoldenWire pins the bytes of a delta frame, a chunk frame and the
// chain of a subscription: peers of another build must read them the same.
func TestGoldenWire(t *testing.T) {
	recs := goldenRecords()
	var got []byte
	got = AppendDelta(got, &DeltaFrame{Dataset: "pet", Records: recs})
	got = AppendDelta(got, &DeltaFrame{Dataset: "a", Records: recs[:1]})
	var sum [32]byte
	for i := range sum {
		sum[i] = byte(i)
	}
	got = AppendChunk(got, &Chunk{SHA256: sum, Offset: 1 << 33, Data: []byte("chunk")})
	got = append(got, Chain("e1-s0-abc", recs)...)
	got = append(got, Chain("e1-s0-abc", recs[2:])...)

	path := filepath.Join("testdata", "golden.wire.hex")
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
		t.Errorf("wire encoding changed:\n got:\n%s\nwant:\n%s", hex.Dump(got), want)
	}
	v, err := DecodeBinary(AppendDelta(nil, &DeltaFrame{Dataset: "pet", Records: recs}))
	if err != nil {
		t.Fatal(err)
	}
	if d := v.(*DeltaFrame); len(d.Records) != len(recs) || d.Records[6].Seq != math.MaxUint64 || *d.Records[1].Meta != *recs[1].Meta {
		t.Errorf("decoded %+v", d)
	}
}
