package localcache

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// packSnapshot writes the files of the snapshot in dir into one file at
// page-aligned offsets, as a lake's Puffin file holds them, and returns
// the file set that locates them.
func packSnapshot(t *testing.T, dir, path string) snapshot.FileSet {
	t.Helper()
	m, err := format.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{format.ManifestFile}
	for _, f := range m.Files {
		names = append(names, f.Name)
	}
	var out bytes.Buffer
	out.WriteString("PFA1")
	set := snapshot.FileSet{}
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for out.Len()%4096 != 0 {
			out.WriteByte(0)
		}
		set[name] = snapshot.Region{Path: path, Offset: int64(out.Len()), Length: int64(len(b))}
		out.Write(b)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return set
}

// TestScrubChecksSnapshotsMappedInPlace: a snapshot the store serves from
// regions of another file (a lake's Puffin file, Options.OpenSnapshot) is
// scrubbed like a directory: a byte flipped inside its data.arrow region
// marks the dataset damaged, naming the file; an intact one is counted.
// (The scrub used to skip such snapshots.)
func TestScrubChecksSnapshotsMappedInPlace(t *testing.T) {
	home := liveTempDir(t)
	mg := liveCook(t, home, "good", trustTable("G", 3, 10), format.WriteOptions{Epoch: 1})
	mb := liveCook(t, home, "bad", trustTable("B", 3, 20), format.WriteOptions{Epoch: 1})
	packs := t.TempDir()
	sets := map[string]snapshot.FileSet{
		"good": packSnapshot(t, trustSnapDir(home, "good", mg), filepath.Join(packs, "good.puffin")),
		"bad":  packSnapshot(t, trustSnapDir(home, "bad", mb), filepath.Join(packs, "bad.puffin")),
	}
	data := sets["bad"][format.DataFile]
	flipByte(t, data.Path, data.Offset+data.Length/2)

	s := liveOpen(t, home, &Options{ScrubBytesPerSec: 64 << 20,
		OpenSnapshot: func(dataset, id string) (*snapshot.Snapshot, error) {
			return snapshot.OpenFiles(sets[dataset], snapshot.Options{})
		}})
	defer s.Close()
	deadline := time.Now().Add(20 * time.Second)
	for s.Damaged("bad") == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	var ce *format.CorruptionError
	if err := s.Damaged("bad"); !errors.As(err, &ce) || ce.File != format.DataFile {
		t.Fatalf("after the scrub: Damaged(bad) = %v, want a CorruptionError naming %s", err, format.DataFile)
	}
	for s.Metrics().ScrubPending > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if m := s.Metrics(); m.ScrubFailures != 1 || m.ScrubSnapshots != 1 || m.ScrubBytes == 0 {
		t.Fatalf("metrics %+v: want one failure, one intact snapshot", m)
	}
	if err := s.Damaged("good"); err != nil {
		t.Fatal(err)
	}
}
