//go:build linux

package localcache

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/format"
)

// Inode flags of FS_IOC_SETFLAGS (linux/fs.h; x/sys/unix does not name
// them): writes and truncation fail with EPERM on an immutable file,
// truncation on an append-only one.
const (
	fsImmutableFL = 0x10
	fsAppendFL    = 0x20
)

// walSetFlag sets (on) or clears an inode flag of the file at path, as
// chattr does. It needs CAP_LINUX_IMMUTABLE (root) and a file system
// that keeps the flags (ext4, xfs, btrfs).
func walSetFlag(t *testing.T, path string, flag int, on bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fl, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err == nil {
		v := int(fl) &^ flag
		if on {
			v |= flag
		}
		err = unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, v)
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("set inode flag %#x on %s (CI runs as root on ext4): %v", flag, path, err)
		}
		t.Skipf("cannot set inode flags here (needs root and ext4/xfs/btrfs): %v", err)
	}
}

// walActiveSegment is the path of d's last (active) WAL segment.
func walActiveSegment(t *testing.T, home string) string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(home, DatasetsDir, "d", WALDir))
	if err != nil || len(ents) == 0 {
		t.Fatalf("wal segments: %v %v", ents, err)
	}
	return filepath.Join(home, DatasetsDir, "d", WALDir, ents[len(ents)-1].Name())
}

// TestTrustWALRecoversAfterFailedWrite (issue 10, item 9): a write-ahead
// log that refused writes for a while (an unwritable segment; a full disk
// on which even the cut-back of the partial frame failed, as on a file
// system remounted read-only) recovers by itself: once the disk takes
// writes again, the next Apply reopens the log from disk, cuts what the
// failed append left, and succeeds, with every acknowledged row there,
// the failed batch absent (the sync client fetches it again) and seqs
// continuing without reuse; a reopened store agrees. Real failing writes:
// the segment's immutable and append-only inode flags, RLIMIT_FSIZE.
func TestTrustWALRecoversAfterFailedWrite(t *testing.T) {
	home := t.TempDir() // ext4, not /dev/shm: inode flags are needed
	liveCook(t, home, "d", liveGenBase(), format.WriteOptions{Epoch: 1})
	opts := &Options{CompactRows: -1, CompactBytes: -1}
	s := liveOpen(t, home, opts)
	defer func() { s.Close() }()
	model := liveModelOf(liveGenBase())
	apply := func(t *testing.T, g uint64) {
		t.Helper()
		b := liveGenBatch(g)
		if n, err := s.Apply("d", b); err != nil || n != len(b) {
			t.Fatalf("apply generation %d: %d %v", g, n, err)
		}
		model.apply(b)
	}
	same := func(t *testing.T, what string) {
		t.Helper()
		if err := liveCheck(s, model, nil); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := s.Damaged("d"); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	failing := func(t *testing.T, g uint64) {
		t.Helper()
		if n, err := s.Apply("d", liveGenBatch(g)); err == nil || n != 0 {
			t.Fatalf("apply generation %d to an unwritable log: %d %v", g, n, err)
		}
	}
	apply(t, 1)

	t.Run("unwritable segment", func(t *testing.T) {
		seg := walActiveSegment(t, home)
		walSetFlag(t, seg, fsImmutableFL, true)
		t.Cleanup(func() { walSetFlag(t, seg, fsImmutableFL, false) })
		failing(t, 2)
		failing(t, 2) // the reopen fails too while the disk refuses
		same(t, "while the log is unwritable")
		walSetFlag(t, seg, fsImmutableFL, false)
		apply(t, 2) // what the sync client sends again
		apply(t, 3)
		same(t, "after the log is writable again")
	})

	t.Run("full disk and the cut-back fails", func(t *testing.T) {
		seg := walActiveSegment(t, home)
		st, err := os.Stat(seg)
		if err != nil {
			t.Fatal(err)
		}
		walSetFlag(t, seg, fsAppendFL, true) // no truncation
		t.Cleanup(func() { walSetFlag(t, seg, fsAppendFL, false) })
		liveFileLimit(t, uint64(st.Size())+100, func() {
			failing(t, 4)
		})
		if now, _ := os.Stat(seg); now.Size() != st.Size()+100 {
			t.Fatalf("expected a 100-byte torn frame left by the failed write, segment is %d bytes (was %d)", now.Size(), st.Size())
		}
		failing(t, 4) // still append-only: the partial frame cannot be cut
		walSetFlag(t, seg, fsAppendFL, false)
		apply(t, 4)
		if now, _ := os.Stat(seg); now.Size() <= st.Size() {
			t.Fatalf("segment %d bytes after the retry (was %d)", now.Size(), st.Size())
		}
		same(t, "after the disk has room again")
	})

	// The log holds each acknowledged seq once, strictly increasing, with
	// nothing torn, and a restart serves the same.
	wantLast := 4 * uint64(liveGenRecords)
	if _, _, last, _ := s.State("d"); last != wantLast {
		t.Fatalf("last seq %d, want %d", last, wantLast)
	}
	c, err := delta.VerifyWAL(filepath.Join(home, DatasetsDir, "d", WALDir))
	if err != nil || c.Records != int(wantLast) || c.FirstSeq != 1 || c.LastSeq != wantLast || c.TornTail != 0 {
		t.Fatalf("log after the recoveries: %+v %v (want records 1..%d, no torn tail)", c, err, wantLast)
	}
	s.Close()
	s = liveOpen(t, home, opts)
	same(t, "reopened")
	if _, _, last, _ := s.State("d"); last != wantLast {
		t.Fatalf("reopened: last seq %d, want %d", last, wantLast)
	}
	apply(t, 5)
	if _, err := s.Compact("d"); err != nil {
		t.Fatal(err)
	}
	same(t, "compacted")
}

// TestTrustWALReopenFindsLostRecord: when the reopen after a failed write
// finds that the disk no longer holds a record it acknowledged, the
// dataset is damaged (a companion re-downloads it), not served over a log
// that a restart would read differently.
func TestTrustWALReopenFindsLostRecord(t *testing.T) {
	home := t.TempDir()
	liveCook(t, home, "d", liveGenBase(), format.WriteOptions{Epoch: 1})
	s := liveOpen(t, home, &Options{CompactRows: -1, CompactBytes: -1})
	defer s.Close()
	if _, err := s.Apply("d", liveGenBatch(1)); err != nil {
		t.Fatal(err)
	}
	seg := walActiveSegment(t, home)
	st, _ := os.Stat(seg)
	if _, err := s.Apply("d", liveGenBatch(2)); err != nil {
		t.Fatal(err)
	}
	walSetFlag(t, seg, fsImmutableFL, true)
	if _, err := s.Apply("d", liveGenBatch(3)); err == nil {
		walSetFlag(t, seg, fsImmutableFL, false)
		t.Fatal("apply to an immutable segment succeeded")
	}
	walSetFlag(t, seg, fsImmutableFL, false)
	// The disk loses generation 2's frame (acknowledged).
	if err := os.Truncate(seg, st.Size()); err != nil {
		t.Fatal(err)
	}
	_, err := s.Apply("d", liveGenBatch(3))
	var ce *delta.CorruptionError
	if !errors.Is(err, ErrDamaged) || !errors.As(err, &ce) {
		t.Fatalf("apply after the log lost an acknowledged record: %v, want a damage error with a delta.CorruptionError", err)
	}
	if err := s.Damaged("d"); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Damaged: %v", err)
	}
}
