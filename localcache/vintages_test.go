package localcache_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
)

// stageVintage writes a snapshot of series A whose values are base+i into
// a directory, as a download would leave it (without its manifest).
func stageVintage(t *testing.T, c *localcache.VintageCache, seq uint64, base float64) (localcache.VintageMeta, *format.Manifest, string) {
	t.Helper()
	tb := &format.Table{Series: []format.SeriesMeta{{ID: "A", Frequency: format.Daily}}}
	for i := range 100 {
		tb.Append(0, utc("2020-01-01")+int64(i)*86400, base+float64(i))
	}
	tmp := filepath.Join(t.TempDir(), "snap")
	m, _, err := format.Write(tmp, tb, format.WriteOptions{Dataset: "ds", Epoch: 1, CoversThroughSeq: seq, Created: time.Unix(1700000000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "staged")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range m.Files {
		b, err := os.ReadFile(filepath.Join(tmp, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	meta := localcache.VintageMeta{Dataset: "ds", Snapshot: m.SnapshotID, Iceberg: int64(seq), CommittedAt: time.Unix(1700000000+int64(seq), 0).UTC(), Tags: []string{"t" + m.SnapshotID[:4]}}
	return meta, m, dir
}

func readA(t *testing.T, c *localcache.VintageCache, id string) (float64, error) {
	t.Helper()
	s, _, err := c.Acquire("ds", id)
	if err != nil {
		return 0, err
	}
	defer s.Unref()
	row, ok := s.Lookup("A")
	if !ok {
		t.Fatal("A not in the vintage")
	}
	p, err := s.Get(row, utc("2020-01-02"), utc("2020-01-02"))
	if err != nil || p.Len() != 1 {
		t.Fatalf("get: %v %d", err, p.Len())
	}
	return p.Values[0], nil
}

// TestVintageCacheLRU: vintages committed are read back, survive a reopen,
// and beyond MaxCount the least recently used one goes (its files too).
func TestVintageCacheLRU(t *testing.T) {
	home := t.TempDir()
	c, err := localcache.OpenVintageCache(home, &localcache.VintageCacheOptions{MaxCount: 2})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, base := range []float64{100, 200, 300} {
		meta, m, dir := stageVintage(t, c, uint64(i+1), base)
		if err := c.Commit(meta, m, dir); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.SnapshotID)
		if i == 1 {
			// Use the first: the second is then the least recently used.
			if v, err := readA(t, c, ids[0]); err != nil || v != 101 {
				t.Fatalf("vintage 0: %v %v", v, err)
			}
		}
	}
	if n, _ := c.Usage(); n != 2 {
		t.Fatalf("%d vintages cached, want 2", n)
	}
	if _, err := readA(t, c, ids[1]); !errors.Is(err, localcache.ErrNoVintage) {
		t.Fatalf("evicted vintage: %v", err)
	}
	if _, err := os.Stat(filepath.Join(home, localcache.VintagesDir, "ds", ids[1])); !os.IsNotExist(err) {
		t.Fatalf("evicted vintage's files are still there: %v", err)
	}
	if v, err := readA(t, c, ids[2]); err != nil || v != 301 {
		t.Fatalf("vintage 2: %v %v", v, err)
	}
	if meta, ok := c.Find("ds", func(m localcache.VintageMeta) bool { return len(m.Tags) > 0 && m.Tags[0] == "t"+ids[2][:4] }); !ok || meta.Snapshot != ids[2] {
		t.Fatalf("find by tag: %+v %v", meta, ok)
	}
	c.Close()

	// A download cut short is swept at open; the vintages stay.
	if err := os.MkdirAll(filepath.Join(home, localcache.VintagesDir, "ds", ".dl-e1-s9-000000000000"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err = localcache.OpenVintageCache(home, &localcache.VintageCacheOptions{MaxCount: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if v, err := readA(t, c, ids[0]); err != nil || v != 101 {
		t.Fatalf("after reopen, vintage 0: %v %v", v, err)
	}
	if _, err := os.Stat(filepath.Join(home, localcache.VintagesDir, "ds", ".dl-e1-s9-000000000000")); !os.IsNotExist(err) {
		t.Fatalf("staging directory not swept: %v", err)
	}
}

// TestVintageCacheEvictInUse: a vintage evicted while a reader holds it
// stays mapped and readable until the reader lets go, then its files go.
func TestVintageCacheEvictInUse(t *testing.T) {
	home := t.TempDir()
	c, err := localcache.OpenVintageCache(home, &localcache.VintageCacheOptions{MaxCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	meta, m, dir := stageVintage(t, c, 1, 100)
	if err := c.Commit(meta, m, dir); err != nil {
		t.Fatal(err)
	}
	s, _, err := c.Acquire("ds", m.SnapshotID)
	if err != nil {
		t.Fatal(err)
	}
	meta2, m2, dir2 := stageVintage(t, c, 2, 200)
	if err := c.Commit(meta2, m2, dir2); err != nil {
		t.Fatal(err)
	}
	if c.Has("ds", m.SnapshotID) {
		t.Fatal("the first vintage should be evicted")
	}
	final := filepath.Join(home, localcache.VintagesDir, "ds", m.SnapshotID)
	row, _ := s.Lookup("A")
	if p, err := s.Get(row, utc("2020-01-03"), utc("2020-01-03")); err != nil || p.Values[0] != 102 {
		t.Fatalf("reader of the evicted vintage: %v", err)
	}
	if _, err := os.Stat(final); err != nil {
		t.Fatalf("files removed under a reader: %v", err)
	}
	wantMapped(t, final, true)
	s.Unref()
	if _, err := os.Stat(final); !os.IsNotExist(err) {
		t.Fatalf("files kept after the last reader: %v", err)
	}
	wantMapped(t, final, false)
}

// TestVintageCacheRefusesDamage: a staged file that does not match the
// manifest is refused (typed corruption), and nothing is cached.
func TestVintageCacheRefusesDamage(t *testing.T) {
	home := t.TempDir()
	c, err := localcache.OpenVintageCache(home, &localcache.VintageCacheOptions{MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	meta, m, dir := stageVintage(t, c, 1, 100)
	b, err := os.ReadFile(filepath.Join(dir, format.DataFile))
	if err != nil {
		t.Fatal(err)
	}
	b[100] ^= 1
	if err := os.WriteFile(filepath.Join(dir, format.DataFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	err = c.Commit(meta, m, dir)
	var ce *format.CorruptionError
	if !errors.As(err, &ce) || ce.File != format.DataFile {
		t.Fatalf("commit of a damaged vintage: %v", err)
	}
	if c.Has("ds", m.SnapshotID) {
		t.Fatal("damaged vintage cached")
	}
	// A vintage whose metadata does not match its manifest is refused too.
	meta, m, dir = stageVintage(t, c, 2, 100)
	meta.Snapshot = "e1-s0-000000000000"
	if err := c.Commit(meta, m, dir); err == nil {
		t.Fatal("commit with mismatched metadata succeeded")
	}
}

// TestVintageCacheBytesBound: MaxBytes evicts as MaxCount does.
func TestVintageCacheBytesBound(t *testing.T) {
	home := t.TempDir()
	c, err := localcache.OpenVintageCache(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	meta, m, dir := stageVintage(t, c, 1, 100)
	if err := c.Commit(meta, m, dir); err != nil {
		t.Fatal(err)
	}
	_, one := c.Usage()
	c.Close()
	c, err = localcache.OpenVintageCache(home, &localcache.VintageCacheOptions{MaxBytes: one + one/2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	meta2, m2, dir2 := stageVintage(t, c, 2, 200)
	if err := c.Commit(meta2, m2, dir2); err != nil {
		t.Fatal(err)
	}
	if n, b := c.Usage(); n != 1 || b > one+one/2 || c.Has("ds", m.SnapshotID) || !c.Has("ds", m2.SnapshotID) {
		t.Fatalf("usage %d vintages %d bytes (bound %d); first held %v", n, b, one+one/2, c.Has("ds", m.SnapshotID))
	}
}

// TestVintageCacheStage: a vintage downloaded through the cache's Stage
// (chunks verified as they arrive, a damaged chunk dropped, a cut
// download resumed by a later Stage) is committed into the cache, not
// into the store.
func TestVintageCacheStage(t *testing.T) {
	home := t.TempDir()
	c, err := localcache.OpenVintageCache(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	meta, m, src := stageVintage(t, c, 1, 100)
	st, err := c.Stage(meta, m)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Verify(); err != nil {
		t.Fatal(err)
	}
	// The first file, then a cut: Close keeps it for the next Stage.
	b, err := os.ReadFile(filepath.Join(src, m.Files[0].Name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(b); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Finish(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = c.Stage(meta, m)
	if err != nil {
		t.Fatal(err)
	}
	skipped, _, err := st.Verify()
	if err != nil || skipped != m.Files[0].Size {
		t.Fatalf("resume skipped %d bytes (%v), want %d", skipped, err, m.Files[0].Size)
	}
	for {
		i, off, open := st.Pos()
		if !open {
			break
		}
		b, err := os.ReadFile(filepath.Join(src, m.Files[i].Name))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 0 {
			bad := append([]byte(nil), b[off:]...)
			bad[0] ^= 1
			if _, err := st.Append(bad); !errors.Is(err, format.ErrChunkMismatch) {
				t.Fatalf("damaged chunk of %s: %v", m.Files[i].Name, err)
			}
			if _, err := st.Append(b[off:]); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := st.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Commit(); err != nil {
		t.Fatal(err)
	}
	if v, err := readA(t, c, m.SnapshotID); err != nil || v != 101 {
		t.Fatalf("staged vintage: %v %v", v, err)
	}
	if _, err := os.Stat(filepath.Join(home, localcache.DatasetsDir, "ds")); !os.IsNotExist(err) {
		t.Fatalf("a vintage went into the store: %v", err)
	}
}
