package localcache_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// mutation damages one file of the snapshot directory dir.
type mutation func(t *testing.T, dir string)

func rewrite(t *testing.T, path string, edit func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, edit(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

func missing(name string) mutation {
	return func(t *testing.T, dir string) {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

func truncated(name string) mutation {
	return func(t *testing.T, dir string) {
		rewrite(t, filepath.Join(dir, name), func(b []byte) []byte { return b[:len(b)/2] })
	}
}

func extended(name string) mutation {
	return func(t *testing.T, dir string) {
		rewrite(t, filepath.Join(dir, name), func(b []byte) []byte { return append(b, 0) })
	}
}

func emptied(name string) mutation {
	return func(t *testing.T, dir string) {
		rewrite(t, filepath.Join(dir, name), func([]byte) []byte { return nil })
	}
}

// overwrite replaces the bytes at off (negative: from the end).
func overwrite(name string, off int, with string) mutation {
	return func(t *testing.T, dir string) {
		rewrite(t, filepath.Join(dir, name), func(b []byte) []byte {
			at := off
			if at < 0 {
				at += len(b)
			}
			copy(b[at:], with)
			return b
		})
	}
}

// manifestEdit rewrites manifest.json through edit (see fixManifestID).
func manifestEdit(edit func(m map[string]any)) mutation {
	return func(t *testing.T, dir string) {
		rewrite(t, filepath.Join(dir, format.ManifestFile), func(b []byte) []byte {
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			edit(m)
			out, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			return out
		})
	}
}

func fileEntry(m map[string]any, name string) map[string]any {
	for _, f := range m["files"].([]any) {
		if e := f.(map[string]any); e["name"] == name {
			return e
		}
	}
	panic("no " + name)
}

// swappedKind makes data.arrow a copy of index.arrow (and fixes the
// manifest's size for it), so that its only problem is its kind.
func swappedKind(t *testing.T, dir string) {
	b, err := os.ReadFile(filepath.Join(dir, format.IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, format.DataFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	manifestEdit(func(m map[string]any) { fileEntry(m, format.DataFile)["size"] = len(b) })(t, dir)
}

// hashHeader rewrites a header field of index.hash and its CRC.
func hashHeader(off int, v uint32) mutation {
	return func(t *testing.T, dir string) {
		rewrite(t, filepath.Join(dir, format.HashFile), func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[off:], v)
			binary.LittleEndian.PutUint32(b[28:], crc32.Checksum(b[:28], crc32.MakeTable(crc32.Castagnoli)))
			return b
		})
	}
}

// corruptions are the damages Open must refuse, each with the file the
// CorruptionError must name.
var corruptions = []struct {
	name   string
	file   string
	mutate mutation
}{
	{"manifest missing", format.ManifestFile, missing(format.ManifestFile)},
	{"manifest empty", format.ManifestFile, emptied(format.ManifestFile)},
	{"manifest garbage", format.ManifestFile, overwrite(format.ManifestFile, 0, "#!garbage")},
	{"manifest truncated", format.ManifestFile, truncated(format.ManifestFile)},
	{"manifest version from the future", format.ManifestFile, manifestEdit(func(m map[string]any) { m["version"] = format.FormatVersion + 1 })},
	{"manifest version 1 over index.hash 2", format.HashFile, manifestEdit(func(m map[string]any) { m["version"] = 1 })},
	{"manifest other format", format.ManifestFile, manifestEdit(func(m map[string]any) { m["format"] = "parquet" })},
	{"manifest unknown period type", format.ManifestFile, manifestEdit(func(m map[string]any) { m["period_type"] = "date64" })},
	{"manifest negative rows", format.ManifestFile, manifestEdit(func(m map[string]any) { m["rows"] = -1 })},
	{"manifest epoch not in id", format.ManifestFile, manifestEdit(func(m map[string]any) { m["epoch"] = 99 })},
	{"manifest lists no hash", format.ManifestFile, manifestEdit(func(m map[string]any) {
		fs := m["files"].([]any)
		m["files"] = fs[:2]
	})},
	{"manifest unknown file", format.ManifestFile, manifestEdit(func(m map[string]any) { fileEntry(m, format.HashFile)["name"] = "../../x" })},

	{"data missing", format.DataFile, missing(format.DataFile)},
	{"data truncated", format.DataFile, truncated(format.DataFile)},
	{"data extended", format.DataFile, extended(format.DataFile)},
	{"data size in manifest", format.DataFile, manifestEdit(func(m map[string]any) { fileEntry(m, format.DataFile)["size"] = 8 })},
	{"data bad magic", format.DataFile, overwrite(format.DataFile, 0, "ARROW2")},
	{"data bad trailing magic", format.DataFile, overwrite(format.DataFile, -6, "XXXXXX")},
	{"data bad footer size", format.DataFile, overwrite(format.DataFile, -10, "\xff\xff\xff\x7f")},
	{"data empty", format.DataFile, func(t *testing.T, dir string) {
		emptied(format.DataFile)(t, dir)
		manifestEdit(func(m map[string]any) {
			fileEntry(m, format.DataFile)["size"] = 0
			fileEntry(m, format.DataFile)["chunks"] = []any{}
		})(t, dir)
	}},
	{"data is an index file", format.DataFile, swappedKind},
	{"data batch count", format.DataFile, manifestEdit(func(m map[string]any) { m["batches"] = m["batches"].(float64) + 1 })},

	{"index missing", format.IndexFile, missing(format.IndexFile)},
	{"index truncated", format.IndexFile, truncated(format.IndexFile)},
	{"index extended", format.IndexFile, extended(format.IndexFile)},
	{"index size in manifest", format.IndexFile, manifestEdit(func(m map[string]any) { fileEntry(m, format.IndexFile)["size"] = 1 << 20 })},
	{"index bad magic", format.IndexFile, overwrite(format.IndexFile, 0, "\x00\x00\x00\x00\x00\x00")},
	{"index bad trailing magic", format.IndexFile, overwrite(format.IndexFile, -6, "ARROW2")},
	{"index series count", format.IndexFile, manifestEdit(func(m map[string]any) { m["series"] = m["series"].(float64) + 1 })},
	{"index period type", format.IndexFile, manifestEdit(func(m map[string]any) { m["period_type"] = string(format.PeriodTimestamp) })},

	{"hash missing", format.HashFile, missing(format.HashFile)},
	{"hash truncated", format.HashFile, truncated(format.HashFile)},
	{"hash extended", format.HashFile, extended(format.HashFile)},
	{"hash size in manifest", format.HashFile, manifestEdit(func(m map[string]any) { fileEntry(m, format.HashFile)["size"] = 31 })},
	{"hash bad magic", format.HashFile, overwrite(format.HashFile, 0, "ESHASH\x00\x02")},
	{"hash header crc", format.HashFile, overwrite(format.HashFile, 12, "\x05")},
	{"hash version 2", format.HashFile, hashHeader(8, 2)},
	{"hash series count", format.HashFile, hashHeader(16, 1)},
	{"hash slot count", format.HashFile, hashHeader(12, 30)},
	{"hash empty", format.HashFile, func(t *testing.T, dir string) {
		emptied(format.HashFile)(t, dir)
		manifestEdit(func(m map[string]any) {
			fileEntry(m, format.HashFile)["size"] = 0
			fileEntry(m, format.HashFile)["chunks"] = []any{}
		})(t, dir)
	}},
}

func wantCorruption(t *testing.T, err error, file string) {
	t.Helper()
	var ce *format.CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T), want a *format.CorruptionError naming %s", err, err, file)
	}
	if ce.File != file {
		t.Fatalf("CorruptionError names %q, want %q: %v", ce.File, file, err)
	}
}

// fixManifestID recomputes the content-addressed snapshot id after a
// manifest edit meant to test something else than the id check, by the
// rule of FORMAT.md: SHA-256 over "<name>:<sha256>\n" of the files, in
// manifest order.
func fixManifestID(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, format.ManifestFile))
	if err != nil {
		return // the manifest itself is the damage
	}
	var m format.Manifest
	if json.Unmarshal(b, &m) != nil {
		return
	}
	h := sha256.New()
	for _, f := range m.Files {
		fmt.Fprintf(h, "%s:%s\n", f.Name, f.SHA256)
	}
	id := fmt.Sprintf("e%d-s%d-%s", m.Epoch, m.CoversThroughSeq, hex.EncodeToString(h.Sum(nil))[:12])
	manifestEdit(func(mm map[string]any) { mm["snapshot_id"] = id })(t, dir)
}

