package protocol

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
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
