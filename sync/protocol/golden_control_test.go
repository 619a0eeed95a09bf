package protocol

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
)

// goldenControlV2 is one of each version 2 control message a peer sends,
// with every field set. Their bytes were pinned before version 3 was
// added: a version 2 peer must see exactly what it saw before.
func goldenControlV2() []*Message {
	return []*Message{
		{Type: THello, Proto: []int{2, 2}, Client: "golden", Subs: []Sub{{Dataset: "pet", Epoch: 3, Snapshot: "e3-s10-0123456789ab", Seq: 12, Base: 10, Chain: "00000000000000ab"}}},
		{Type: TSubscribe, Subs: []Sub{{Dataset: "pet"}, {Dataset: "elec", Epoch: 1, Seq: 4}}},
		{Type: TFetch, Dataset: "pet", Snapshot: "e3-s10-0123456789ab", File: "data.arrow", SHA256: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", Offset: 4 << 20},
		{Type: TAck, Dataset: "pet", Seq: 12},
		{Type: TPing},
		{Type: TWelcome, Version: 2, Heads: []Head{{Dataset: "pet", Epoch: 3, Snapshot: "e3-s10-0123456789ab", Seq: 12, Bytes: 1 << 30}}},
		{Type: TCatchupBegin, Dataset: "pet", From: 10, To: 12},
		{Type: TCatchupEnd, Dataset: "pet", Seq: 12},
		{Type: TFileEnd, Dataset: "pet", File: "data.arrow", SHA256: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", Offset: 5 << 20},
		{Type: THeartbeat, Heads: []Head{{Dataset: "pet", Epoch: 3, Snapshot: "e3-s10-0123456789ab", Seq: 13}}},
		{Type: TReset, Dataset: "pet", Seq: 9, Code: ResetDiverged, Reason: "diverged"},
		{Type: TError, Dataset: "pet", Code: ErrorUnknownDataset, Reason: "unknown dataset", RetryAfterMs: 250},
	}
}

// checkGolden compares the encoded messages, one per line, with
// testdata/name (rewritten under -update), and decodes each line back.
func checkGolden(t *testing.T, name string, msgs []*Message) {
	t.Helper()
	var got []byte
	for _, m := range msgs {
		got = append(got, m.Encode()...)
		got = append(got, '\n')
	}
	path := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("control encoding changed:\n got:\n%s\nwant:\n%s", got, want)
	}
	for i, line := range bytes.Split(bytes.TrimSuffix(want, []byte("\n")), []byte("\n")) {
		m, err := DecodeMessage(line)
		if err != nil {
			t.Errorf("golden line %d does not decode: %v", i+1, err)
			continue
		}
		if m.Type != msgs[i].Type {
			t.Errorf("golden line %d: type %q, want %q", i+1, m.Type, msgs[i].Type)
		}
	}
}

// TestGoldenControlV2 pins the bytes of version 2's control messages.
func TestGoldenControlV2(t *testing.T) {
	checkGolden(t, "golden.control.v2.jsonl", goldenControlV2())
}

// vintageManifest is a real manifest (testdata/vintage-manifest.json,
// written by format.Write) for the vintage answer.
func vintageManifest(t testing.TB) *format.Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "vintage-manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := format.ParseManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// goldenControlV3 is one of each message version 3 adds.
func goldenControlV3(t testing.TB) []*Message {
	man := vintageManifest(t)
	at := time.Date(2026, 10, 1, 9, 30, 0, 0, time.UTC)
	vi := VintageInfo{Snapshot: man.SnapshotID, IcebergSnapshot: 8061344419584532183, CommittedAt: at, CoversSeq: 10, Rows: 2, Tags: []string{"october"}}
	older := VintageInfo{Snapshot: "e2-s4-0123456789ab", IcebergSnapshot: 42, CommittedAt: at.Add(-7 * 24 * time.Hour), CoversSeq: 4, Rows: 1}
	return []*Message{
		{Type: TWelcome, Version: 3, Heads: []Head{{Dataset: "pet", Epoch: 3, Snapshot: man.SnapshotID, Seq: 12, Bytes: 1 << 20}}},
		{Type: TVintage, Req: 1, Dataset: "pet", AsOf: "2026-10-01"},
		{Type: TVintage, Req: 1, Dataset: "pet", AsOf: "2026-10-01", Vintage: &vi, Manifest: man},
		{Type: TRevisions, Req: 2, Dataset: "pet", Series: "PET.RWTC.D", Period: "2023-11-14"},
		{Type: TRevisions, Req: 2, Dataset: "pet", Series: "PET.RWTC.D", Period: "2023-11-14", Revisions: []Revision{{Vintage: older}, {Vintage: vi, Value: 71.5, Present: true}}},
		{Type: TError, Req: 3, Dataset: "pet", Code: ErrorUnknownVintage, Reason: `no vintage "e9-s9-000000000000" in dataset pet`},
		{Type: TError, Req: 4, Dataset: "pet", Code: ErrorBeforeFirstVintage, Reason: "before the first vintage"},
		{Type: TError, Req: 5, Dataset: "pet", Code: ErrorNoLake, Reason: "this server keeps no vintages"},
		{Type: TError, Req: 6, Dataset: "pet", Code: ErrorUnknownSeries, Reason: "no series X"},
	}
}

// TestGoldenControlV3 pins the bytes of the version 3 messages and checks
// they decode to what was encoded.
func TestGoldenControlV3(t *testing.T) {
	msgs := goldenControlV3(t)
	checkGolden(t, "golden.control.v3.jsonl", msgs)
	for _, m := range msgs {
		got, err := DecodeMessage(m.Encode())
		if err != nil {
			t.Fatalf("%s: %v", m.Type, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%s round trip:\n got %+v\nwant %+v", m.Type, got, m)
		}
	}
}

// TestVintageMessagesRefused: malformed version 3 requests and answers
// are refused (ErrMalformed), like every other malformed message.
func TestVintageMessagesRefused(t *testing.T) {
	man := vintageManifest(t)
	vi := &VintageInfo{Snapshot: man.SnapshotID}
	other := &VintageInfo{Snapshot: "e1-s0-000000000000"}
	long := strings.Repeat("x", MaxAsOf+1)
	for name, m := range map[string]*Message{
		"vintage without req":        {Type: TVintage, Dataset: "pet", AsOf: "2026-10-01"},
		"vintage without asof":       {Type: TVintage, Req: 1, Dataset: "pet"},
		"vintage bad dataset":        {Type: TVintage, Req: 1, Dataset: "../x", AsOf: "2026-10-01"},
		"vintage asof too long":      {Type: TVintage, Req: 1, Dataset: "pet", AsOf: long},
		"vintage answer no manifest": {Type: TVintage, Req: 1, Dataset: "pet", Vintage: vi},
		"vintage answer other id":    {Type: TVintage, Req: 1, Dataset: "pet", Vintage: other, Manifest: man},
		"revisions without req":      {Type: TRevisions, Dataset: "pet", Series: "a", Period: "2026-01-01"},
		"revisions without series":   {Type: TRevisions, Req: 1, Dataset: "pet", Period: "2026-01-01"},
		"revisions without period":   {Type: TRevisions, Req: 1, Dataset: "pet", Series: "a"},
		"revisions series too long":  {Type: TRevisions, Req: 1, Dataset: "pet", Series: long, Period: "2026-01-01"},
	} {
		if _, err := DecodeMessage(m.Encode()); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v, want ErrMalformed", name, err)
		}
	}
	bad := *man
	bad.Format = "not-a-snapshot"
	if _, err := DecodeMessage((&Message{Type: TVintage, Req: 1, Dataset: "pet", Vintage: vi, Manifest: &bad}).Encode()); !errors.Is(err, ErrMalformed) {
		t.Errorf("vintage answer with an invalid manifest: got %v", err)
	}
}

// FuzzVintageMessages builds version 3 requests and answers from fuzzed
// fields: each encodes; what decodes keeps its request id (the client
// matches answers by it) and re-encodes to a message that decodes to the
// same again.
func FuzzVintageMessages(f *testing.F) {
	f.Add(uint64(1), "pet", "2026-10-01", "PET.RWTC.D", "2026-09-30", 71.5, true, int64(1790000000), uint8(0))
	f.Add(uint64(7), "pet", "october", "", "", 0.0, false, int64(0), uint8(1))
	f.Add(uint64(0), "../x", "e1-s0-000000000000", "a", "2026-09-30T10:00:00Z", -1e300, true, int64(-1), uint8(2))
	f.Fuzz(func(t *testing.T, req uint64, dataset, asof, series, period string, value float64, present bool, committed int64, kind uint8) {
		if math.IsNaN(value) || math.IsInf(value, 0) {
			return // the store holds finite values only (format.ValidateRecords)
		}
		vi := VintageInfo{Snapshot: asof, IcebergSnapshot: committed, CommittedAt: time.UnixMilli(committed % (1 << 45)).UTC(), CoversSeq: req, Rows: committed, Tags: []string{series}}
		var m *Message
		switch kind % 4 {
		case 0:
			m = &Message{Type: TVintage, Req: req, Dataset: dataset, AsOf: asof}
		case 1:
			m = &Message{Type: TRevisions, Req: req, Dataset: dataset, Series: series, Period: period}
		case 2:
			m = &Message{Type: TRevisions, Req: req, Dataset: dataset, Series: series, Period: period, Revisions: []Revision{{Vintage: vi, Value: value, Present: present}}}
		default:
			m = &Message{Type: TError, Req: req, Dataset: dataset, Code: Code(asof), Reason: series}
		}
		b := m.Encode()
		got, err := DecodeMessage(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if got.Req != req || got.Type != m.Type {
			t.Fatalf("req %d type %s came back as %d %s", req, m.Type, got.Req, got.Type)
		}
		// (invalid UTF-8 became U+FFFD on the first encoding; from then on
		// a message is stable)
		back, err := DecodeMessage(got.Encode())
		if err != nil || !reflect.DeepEqual(back, got) {
			t.Fatalf("re-encoded %s decodes to %+v, %v; want %+v", got.Type, back, err, got)
		}
	})
}
