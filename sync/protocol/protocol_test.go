package protocol

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/format"
)

func TestBinaryRoundTrip(t *testing.T) {
	recs := []Record{
		{Seq: 7, Op: delta.Upsert, SeriesID: "PET.RWTC.D", Period: 1700000000, Value: 71.5, Meta: &delta.Meta{Name: "WTI", Unit: "$/bbl", Frequency: format.Daily}},
		{Seq: 8, Op: delta.Delete, SeriesID: "PET.RWTC.D", Period: 1700086400},
	}
	v, err := DecodeBinary(AppendDelta(nil, &DeltaFrame{Dataset: "pet", Records: recs}))
	if err != nil {
		t.Fatal(err)
	}
	if got := v.(*DeltaFrame); got.Dataset != "pet" || !reflect.DeepEqual(got.Records, recs) {
		t.Fatalf("delta round trip: %+v", got)
	}
	c := &Chunk{Offset: 4 << 20, Data: []byte("hello")}
	c.SHA256[0] = 0xab
	v, err = DecodeBinary(AppendChunk(nil, c))
	if err != nil {
		t.Fatal(err)
	}
	if got := v.(*Chunk); got.Offset != c.Offset || got.SHA256 != c.SHA256 || !bytes.Equal(got.Data, c.Data) {
		t.Fatalf("chunk round trip: %+v", got)
	}
}

func TestDecodeRefuses(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":           nil,
		"unknown kind":    {9, 1, 2},
		"short chunk":     {KindChunk, 1, 2, 3},
		"bad dataset":     append([]byte{KindDelta, 3}, "../"...),
		"empty delta":     AppendDelta(nil, &DeltaFrame{Dataset: "pet"}),
		"descending seqs": AppendDelta(nil, &DeltaFrame{Dataset: "pet", Records: []Record{{Seq: 2, Op: delta.Upsert, SeriesID: "a"}, {Seq: 1, Op: delta.Upsert, SeriesID: "a"}}}),
	} {
		if _, err := DecodeBinary(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: accepted (%v)", name, err)
		}
	}
	for name, s := range map[string]string{
		"not json":     "{",
		"unknown type": `{"type":"launch"}`,
		"bad proto":    `{"type":"hello","proto":[2,1]}`,
		"bad dataset":  `{"type":"subscribe","subs":[{"dataset":"../etc"}]}`,
		"bad fetch":    `{"type":"fetch","dataset":"pet","file":"data.arrow","sha256":"x","offset":0}`,
		"no manifest":  `{"type":"snapshot","dataset":"pet"}`,
	} {
		if _, err := DecodeMessage([]byte(s)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: accepted (%v)", name, err)
		}
	}
}

func TestSplitRecords(t *testing.T) {
	recs := make([]Record, 100_000)
	for i := range recs {
		recs[i] = Record{Seq: uint64(i + 1), Op: delta.Upsert, SeriesID: "NG.N3010US3.M", Value: float64(i)}
	}
	n := 0
	for _, g := range SplitRecords(recs) {
		if b := AppendDelta(nil, &DeltaFrame{Dataset: "ng", Records: g}); len(b) > MaxDeltaBytes+64 {
			t.Fatalf("group of %d records encodes to %d bytes", len(g), len(b))
		}
		n += len(g)
	}
	if n != len(recs) {
		t.Fatalf("split lost records: %d of %d", n, len(recs))
	}
}

func FuzzDecodeMessage(f *testing.F) {
	f.Add([]byte(`{"type":"hello","proto":[1,1],"client":"x","subs":[{"dataset":"pet","epoch":1,"snapshot":"e1-s0-000000000000","seq":3}]}`))
	f.Add([]byte(`{"type":"fetch","dataset":"pet","file":"data.arrow","sha256":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","offset":4194304}`))
	f.Add([]byte(`{"type":"catchup_end","dataset":"pet","seq":9}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessage(b)
		if err != nil {
			return
		}
		if _, err := DecodeMessage(m.Encode()); err != nil && m.Type != TSnapshot {
			t.Fatalf("re-encoded %s does not decode: %v", m.Type, err)
		}
	})
}

func FuzzDecodeBinary(f *testing.F) {
	f.Add(AppendDelta(nil, &DeltaFrame{Dataset: "pet", Records: []Record{{Seq: 1, Op: delta.Upsert, SeriesID: "a", Value: 1}}}))
	f.Add(AppendChunk(nil, &Chunk{Offset: 3, Data: []byte("xyz")}))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := DecodeBinary(b)
		if err != nil {
			return
		}
		switch x := v.(type) {
		case *DeltaFrame:
			if _, err := DecodeBinary(AppendDelta(nil, x)); err != nil {
				t.Fatalf("re-encoded delta does not decode: %v", err)
			}
		case *Chunk:
			if len(x.Data) > MaxChunk {
				t.Fatal("oversized chunk accepted")
			}
		}
	})
}
