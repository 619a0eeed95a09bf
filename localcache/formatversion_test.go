package localcache

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
)

// TestCompactionFormatVersion: Options.FormatVersion sets the version a
// store's compactions write, CompactThroughVersion overrides it per call
// (a companion reproducing a server's snapshot), and a version this build
// does not write is refused with ErrFormatVersion, leaving the dataset as
// it was.
func TestCompactionFormatVersion(t *testing.T) {
	if _, err := Open(t.TempDir(), &Options{FormatVersion: format.FormatVersion + 1}); !errors.Is(err, ErrFormatVersion) {
		t.Fatalf("open with FormatVersion %d: %v, want ErrFormatVersion", format.FormatVersion+1, err)
	}
	home := cookHome(t)
	s, err := Open(home, &Options{FormatVersion: 2, CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Apply("d", truncRecs(1, 3)); err != nil {
		t.Fatal(err)
	}
	_, snap0, _, _ := s.State("d")
	for _, v := range []int{-1, format.FormatVersion + 1} {
		if _, err := s.CompactThroughVersion("d", 3, v); !errors.Is(err, ErrFormatVersion) {
			t.Fatalf("compact at version %d: %v, want ErrFormatVersion", v, err)
		}
	}
	if _, snap, seq, _ := s.State("d"); snap != snap0 || seq != 3 {
		t.Fatalf("after refused compactions: snapshot %s seq %d, want %s 3", snap, seq, snap0)
	}
	want := []int{2, format.FormatVersion, 1}
	for i, v := range []int{0, format.FormatVersion, 1} {
		if i > 0 {
			if _, err := s.Apply("d", truncRecs(uint64(3+i), uint64(3+i))); err != nil {
				t.Fatal(err)
			}
		}
		m, err := s.CompactThroughVersion("d", ^uint64(0), v)
		if err != nil {
			t.Fatal(err)
		}
		disk, err := format.ReadManifest(filepath.Join(home, DatasetsDir, "d", format.SnapshotsDir, m.SnapshotID))
		if err != nil {
			t.Fatal(err)
		}
		if m.Version != want[i] || disk.Version != want[i] {
			t.Fatalf("compaction asked for version %d wrote %d (on disk %d), want %d", v, m.Version, disk.Version, want[i])
		}
	}
	// The last snapshot (version 1) serves what was folded.
	p := day("2026-11-10") + 5*86400
	res, err := s.Get("d:A", p, p)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	if res.Points.Len() != 1 || res.Points.Values[0] != 5 {
		t.Fatalf("A at seq 5's day: %d points %v, want the value 5", res.Points.Len(), res.Points.Values)
	}
}
