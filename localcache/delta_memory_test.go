package localcache

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
)

// Options.DeltaInMemory (the server's store: its delta is durable in the
// JetStream delta log): Apply serves a batch without writing a log
// segment, compaction folds it as usual, a pre-existing write-ahead log
// is not replayed, and after a restart the delta starts at the seq its
// snapshot covers, ready to take the same records again.
func TestDeltaInMemory(t *testing.T) {
	home := liveTempDir(t)
	liveCook(t, home, "ds", trustTable("A", 3, 1), format.WriteOptions{Epoch: 1})
	// A write-ahead log of a companion-style open: the in-memory store
	// must not replay it.
	s := liveOpen(t, home, &Options{ScrubBytesPerSec: -1})
	if _, err := s.Apply("ds", trustRecs(1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	walDir := filepath.Join(home, DatasetsDir, "ds", WALDir)
	walBytes := dirBytes(t, walDir)

	o := &Options{ScrubBytesPerSec: -1, DeltaInMemory: true, CompactRows: -1, CompactBytes: -1}
	s = liveOpen(t, home, o)
	if seq, err := s.LastSeq("ds"); err != nil || seq != 0 {
		t.Fatalf("last seq %d, %v: the in-memory delta replayed the write-ahead log", seq, err)
	}
	trustWantServes(t, s, "A0", 1)
	if n, err := s.Apply("ds", trustRecs(1)); err != nil || n != 2 {
		t.Fatalf("apply: %d, %v", n, err)
	}
	trustWantServes(t, s, "A0", 999)
	if got := dirBytes(t, walDir); got != walBytes {
		t.Fatalf("the write-ahead log went from %d to %d bytes: an in-memory delta wrote it", walBytes, got)
	}
	if st, _ := s.Status(); st[0].WALBytes != 0 {
		t.Fatalf("WALBytes %d, want 0", st[0].WALBytes)
	}
	m, err := s.Compact("ds")
	if err != nil || m.CoversThroughSeq != 2 {
		t.Fatalf("compact: %v, %v", m, err)
	}
	if n, err := s.Apply("ds", trustRecs(3)); err != nil || n != 2 {
		t.Fatalf("apply after compaction: %d, %v", n, err)
	}
	s.Close()

	// The restart: seqs 3..4 were in memory only; the snapshot covers 2.
	s = liveOpen(t, home, o)
	defer s.Close()
	if seq, err := s.LastSeq("ds"); err != nil || seq != 2 {
		t.Fatalf("after a restart: last seq %d, %v; want 2 (the snapshot's covers)", seq, err)
	}
	trustWantServes(t, s, "A0", 999)
	if _, err := s.Info("Z"); err != nil {
		t.Fatalf("Z, folded into the snapshot: %v", err)
	}
	if n, err := s.Apply("ds", trustRecs(3)); err != nil || n != 2 {
		t.Fatalf("the same records applied again: %d, %v", n, err)
	}
	if seq, _ := s.LastSeq("ds"); seq != 4 {
		t.Fatalf("last seq %d, want 4", seq)
	}

	// Read-only with the delta in memory (a reader of a server home
	// overlaying its delta log): Apply changes this process's view only;
	// a plain read-only store still refuses it.
	ro := liveOpen(t, home, &Options{ReadOnly: true, DeltaInMemory: true, CompactRows: -1, CompactBytes: -1})
	defer ro.Close()
	before := dirBytes(t, walDir)
	if n, err := ro.Apply("ds", trustRecs(3)); err != nil || n != 2 {
		t.Fatalf("read-only in-memory apply: %d, %v", n, err)
	}
	if seq, _ := ro.LastSeq("ds"); seq != 4 {
		t.Fatalf("read-only in-memory last seq %d, want 4", seq)
	}
	if got := dirBytes(t, walDir); got != before {
		t.Fatalf("a read-only store wrote the write-ahead log (%d -> %d bytes)", before, got)
	}
	plain := liveOpen(t, home, &Options{ReadOnly: true})
	defer plain.Close()
	if _, err := plain.Apply("ds", trustRecs(5)); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("plain read-only apply: %v, want ErrReadOnly", err)
	}
}

func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n
}
