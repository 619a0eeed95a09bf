package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
)

func TestBinaryRoundTrip(t *testing.T) {
	recs := []format.Record{
		{Seq: 7, Op: format.Upsert, SeriesID: "PET.RWTC.D", Period: 1700000000, Value: 71.5, Meta: &format.RecordMeta{Name: "WTI", Unit: "$/bbl", Frequency: format.Daily}},
		{Seq: 8, Op: format.Delete, SeriesID: "PET.RWTC.D", Period: 1700086400},
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
		"descending seqs": AppendDelta(nil, &DeltaFrame{Dataset: "pet", Records: []format.Record{{Seq: 2, Op: format.Upsert, SeriesID: "a"}, {Seq: 1, Op: format.Upsert, SeriesID: "a"}}}),
	} {
		if _, err := DecodeBinary(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: accepted (%v)", name, err)
		}
	}
	for name, s := range map[string]string{
		"not json":     `{"type":}`,
		"unknown type": `{"type":"launch"}`,
		"bad proto":    `{"type":"hello","proto":[2,1]}`,
		"bad dataset":  `{"type":"subscribe","subs":[{"dataset":"../etc"}]}`,
		"bad fetch":    `{"type":"fetch","dataset":"pet","file":"data.arrow","sha256":"x","offset":0}`,
		"no manifest":  `{"type":"snapshot","dataset":"pet"}`,
	} {
		_, err := DecodeMessage(SealControl([]byte(s)))
		if !errors.Is(err, ErrMalformed) || errors.Is(err, ErrChecksum) {
			t.Errorf("%s: %v, want malformed (past the checksum)", name, err)
		}
	}
}

// TestChecksums: a flipped bit anywhere in a control message or a delta
// frame is refused with ErrChecksum before anything is decoded; a control
// message without a checksum (protocol version 1) with ErrNoChecksum, and
// DecodeUnverified still reads it (to answer a version 1 peer).
func TestChecksums(t *testing.T) {
	msg := (&Message{Type: TAck, Dataset: "pet", Seq: 42}).Encode()
	for i := range msg {
		b := bytes.Clone(msg)
		b[i] ^= 0x04
		if m, err := DecodeMessage(b); !errors.Is(err, ErrMalformed) {
			t.Fatalf("control message with byte %d flipped decoded as %+v", i, m)
		}
	}
	if m, err := DecodeMessage(msg); err != nil || m.Seq != 42 {
		t.Fatalf("intact message: %+v %v", m, err)
	}
	v1 := (&Message{Type: THello, Proto: []int{1, 1}}).EncodeUnverified()
	if _, err := DecodeMessage(v1); !errors.Is(err, ErrNoChecksum) || !errors.Is(err, ErrChecksum) {
		t.Fatalf("version 1 hello: %v, want ErrNoChecksum", err)
	}
	if m, err := DecodeUnverified(v1); err != nil || m.Proto[1] != 1 {
		t.Fatalf("DecodeUnverified of a version 1 hello: %+v %v", m, err)
	}
	frame := AppendDelta(nil, &DeltaFrame{Dataset: "pet", Records: []format.Record{{Seq: 7, Op: format.Upsert, SeriesID: "a", Period: 1700000000, Value: 71.5}}})
	for i := 1; i < len(frame); i++ {
		b := bytes.Clone(frame)
		b[i] ^= 0x10
		if v, err := DecodeBinary(b); !errors.Is(err, ErrMalformed) {
			t.Fatalf("delta frame with byte %d flipped decoded as %+v", i, v)
		} else if i >= 2+len("pet") && !errors.Is(err, ErrChecksum) {
			t.Fatalf("delta frame with byte %d flipped: %v, want ErrChecksum", i, err)
		}
	}
}