// cloneDir copies the directory tree src to a new temp directory.
func cloneDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "c")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// installSnapshot copies the snapshot directory src into dataset ds of home
// (as a sync would) and returns its path there; CURRENT is left alone.
func installSnapshot(t *testing.T, home, ds, src string) string {
	t.Helper()
	dst := filepath.Join(home, localcache.DatasetsDir, ds, format.SnapshotsDir, filepath.Base(src))
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func setCurrent(t *testing.T, home, ds, dir string) {
	t.Helper()
	if err := format.WriteCurrent(filepath.Join(home, localcache.DatasetsDir, ds), filepath.Base(dir)); err != nil {
		t.Fatal(err)
	}
}

// TestOpenRefusesCorruption damages each file of a published snapshot in
// each way: snapshot.Open must refuse it with a CorruptionError naming the
// file, never panic or fault, and localcache.Open must open the home with
// the dataset listed as damaged for that reason.
func TestOpenRefusesCorruption(t *testing.T) {
	tmpl := t.TempDir()
	publish(t, tmpl, "ds", versionTable(5, 1), format.WriteOptions{Epoch: 1, BatchRows: 40})
	for _, c := range corruptions {
		t.Run(c.name, func(t *testing.T) {
			home := cloneDir(t, tmpl)
			id, err := format.ReadCurrent(filepath.Join(home, localcache.DatasetsDir, "ds"))
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(home, localcache.DatasetsDir, "ds", format.SnapshotsDir, id)
			c.mutate(t, dir)
			if c.name != "manifest epoch not in id" {
				fixManifestID(t, dir)
			}
			s, err := snapshot.Open(dir)
			if err == nil {
				s.Close()
				t.Fatal("snapshot.Open accepted the damaged snapshot")
			}
			wantCorruption(t, err, c.file)
			wantMapped(t, dir, false) // a failed open leaves nothing mapped
			wantDamagedOpen(t, home, nil, c.file)
			if _, verr := format.Verify(dir); verr == nil {
				t.Error("format.Verify accepted the damaged snapshot")
			}
		})
	}
}

// TestRefreshKeepsServingOnCorruption: a store serves snapshot A; CURRENT
// moves to a damaged snapshot B; Refresh reports the corruption and A keeps
// serving, unchanged, until a good snapshot C is published.
func TestRefreshKeepsServingOnCorruption(t *testing.T) {
	tmpl := t.TempDir()
	ma, _ := publish(t, tmpl, "ds", versionTable(4, 1), format.WriteOptions{Epoch: 1})
	_, srcB := publish(t, t.TempDir(), "ds", versionTable(4, 2), format.WriteOptions{Epoch: 2, BatchRows: 40})
	mc, srcC := publish(t, t.TempDir(), "ds", versionTable(4, 3), format.WriteOptions{Epoch: 3})
	for _, c := range corruptions {
		if c.name == "manifest epoch not in id" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			home := cloneDir(t, tmpl)
			dirA := filepath.Join(home, localcache.DatasetsDir, "ds", format.SnapshotsDir, ma.SnapshotID)
			st := openStore(t, home)
			dirB := installSnapshot(t, home, "ds", srcB)
			c.mutate(t, dirB)
			fixManifestID(t, dirB)
			setCurrent(t, home, "ds", dirB)
			for range 2 { // and again: still refused, still serving A
				err := st.Refresh()
				if err == nil {
					t.Fatal("Refresh accepted the damaged snapshot")
				}
				wantCorruption(t, err, c.file)
				r, err := st.Get("S3", snapshot.MinTime, snapshot.MaxTime)
				if err != nil || !allEqual(r.Points, 1, 30) {
					t.Fatalf("after the failed Refresh: %v, %v", r.Points.Values, err)
				}
				r.Release()
				if in, err := st.Info("ds:S0"); err != nil || in.SnapshotID != ma.SnapshotID {
					t.Fatalf("serving %s (%v), want %s", in.SnapshotID, err, ma.SnapshotID)
				}
			}
			wantMapped(t, dirA, true)
			wantMapped(t, dirB, false) // a failed open leaves nothing mapped

			setCurrent(t, home, "ds", installSnapshot(t, home, "ds", srcC))
			if err := st.Refresh(); err != nil {
				t.Fatal(err)
			}
			r, err := st.Get("S3", snapshot.MinTime, snapshot.MaxTime)
			if err != nil || !allEqual(r.Points, 3, 30) {
				t.Fatalf("after C: %v, %v", r.Points.Values, err)
			}
			r.Release()
			if in, _ := st.Info("S0"); in.SnapshotID != mc.SnapshotID {
				t.Fatalf("serving %s, want %s", in.SnapshotID, mc.SnapshotID)
			}
			wantMapped(t, dirA, false)
		})
	}
}

