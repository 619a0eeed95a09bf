package protocol

import (
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
)

// BenchmarkDeltaFrame encodes and decodes a delta frame of 1,000 live
// records (what the hub sends and a companion reads): with version 2's
// CRC-32C it must cost at most 5% more than without.
func BenchmarkDeltaFrame(b *testing.B) {
	recs := make([]format.Record, 1000)
	for i := range recs {
		recs[i] = format.Record{Seq: uint64(i + 1), Op: format.Upsert, SeriesID: "PET.RWTC.D", Period: 1700000000 + int64(i)*86400, Value: float64(i)}
	}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendDelta(buf[:0], &DeltaFrame{Dataset: "pet", Records: recs})
		if _, err := DecodeBinary(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkControlMessage encodes and decodes an ack (the most frequent
// control message).
func BenchmarkControlMessage(b *testing.B) {
	m := &Message{Type: TAck, Dataset: "pet", Seq: 123456789}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeMessage(m.Encode()); err != nil {
			b.Fatal(err)
		}
	}
}