// TestChain: equal records on the same snapshot give equal chains; a
// changed value, series or op, another snapshot, or a missing record
// give another; "" for no records.
func TestChain(t *testing.T) {
	recs := make([]format.Record, 10000) // more than one group of 4,096
	for i := range recs {
		recs[i] = format.Record{Seq: uint64(i + 1), Op: format.Upsert, SeriesID: "NG.N3010US3.M", Period: int64(i) * 86400, Value: float64(i)}
	}
	base := Chain("e1-s0-abc", recs)
	if base == "" || Chain("e1-s0-abc", slices.Clone(recs)) != base {
		t.Fatal("equal records, different chains")
	}
	if Chain("e1-s0-abc", nil) != "" {
		t.Fatal("chain of nothing is not empty")
	}
	for name, mut := range map[string]func(r []format.Record) []format.Record{
		"value":    func(r []format.Record) []format.Record { r[5000].Value++; return r },
		"series":   func(r []format.Record) []format.Record { r[9999].SeriesID = "X"; return r },
		"op":       func(r []format.Record) []format.Record { r[0].Op = format.Delete; return r },
		"shorter":  func(r []format.Record) []format.Record { return r[:len(r)-1] },
		"period":   func(r []format.Record) []format.Record { r[4096].Period++; return r },
		"metadata": func(r []format.Record) []format.Record { r[1].Meta = &format.RecordMeta{Name: "n"}; return r },
	} {
		if Chain("e1-s0-abc", mut(slices.Clone(recs))) == base {
			t.Errorf("%s changed, chain the same", name)
		}
	}
	if Chain("e1-s5-abc", recs) == base {
		t.Error("another snapshot, chain the same")
	}
}