func TestCurrentProblems(t *testing.T) {
	for _, c := range []struct {
		name    string
		current string
		file    string
	}{
		{"garbage", "not an id\n", format.CurrentFile},
		{"path escape", "../../etc\n", format.CurrentFile},
		{"unknown snapshot", "e1-s0-000000000000\n", format.ManifestFile},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			publish(t, home, "ds", versionTable(2, 1), format.WriteOptions{})
			cur := filepath.Join(home, localcache.DatasetsDir, "ds", format.CurrentFile)
			if err := os.WriteFile(cur, []byte(c.current), 0o644); err != nil {
				t.Fatal(err)
			}
			wantDamagedOpen(t, home, nil, c.file)
		})
	}
	// A dataset directory without CURRENT is being created: not an error.
	home := t.TempDir()
	publish(t, home, "ds", versionTable(2, 1), format.WriteOptions{})
	if err := os.MkdirAll(filepath.Join(home, localcache.DatasetsDir, "new", format.SnapshotsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	st := openStore(t, home)
	if names := st.DatasetNames(); len(names) != 1 || names[0] != "ds" {
		t.Fatalf("datasets %v", names)
	}
}

// A snapshot of another dataset, or a directory whose manifest names
// another snapshot than CURRENT does, is not served.
func TestRefreshRefusesForeignSnapshot(t *testing.T) {
	for _, c := range []struct {
		name  string
		place func(t *testing.T, home string) string // returns the dir CURRENT will name
	}{
		{"other dataset", func(t *testing.T, home string) string {
			_, src := publish(t, t.TempDir(), "other", versionTable(2, 5), format.WriteOptions{Epoch: 5})
			return installSnapshot(t, home, "ds", src)
		}},
		{"directory named for another id", func(t *testing.T, home string) string {
			_, src := publish(t, t.TempDir(), "ds", versionTable(2, 5), format.WriteOptions{Epoch: 5})
			dst := filepath.Join(home, localcache.DatasetsDir, "ds", format.SnapshotsDir, "e9-s9-0123456789ab")
			if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
				t.Fatal(err)
			}
			return dst
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			ma, _ := publish(t, home, "ds", versionTable(2, 1), format.WriteOptions{Epoch: 1})
			st := openStore(t, home)
			setCurrent(t, home, "ds", c.place(t, home))
			if err := st.Refresh(); err == nil {
				t.Fatal("Refresh served the snapshot")
			}
			r, err := st.Get("S1", snapshot.MinTime, snapshot.MaxTime)
			if err != nil || !allEqual(r.Points, 1, 30) {
				t.Fatalf("after the refused Refresh: %v, %v", r.Points.Values, err)
			}
			r.Release()
			if in, _ := st.Info("S1"); in.SnapshotID != ma.SnapshotID {
				t.Fatalf("serving %s, want %s", in.SnapshotID, ma.SnapshotID)
			}
			wantDamagedOpen(t, home, &localcache.Options{ReadOnly: true}, format.ManifestFile)
		})
	}
}

// wantDamagedOpen opens home: Open must succeed (a damaged dataset never
// fails the whole home), list "ds" as damaged by a CorruptionError naming
// file, refuse lookups in it with ErrDamaged, and report it in Status.
func wantDamagedOpen(t *testing.T, home string, o *localcache.Options, file string) {
	t.Helper()
	st, err := localcache.Open(home, o)
	if err != nil {
		t.Fatalf("Open failed for one damaged dataset: %v", err)
	}
	defer st.Close()
	err = st.Damaged("ds")
	if !errors.Is(err, localcache.ErrDamaged) {
		t.Fatalf("Damaged(ds) = %v, want ErrDamaged", err)
	}
	wantCorruption(t, err, file)
	if _, err := st.Get("ds:S1", snapshot.MinTime, snapshot.MaxTime); !errors.Is(err, localcache.ErrDamaged) {
		t.Fatalf("Get in the damaged dataset: %v, want ErrDamaged", err)
	}
	ss, err := st.Status()
	if err != nil || len(ss) != 1 || ss[0].Health != localcache.Damaged || !errors.Is(ss[0].Err, localcache.ErrDamaged) {
		t.Fatalf("Status = %+v, %v; want ds damaged", ss, err)
	}
}
