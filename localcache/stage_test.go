package localcache

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
)

// TestStage drives a download through the store's staging the way the
// sync client does: a damaged chunk is refused with its offset and cut,
// a stage closed mid-chunk (a kill) resumes from the last verified chunk,
// files held whole are skipped, Commit installs the snapshot and consumes
// the staging directory; stale stages of other snapshots go, Abort
// removes its own, and bad calls are refused without touching anything.
func TestStage(t *testing.T) {
	src, home := liveTempDir(t), liveTempDir(t)
	// A data file of more than two 4 MiB chunks (20 bytes a row).
	m := liveCook(t, src, "d", liveBenchTable(8000), format.WriteOptions{Epoch: 2})
	liveCook(t, home, "d", liveBenchTable(10), format.WriteOptions{Epoch: 1})
	srcDir := filepath.Join(src, DatasetsDir, "d", format.SnapshotsDir, m.SnapshotID)
	data := map[string][]byte{}
	for _, f := range m.Files {
		b, err := os.ReadFile(filepath.Join(srcDir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		data[f.Name] = b
	}
	first := m.Files[0]
	if first.Size <= 2*format.ChunkSize {
		t.Fatalf("%s is %d bytes; the test wants more than two chunks", first.Name, first.Size)
	}
	s := liveOpen(t, home, &Options{CompactRows: -1, CompactBytes: -1})
	defer s.Close()

	stale := s.stagingDir("d", "e1-s7-000000000000")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stage("d", m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the stale stage of another snapshot is still there: %v", err)
	}
	if _, err := st.Append([]byte{1}); err == nil {
		t.Fatal("Append before Verify succeeded")
	}
	if skipped, kept, err := st.Verify(); err != nil || skipped != 0 || kept != 0 {
		t.Fatalf("fresh Verify: skipped %d kept %d err %v", skipped, kept, err)
	}
	b := data[first.Name]
	if v, err := st.Append(b[:format.ChunkSize]); err != nil || v != 1 {
		t.Fatalf("chunk 0: verified %d, %v", v, err)
	}
	bad := append([]byte(nil), b[format.ChunkSize:2*format.ChunkSize]...)
	bad[1000] ^= 0x40
	v, err := st.Append(bad)
	var ce *format.CorruptionError
	if !errors.Is(err, format.ErrChunkMismatch) || !errors.As(err, &ce) || ce.Offset != format.ChunkSize || ce.File != first.Name || v != 0 {
		t.Fatalf("damaged chunk 1: verified %d, err %v", v, err)
	}
	if i, off, open := st.Pos(); i != 0 || off != format.ChunkSize || !open {
		t.Fatalf("after the damaged chunk the stage stands at file %d offset %d (open %v)", i, off, open)
	}
	// Half of chunk 1 arrives, then the process dies.
	if v, err := st.Append(b[format.ChunkSize : format.ChunkSize+format.ChunkSize/2]); err != nil || v != 0 {
		t.Fatalf("half a chunk: verified %d, %v", v, err)
	}
	if _, err := st.Append(make([]byte, first.Size)); err == nil {
		t.Fatal("Append past the end of the file succeeded")
	}
	st.Close()

	st, err = s.Stage("d", m)
	if err != nil {
		t.Fatal(err)
	}
	if skipped, kept, err := st.Verify(); err != nil || skipped != 0 || kept != format.ChunkSize {
		t.Fatalf("resumed Verify: skipped %d kept %d (want the verified chunk, %d) err %v", skipped, kept, format.ChunkSize, err)
	}
	if _, err := st.Commit(); err == nil {
		t.Fatal("Commit with files missing succeeded")
	}
	if _, _, err := st.Finish(); err == nil {
		t.Fatal("Finish of a file not fully written succeeded")
	}
	if v, err := st.Append(b[format.ChunkSize:]); err != nil || int64(v) != int64(len(first.Chunks))-1 {
		t.Fatalf("rest of %s: verified %d, %v", first.Name, v, err)
	}
	if skipped, kept, err := st.Finish(); err != nil || skipped != 0 || kept != 0 {
		t.Fatalf("Finish %s: skipped %d kept %d err %v", first.Name, skipped, kept, err)
	}
	// The second file arrives whole but the stage is closed before its
	// Finish: the next stage finds it verified in .partial.
	second := m.Files[1]
	if i, off, open := st.Pos(); i != 1 || off != 0 || !open {
		t.Fatalf("after Finish: file %d offset %d open %v", i, off, open)
	}
	if _, err := st.Append(data[second.Name]); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = s.Stage("d", m)
	if err != nil {
		t.Fatal(err)
	}
	if skipped, kept, err := st.Verify(); err != nil || skipped != first.Size || kept != second.Size {
		t.Fatalf("second resume: skipped %d (want %d) kept %d (want %d) err %v", skipped, first.Size, kept, second.Size, err)
	}
	if _, _, err := st.Finish(); err != nil {
		t.Fatal(err)
	}
	for {
		i, _, open := st.Pos()
		if !open {
			break
		}
		if _, err := st.Append(data[m.Files[i].Name]); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, id, _, err := s.State("d"); err != nil || id != m.SnapshotID {
		t.Fatalf("after Commit the store serves %s (%v), want %s", id, err, m.SnapshotID)
	}
	if held, _ := StagedBytes(home, "d"); held != 0 {
		t.Fatalf("%d bytes left in staging after Commit", held)
	}
	if _, err := format.Verify(filepath.Join(home, DatasetsDir, "d", format.SnapshotsDir, m.SnapshotID)); err != nil {
		t.Fatal(err)
	}

	// Abort removes what it staged.
	m2 := liveCook(t, src, "d", liveBenchTable(20), format.WriteOptions{Epoch: 3})
	st, err = s.Stage("d", m2)
	if err != nil {
		t.Fatal(err)
	}
	st.Verify()
	st.Append(make([]byte, 100))
	if held, partial := StagedBytes(home, "d"); held != 100 || partial != 100 {
		t.Fatalf("StagedBytes: held %d partial %d, want 100 100", held, partial)
	}
	if err := st.Abort(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.stagingDir("d", m2.SnapshotID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Abort left the staging directory: %v", err)
	}

	// Refusals.
	other := *m2
	other.Dataset = "e"
	if _, err := s.Stage("d", &other); err == nil {
		t.Fatal("a manifest of another dataset was staged")
	}
	escape := *m2
	escape.SnapshotID = "../../x"
	if _, err := s.Stage("d", &escape); err == nil {
		t.Fatal("a manifest with a path for an id was staged")
	}
	ro := liveOpen(t, home, &Options{ReadOnly: true})
	defer ro.Close()
	if _, err := ro.Stage("d", m2); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only Stage: %v", err)
	}
}
