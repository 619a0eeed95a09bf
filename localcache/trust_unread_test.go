package localcache

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// TestTrustTruncatedBeforeFirstRead: a data.arrow truncated under a
// running store before any lookup has read its record batch fails the
// lookup with ErrDamaged and marks the dataset damaged (Damaged reports a
// CorruptionError, so a companion's heal path re-downloads it), exactly
// as when the batch had been read before. Reported by trust-sync: the
// first lookup answered "corrupt data.arrow: record batch 0: ... nil
// pointer dereference" and left the dataset undamaged, so nothing healed
// it until the next open.
func TestTrustTruncatedBeforeFirstRead(t *testing.T) {
	for _, size := range []int64{0, 4096} {
		home := liveTempDir(t)
		liveCook(t, home, "good", trustTable("G", 3, 10), format.WriteOptions{Epoch: 1})
		mb := liveCook(t, home, "bad", trustTable("B", 50, 20), format.WriteOptions{Epoch: 1})
		spare := liveCopyDir(t, trustSnapDir(home, "bad", mb))
		s := liveOpen(t, home, &Options{ScrubBytesPerSec: -1})
		// No lookup of "bad" before the damage.
		if err := os.Truncate(filepath.Join(trustSnapDir(home, "bad", mb), format.DataFile), size); err != nil {
			t.Fatal(err)
		}
		_, _, err := s.Copy("bad:B7", snapshot.MinTime, snapshot.MaxTime)
		if !errors.Is(err, ErrDamaged) {
			t.Fatalf("truncated to %d: first lookup: %v, want ErrDamaged", size, err)
		}
		var ce *format.CorruptionError
		if err := s.Damaged("bad"); !errors.As(err, &ce) {
			t.Fatalf("truncated to %d: Damaged(bad) = %v, want a CorruptionError", size, err)
		}
		if names := s.DamagedNames(); len(names) != 1 || names[0] != "bad" {
			t.Fatalf("truncated to %d: damaged %v", size, names)
		}
		if _, err := s.Get("B9", snapshot.MinTime, snapshot.MaxTime); !errors.Is(err, ErrDamaged) {
			t.Fatalf("truncated to %d: Get of a plain id of the damaged dataset: %v", size, err)
		}
		trustWantServes(t, s, "good:G1", 11)
		if _, err := s.Install("bad", spare); err != nil {
			t.Fatalf("install over the damaged dataset: %v", err)
		}
		trustWantServes(t, s, "bad:B7", 27)
		s.Close()
	}
}
