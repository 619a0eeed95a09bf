package localcache

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

var errCatalogDown = errors.New("catalog down")

// publishHook records what Options.Publish saw and fails while fail is set.
type publishHook struct {
	t     *testing.T
	fail  bool
	calls []*format.Manifest
}

func (h *publishHook) publish(dataset, dir string, m *format.Manifest) error {
	h.t.Helper()
	// The snapshot is placed and complete, and CURRENT does not name it yet.
	if err := format.VerifyFiles(dir, m); err != nil {
		h.t.Errorf("publish hook: placed snapshot %s: %v", dir, err)
	}
	if filepath.Base(dir) != m.SnapshotID || m.Dataset != dataset {
		h.t.Errorf("publish hook: dir %s, dataset %s for manifest %s of %s", dir, dataset, m.SnapshotID, m.Dataset)
	}
	if id, err := format.ReadCurrent(filepath.Dir(filepath.Dir(dir))); err == nil && id == m.SnapshotID {
		h.t.Errorf("publish hook: CURRENT already names %s", id)
	}
	h.calls = append(h.calls, m)
	if h.fail {
		return errCatalogDown
	}
	return nil
}

// TestPublishHook: Compact, Install of a new dataset, Install over an
// existing one each call Options.Publish once with the placed snapshot
// before CURRENT moves; a failing hook fails the call, leaves CURRENT,
// the served state and the delta as they were and removes the placed
// directory.
func TestPublishHook(t *testing.T) {
	home := cookHome(t)
	h := &publishHook{t: t}
	s, err := Open(home, &Options{Publish: h.publish, CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dsDir := s.DatasetDir("d")
	before, _ := format.ReadCurrent(dsDir)
	if _, err := s.Apply("d", []format.Record{{Seq: 1, Op: format.Upsert, SeriesID: "A", Period: day("2026-11-04"), Value: 4}}); err != nil {
		t.Fatal(err)
	}

	// Compaction, publish failing.
	h.fail = true
	if _, err := s.Compact("d"); !errors.Is(err, errCatalogDown) {
		t.Fatalf("compact with a failing publish: %v, want errCatalogDown", err)
	}
	if len(h.calls) != 1 {
		t.Fatalf("%d publish calls, want 1", len(h.calls))
	}
	failed := h.calls[0].SnapshotID
	if id, _ := format.ReadCurrent(dsDir); id != before {
		t.Fatalf("CURRENT %s after a failed publish, want %s", id, before)
	}
	if _, err := os.Stat(filepath.Join(dsDir, format.SnapshotsDir, failed)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the snapshot that failed to publish is left behind: %v", err)
	}
	if _, v := getAll(t, s, "A"); len(v) != 4 || v[3] != 4 {
		t.Fatalf("A after a failed compaction: %v, want the delta's row still served", v)
	}
	if _, snap, seq, _ := s.State("d"); snap != before || seq != 1 {
		t.Fatalf("state %s seq %d after a failed compaction", snap, seq)
	}

	// Compaction, publish working: the same snapshot is published, then served.
	h.fail = false
	m, err := s.Compact("d")
	if err != nil {
		t.Fatal(err)
	}
	if len(h.calls) != 2 || h.calls[1].SnapshotID != m.SnapshotID || m.SnapshotID != failed {
		t.Fatalf("publish calls %d (last %s), compacted %s (failed one %s)", len(h.calls), h.calls[len(h.calls)-1].SnapshotID, m.SnapshotID, failed)
	}
	if id, _ := format.ReadCurrent(dsDir); id != m.SnapshotID {
		t.Fatalf("CURRENT %s, want %s", id, m.SnapshotID)
	}
	// Nothing pending: no snapshot, no publish.
	if _, err := s.Compact("d"); err != nil || len(h.calls) != 2 {
		t.Fatalf("compact with nothing pending: %v, %d calls", err, len(h.calls))
	}

	// Install of a new dataset and over an existing one.
	write := func(name string, epoch uint64, v float64) string {
		dir := filepath.Join(t.TempDir(), "snap")
		tb := &format.Table{Series: []format.SeriesMeta{{ID: name + ".X", Frequency: format.Daily}}}
		tb.Append(0, day("2026-11-01"), v)
		if _, _, err := format.Write(dir, tb, format.WriteOptions{Dataset: name, Epoch: epoch}); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	h.fail = true
	if _, err := s.Install("n", write("n", 1, 1)); !errors.Is(err, errCatalogDown) {
		t.Fatalf("install of a new dataset with a failing publish: %v", err)
	}
	if _, err := format.ReadCurrent(s.DatasetDir("n")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("new dataset has CURRENT after a failed publish: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(s.DatasetDir("n"), format.SnapshotsDir)); len(ents) != 0 {
		t.Fatalf("new dataset left %d snapshot directories", len(ents))
	}
	if _, err := s.Install("d", write("d", 2, 7)); !errors.Is(err, errCatalogDown) {
		t.Fatalf("install over d with a failing publish: %v", err)
	}
	if _, snap, _, _ := s.State("d"); snap != m.SnapshotID {
		t.Fatalf("d serves %s after a failed install, want %s", snap, m.SnapshotID)
	}
	h.fail = false
	n := len(h.calls)
	if _, err := s.Install("n", write("n", 1, 1)); err != nil {
		t.Fatal(err)
	}
	m2, err := s.Install("d", write("d", 2, 7))
	if err != nil {
		t.Fatal(err)
	}
	if len(h.calls) != n+2 || h.calls[n+1].SnapshotID != m2.SnapshotID {
		t.Fatalf("%d publish calls for two installs", len(h.calls)-n)
	}
	if _, v := getAll(t, s, "n.X"); len(v) != 1 || v[0] != 1 {
		t.Fatalf("n.X = %v", v)
	}
}

// cookHook is a CookPublish hook that cooks each snapshot into a
// container file outside the home, and the OpenSnapshot hook that maps
// it from there (what the server does with its lake's Puffin files).
type cookHook struct {
	home   string
	dir    string
	fail   bool
	calls  int
	path   map[string]string          // snapshot id -> container
	placed map[string][]format.Placed // snapshot id -> its files there
}

func (h *cookHook) cook(dataset string, cook func(*format.Container) (*format.Manifest, error)) (*format.Manifest, error) {
	h.calls++
	path := filepath.Join(h.dir, fmt.Sprintf("c%d", h.calls))
	c, err := format.CreateContainer(path, []byte("HDR"))
	if err != nil {
		return nil, err
	}
	m, err := cook(c)
	if err == nil && h.fail {
		err = errCatalogDown
	}
	if err == nil {
		err = c.Durable()
	}
	if err != nil {
		c.Remove()
		return nil, err
	}
	c.Close()
	h.path[m.SnapshotID], h.placed[m.SnapshotID] = path, c.Files()
	return m, nil
}

func (h *cookHook) open(dataset, id string) (*snapshot.Snapshot, error) {
	path, ok := h.path[id]
	if !ok {
		return snapshot.Open(filepath.Join(h.home, DatasetsDir, dataset, format.SnapshotsDir, id))
	}
	set := snapshot.FileSet{}
	for _, f := range h.placed[id] {
		set[f.Name] = snapshot.Region{Path: path, Offset: f.Offset, Length: f.Length}
	}
	return snapshot.OpenFiles(set, snapshot.Options{})
}

// TestCookPublishHook: with Options.CookPublish, a compaction cooks into
// the hook's container (the snapshot Compact writes without the hook:
// same id, same bytes), makes no snapshot directory in the home, serves
// the snapshot the OpenSnapshot hook maps out of the container and moves
// CURRENT; a failing hook changes nothing and leaves no directory. A
// store with CookPublish and no OpenSnapshot does not open.
func TestCookPublishHook(t *testing.T) {
	rec := []format.Record{{Seq: 1, Op: format.Upsert, SeriesID: "A", Period: day("2026-11-04"), Value: 4}}
	// The same compaction without the hook, for the expected snapshot.
	plainHome := cookHome(t)
	ps, err := Open(plainHome, &Options{CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ps.Apply("d", rec); err != nil {
		t.Fatal(err)
	}
	want, err := ps.Compact("d")
	if err != nil {
		t.Fatal(err)
	}
	wantDir := filepath.Join(ps.DatasetDir("d"), format.SnapshotsDir, want.SnapshotID)
	ps.Close()

	home := cookHome(t)
	h := &cookHook{home: home, dir: t.TempDir(), path: map[string]string{}, placed: map[string][]format.Placed{}}
	if _, err := Open(home, &Options{CookPublish: h.cook}); err == nil {
		t.Fatal("a store with CookPublish and no OpenSnapshot opened")
	}
	s, err := Open(home, &Options{CookPublish: h.cook, OpenSnapshot: h.open, CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dsDir := s.DatasetDir("d")
	before, _ := format.ReadCurrent(dsDir)
	if _, err := s.Apply("d", rec); err != nil {
		t.Fatal(err)
	}
	h.fail = true
	if _, err := s.Compact("d"); !errors.Is(err, errCatalogDown) {
		t.Fatalf("compact with a failing hook: %v, want errCatalogDown", err)
	}
	if id, _ := format.ReadCurrent(dsDir); id != before {
		t.Fatalf("CURRENT %s after a failed publish, want %s", id, before)
	}
	if _, snap, seq, _ := s.State("d"); snap != before || seq != 1 {
		t.Fatalf("state %s seq %d after a failed compaction", snap, seq)
	}
	if _, v := getAll(t, s, "A"); len(v) != 4 || v[3] != 4 {
		t.Fatalf("A after a failed compaction: %v, want the delta's row still served", v)
	}
	h.fail = false
	m, err := s.Compact("d")
	if err != nil {
		t.Fatal(err)
	}
	if m.SnapshotID != want.SnapshotID {
		t.Fatalf("cooked through the hook: %s, without it %s", m.SnapshotID, want.SnapshotID)
	}
	if id, _ := format.ReadCurrent(dsDir); id != m.SnapshotID {
		t.Fatalf("CURRENT %s, want %s", id, m.SnapshotID)
	}
	if _, err := os.Stat(filepath.Join(dsDir, format.SnapshotsDir, m.SnapshotID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a directory of the cooked snapshot in the home: %v", err)
	}
	if _, snap, seq, _ := s.State("d"); snap != m.SnapshotID || seq != 1 {
		t.Fatalf("state %s seq %d after the compaction", snap, seq)
	}
	if _, v := getAll(t, s, "A"); len(v) != 4 || v[3] != 4 {
		t.Fatalf("A after the compaction: %v", v)
	}
	b, err := os.ReadFile(h.path[m.SnapshotID])
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range h.placed[m.SnapshotID] {
		if f.Name == format.ManifestFile {
			continue // its created time is the wall clock's; the snapshot ids agree
		}
		w, err := os.ReadFile(filepath.Join(wantDir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b[f.Offset:f.Offset+f.Length], w) {
			t.Errorf("%s in the container differs from the directory compaction's", f.Name)
		}
	}
}

// TestInstallCooked: InstallCooked of a new dataset and of a later epoch
// of an existing one cooks through CookPublish and serves the snapshot
// mapped from the hook's container, with no directory in the home; one
// older than the snapshot in service is refused before it is published;
// the snapshot in service is not published again; a store without
// CookPublish answers ErrCookNeedsDirectory.
func TestInstallCooked(t *testing.T) {
	home := cookHome(t)
	h := &cookHook{home: home, dir: t.TempDir(), path: map[string]string{}, placed: map[string][]format.Placed{}}
	s, err := Open(home, &Options{CookPublish: h.cook, OpenSnapshot: h.open, CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cookOf := func(name string, epoch uint64, v float64) func(*format.Container) (*format.Manifest, error) {
		return func(c *format.Container) (*format.Manifest, error) {
			tb := &format.Table{Series: []format.SeriesMeta{{ID: name + ".X", Frequency: format.Daily}}}
			tb.Append(0, day("2026-11-01"), v)
			m, _, err := format.WriteInto(c, tb, format.WriteOptions{Dataset: name, Epoch: epoch})
			return m, err
		}
	}
	noDir := func(name, id string) {
		t.Helper()
		if _, err := os.Stat(filepath.Join(s.DatasetDir(name), format.SnapshotsDir, id)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a directory of cooked snapshot %s of %s: %v", id, name, err)
		}
	}
	mn, err := s.InstallCooked("n", cookOf("n", 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, v := getAll(t, s, "n.X"); len(v) != 1 || v[0] != 1 {
		t.Fatalf("n.X = %v", v)
	}
	noDir("n", mn.SnapshotID)
	if _, err := s.Apply("d", []format.Record{{Seq: 1, Op: format.Upsert, SeriesID: "A", Period: day("2026-11-04"), Value: 4}}); err != nil {
		t.Fatal(err)
	}
	md, err := s.InstallCooked("d", cookOf("d", 2, 7))
	if err != nil {
		t.Fatal(err)
	}
	if _, snap, _, _ := s.State("d"); snap != md.SnapshotID {
		t.Fatalf("d serves %s, want %s", snap, md.SnapshotID)
	}
	if _, v := getAll(t, s, "d.X"); len(v) != 1 || v[0] != 7 {
		t.Fatalf("d.X = %v", v)
	}
	if id, _ := format.ReadCurrent(s.DatasetDir("d")); id != md.SnapshotID {
		t.Fatalf("CURRENT %s", id)
	}
	noDir("d", md.SnapshotID)
	calls := len(h.path)
	if _, err := s.InstallCooked("d", cookOf("d", 1, 9)); err == nil || !strings.Contains(err.Error(), "older") {
		t.Fatalf("an older epoch: %v", err)
	}
	if m, err := s.InstallCooked("d", cookOf("d", 2, 7)); err != nil || m.SnapshotID != md.SnapshotID {
		t.Fatalf("the snapshot in service again: %v", err)
	}
	if len(h.path) != calls {
		t.Fatalf("%d snapshots published by a refused and a repeated install", len(h.path)-calls)
	}
	if _, snap, _, _ := s.State("d"); snap != md.SnapshotID {
		t.Fatalf("d serves %s after a refused install", snap)
	}

	plain, err := Open(cookHome(t), &Options{CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.InstallCooked("d", cookOf("d", 2, 7)); !errors.Is(err, ErrCookNeedsDirectory) {
		t.Fatalf("without CookPublish: %v", err)
	}
}
