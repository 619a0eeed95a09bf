package deltalog

import (
	"errors"
	"reflect"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
)

func numbered(b []format.Record, first uint64) []format.Record {
	for i := range b {
		b[i].Seq = first + uint64(i)
	}
	return b
}

func TestMessageRoundTrip(t *testing.T) {
	b := numbered(batchOf(3, 20), 41)
	b[5].Meta = &format.RecordMeta{Name: "n", Unit: "MWh", Source: "s", Frequency: format.Daily}
	b[6].Op = format.Delete
	p := encodeMessage(nil, b)
	got, err := decodeMessage(seqHeader(41, 60), p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 20 || got[0].Seq != 41 || got[19].Seq != 60 || got[5].Meta == nil || got[5].Meta.Unit != "MWh" || got[6].Op != format.Delete {
		t.Fatalf("round trip: %+v", got)
	}
	bad := []struct {
		name string
		hdr  string
		p    []byte
	}{
		{"header range too long", seqHeader(41, 61), p},
		{"header range shifted", seqHeader(40, 59), p},
		{"header missing", "", p},
		{"header garbage", "41-x", p},
		{"header reversed", "60-41", p},
		{"short", seqHeader(41, 60), p[:5]},
		{"magic", seqHeader(41, 60), append([]byte("XSDL"), p[4:]...)},
		{"version", seqHeader(41, 60), append(append([]byte{}, p[:4]...), append([]byte{2}, p[5:]...)...)},
		{"checksum", seqHeader(41, 60), func() []byte { q := append([]byte{}, p...); q[len(q)-3] ^= 0x40; return q }()},
	}
	for _, c := range bad {
		if _, err := decodeMessage(c.hdr, c.p); err == nil {
			t.Errorf("%s: decoded", c.name)
		}
	}
	// A record the log must never hold is refused even with a good checksum.
	nan := numbered(batchOf(1, 2), 1)
	nan[1].SeriesID = ""
	if _, err := decodeMessage(seqHeader(1, 2), encodeMessage(nil, nan)); !errors.Is(err, format.ErrBadRecord) {
		t.Fatalf("invalid record: %v", err)
	}
}

// FuzzDecodeMessage: any header and payload decode or fail, never panic,
// and what decodes re-encodes to a message that decodes to the same
// records.
func FuzzDecodeMessage(f *testing.F) {
	f.Add("1-3", encodeMessage(nil, numbered(batchOf(1, 3), 1)))
	f.Add("7-7", encodeMessage(nil, numbered(batchOf(2, 1), 7)))
	f.Add("1-1", []byte("ESDL\x01\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, hdr string, p []byte) {
		recs, err := decodeMessage(hdr, p)
		if err != nil {
			return
		}
		again, err := decodeMessage(hdr, encodeMessage(nil, recs))
		if err != nil || !reflect.DeepEqual(again, recs) {
			t.Fatalf("decoded %d records that do not survive a re-encode: %v", len(recs), err)
		}
	})
}