func TestSplitRecords(t *testing.T) {
	recs := make([]format.Record, 100_000)
	for i := range recs {
		recs[i] = format.Record{Seq: uint64(i + 1), Op: format.Upsert, SeriesID: "NG.N3010US3.M", Value: float64(i)}
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

// TestSplitRecordsExact: the groups are as large as MaxDeltaBytes allows,
// by exact encoded size (records of mixed sizes, with and without
// metadata), every frame fits MaxFrame, and a record larger than
// MaxDeltaBytes travels alone.
func TestSplitRecordsExact(t *testing.T) {
	recs := make([]format.Record, 60_000)
	for i := range recs {
		recs[i] = format.Record{Seq: uint64(i+1) << (i % 40), Op: format.Upsert, SeriesID: strings.Repeat("s", 1+i%300), Period: int64(i) * -86400, Value: float64(i)}
		if i%7 == 0 {
			recs[i].Meta = &format.RecordMeta{Name: strings.Repeat("n", i%500), Unit: "u", Frequency: format.Daily}
		}
	}
	big := format.Record{Seq: 1, Op: format.Upsert, SeriesID: "A", Meta: &format.RecordMeta{Name: strings.Repeat("n", MaxDeltaBytes)}}
	recs = append(recs[:30_000:30_000], append([]format.Record{big}, recs[30_000:]...)...)
	groups := SplitRecords(recs)
	n := 0
	for gi, g := range groups {
		b := format.EncodeBatch(nil, g)
		body := len(b) - format.BatchHeaderSize(len(g))
		if len(g) > 1 && body > MaxDeltaBytes {
			t.Fatalf("group %d of %d records encodes %d bytes of records, over %d", gi, len(g), body, MaxDeltaBytes)
		}
		if gi+1 < len(groups) {
			next := groups[gi+1][0]
			if body+format.EncodedSize(&next) <= MaxDeltaBytes {
				t.Fatalf("group %d stops at %d bytes though the next record (%d bytes) fits", gi, body, format.EncodedSize(&next))
			}
		}
		if len(g) > 1 {
			if f := AppendDelta(nil, &DeltaFrame{Dataset: strings.Repeat("d", 255), Records: g}); len(f) > MaxFrame {
				t.Fatalf("group %d: frame of %d bytes exceeds MaxFrame %d", gi, len(f), MaxFrame)
			}
		}
		n += len(g)
	}
	if n != len(recs) {
		t.Fatalf("split lost records: %d of %d", n, len(recs))
	}
	for _, g := range groups {
		if len(g) > 1 {
			for i := range g {
				if g[i].Meta != nil && len(g[i].Meta.Name) == MaxDeltaBytes {
					t.Fatal("the oversized record shares a group")
				}
			}
		}
	}
}

func FuzzDecodeMessage(f *testing.F) {
	f.Add([]byte(`{"type":"hello","proto":[2,2],"client":"x","subs":[{"dataset":"pet","epoch":1,"snapshot":"e1-s0-000000000000","seq":3,"base":1,"chain":"00000000000000ab"}]}`), true)
	f.Add([]byte(`{"type":"fetch","dataset":"pet","file":"data.arrow","sha256":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","offset":4194304}`), true)
	f.Add([]byte(`{"type":"catchup_end","dataset":"pet","seq":9}`), false)
	f.Add([]byte(`{"type":"reset","dataset":"pet","seq":9,"code":"diverged"}`), true)
	f.Add((&Message{Type: TPing}).Encode(), false)
	f.Add([]byte(`{"type":"vintage","req":1,"dataset":"pet","asof":"2026-10-01"}`), true)
	f.Add([]byte(`{"type":"revisions","req":2,"dataset":"pet","series":"PET.RWTC.D","period":"2026-10-01","revisions":[{"vintage":{"snapshot":"e1-s0-000000000000","iceberg_snapshot":1,"committed_at":"2026-10-01T00:00:00Z","covers_seq":0,"rows":1},"value":1.5,"present":true}]}`), true)
	f.Add([]byte(`{"type":"error","req":3,"dataset":"pet","code":"unknown_vintage","reason":"x"}`), true)
	for _, m := range goldenControlV3(f) {
		f.Add(m.Encode(), false)
	}
	// seal: the input gets a valid checksum, so the fuzzer reaches the
	// decoder behind it; unsealed inputs exercise the checksum check.
	f.Fuzz(func(t *testing.T, b []byte, seal bool) {
		if seal {
			b = SealControl(bytes.Clone(b))
		}
		m, err := DecodeMessage(b)
		if err != nil {
			if u, err2 := DecodeUnverified(b); err2 == nil && !errors.Is(err, ErrChecksum) {
				t.Fatalf("DecodeUnverified accepts a %s that DecodeMessage refuses for %v", u.Type, err)
			}
			return
		}
		if _, err := DecodeMessage(m.Encode()); err != nil && m.Type != TSnapshot && m.Type != TVintage {
			t.Fatalf("re-encoded %s does not decode: %v", m.Type, err)
		}
	})
}

// sealDelta replaces the last 4 bytes of a delta frame with its CRC-32C.
func sealDelta(b []byte) []byte {
	if len(b) < 5 || b[0] != KindDelta {
		return b
	}
	n := len(b) - 4
	binary.LittleEndian.PutUint32(b[n:], crc32.Checksum(b[:n], castagnoli))
	return b
}

func FuzzDecodeBinary(f *testing.F) {
	f.Add(AppendDelta(nil, &DeltaFrame{Dataset: "pet", Records: []format.Record{{Seq: 1, Op: format.Upsert, SeriesID: "a", Value: 1}}}), false)
	f.Add(AppendDelta(nil, &DeltaFrame{Dataset: "pet", Records: []format.Record{{Seq: 1, Op: format.Upsert, SeriesID: "a", Value: 1}, {Seq: 2, Op: format.Delete, SeriesID: "b"}}}), true)
	f.Add(AppendChunk(nil, &Chunk{Offset: 3, Data: []byte("xyz")}), false)
	f.Fuzz(func(t *testing.T, b []byte, seal bool) {
		if seal {
			b = sealDelta(bytes.Clone(b))
		}
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
