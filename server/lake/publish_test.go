package lake

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/energyscope/energyscope/localcache/format"
)

// TestPublishScanEqualsSnapshot publishes two vintages of each sample set
// (one with a cold tier) and reads the current and the older vintage back
// with iceberg-go's own scan: the rows equal the serving reader's rows of
// the snapshot directories, sorted by (series, period), with the es
// summary keys, no delete files and the serving index registered.
func TestPublishScanEqualsSnapshot(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		dataset string
		tail    *format.TailRule
		period  format.PeriodType
	}{
		{"iowa", nil, format.PeriodDate32},
		{"stocks", format.TailList("MSFT", "IBM"), format.PeriodDate32},
		{"seattle", nil, format.PeriodTimestamp},
	}
	l := openLake(t, t.TempDir())
	for _, c := range cases {
		t.Run(c.dataset, func(t *testing.T) {
			tab := sampleTable(t, c.dataset)
			dir1 := writeSnapshot(t, c.dataset, tab, format.WriteOptions{Epoch: 1, CoversThroughSeq: 7, Tail: c.tail})
			dir2 := writeSnapshot(t, c.dataset, scaled(tab, 1.5), format.WriteOptions{Epoch: 2, CoversThroughSeq: 9, Tail: c.tail})
			m1, _ := format.ReadManifest(dir1)
			m2, _ := format.ReadManifest(dir2)
			if m1.PeriodType != c.period {
				t.Fatalf("sample period type %s, want %s", m1.PeriodType, c.period)
			}
			if c.tail != nil && m1.File(format.TailFile) == nil {
				t.Fatal("the tail case has no tail.parquet")
			}
			v1 := mustPublish(t, l, c.dataset, dir1)
			v2 := mustPublish(t, l, c.dataset, dir2)
			for _, x := range []struct {
				v Vintage
				m *format.Manifest
			}{{v1, m1}, {v2, m2}} {
				if x.v.Snapshot != x.m.SnapshotID || x.v.Epoch != x.m.Epoch || x.v.CoversSeq != x.m.CoversThroughSeq || x.v.Rows != x.m.Rows || !x.v.Serving {
					t.Fatalf("vintage %+v does not match manifest %s e%d s%d rows %d", x.v, x.m.SnapshotID, x.m.Epoch, x.m.CoversThroughSeq, x.m.Rows)
				}
			}
			tbl, err := l.Table(ctx, c.dataset)
			if err != nil {
				t.Fatal(err)
			}
			if got := tbl.CurrentSnapshot().SnapshotID; got != v2.IcebergSnapshot {
				t.Fatalf("head %d, want the second publish %d", got, v2.IcebergSnapshot)
			}
			for _, x := range []struct {
				name string
				v    Vintage
				dir  string
			}{{"current", v2, dir2}, {"older", v1, dir1}} {
				got := scanRows(t, tbl, x.v.IcebergSnapshot)
				sameRows(t, x.name, got, snapshotRows(t, x.dir))
				if !slices.IsSortedFunc(got, rowLess) {
					t.Errorf("%s: the data file is not sorted by (series_id, period)", x.name)
				}
				tasks, err := tbl.Scan(table.WithSnapshotID(x.v.IcebergSnapshot)).PlanFiles(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, task := range tasks {
					if len(task.DeleteFiles) != 0 {
						t.Fatalf("%s: delete files %v: the lake must stay copy-on-write", x.name, task.DeleteFiles)
					}
				}
				snap := tbl.SnapshotByID(x.v.IcebergSnapshot)
				if snap.Summary.Operation != table.OpOverwrite && x.name == "current" {
					t.Errorf("%s: operation %s, want overwrite", x.name, snap.Summary.Operation)
				}
				si, err := l.Artifacts(ctx, c.dataset, x.v)
				if err != nil {
					t.Fatal(err)
				}
				checkArtifacts(t, si, x.dir)
			}
		})
	}
}

// checkArtifacts checks every blob against the snapshot file it carries,
// read in place from the Puffin file at its offset, and its alignment.
func checkArtifacts(t *testing.T, si *ServingIndex, dir string) {
	t.Helper()
	if si.Path == "" {
		t.Fatal("no local path for a file:// warehouse")
	}
	pf, err := os.ReadFile(si.Path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := format.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{format.ManifestFile}
	for _, f := range m.Files {
		want = append(want, f.Name)
	}
	var got []string
	for _, b := range si.Blobs {
		got = append(got, b.File)
		if b.Offset%PageSize != 0 {
			t.Errorf("%s at offset %d: not page-aligned", b.File, b.Offset)
		}
		orig, err := os.ReadFile(filepath.Join(dir, b.File))
		if err != nil {
			t.Fatal(err)
		}
		if b.Offset+b.Length > int64(len(pf)) || string(pf[b.Offset:b.Offset+b.Length]) != string(orig) {
			t.Errorf("%s: the blob at [%d,+%d) is not the file's bytes", b.File, b.Offset, b.Length)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("blobs %v, want %v", got, want)
	}
}

// TestExtractOpensWithFormat extracts the current and an older vintage and
// verifies them completely with localcache/format; the files are the
// published bytes.
func TestExtractOpensWithFormat(t *testing.T) {
	ctx := context.Background()
	l := openLake(t, t.TempDir())
	tab := sampleTable(t, "stocks")
	dir1 := writeSnapshot(t, "stocks", tab, format.WriteOptions{Tail: format.TailList("AAPL")})
	dir2 := writeSnapshot(t, "stocks", scaled(tab, 2), format.WriteOptions{CoversThroughSeq: 3})
	v1 := mustPublish(t, l, "stocks", dir1)
	mustPublish(t, l, "stocks", dir2)
	cur, err := l.Current(ctx, "stocks")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	for _, x := range []struct {
		v   Vintage
		dir string
	}{{cur, dir2}, {v1, dir1}} {
		dst := filepath.Join(out, x.v.Snapshot)
		m, err := l.Extract(ctx, "stocks", x.v, dst)
		if err != nil {
			t.Fatal(err)
		}
		if m.SnapshotID != x.v.Snapshot {
			t.Fatalf("extracted %s, want %s", m.SnapshotID, x.v.Snapshot)
		}
		if _, err := format.Verify(dst); err != nil {
			t.Fatalf("extracted snapshot does not verify: %v", err)
		}
		sameRows(t, "extracted", snapshotRows(t, dst), snapshotRows(t, x.dir))
		if _, err := l.Extract(ctx, "stocks", x.v, dst); err == nil {
			t.Fatal("extract over an existing directory succeeded")
		}
	}
}

// TestExtractRefusesCorruptPuffin flips a byte of data.arrow inside the
// Puffin file: Extract refuses with a CorruptionError and leaves no
// directory behind.
func TestExtractRefusesCorruptPuffin(t *testing.T) {
	ctx := context.Background()
	l := openLake(t, t.TempDir())
	v := mustPublish(t, l, "iowa", cookSample(t, "iowa", format.WriteOptions{}))
	si, err := l.Artifacts(ctx, "iowa", v)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := si.Blob(format.DataFile)
	f, err := os.OpenFile(si.Path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	one := []byte{0}
	f.ReadAt(one, b.Offset+b.Length/2)
	one[0] ^= 0xff
	f.WriteAt(one, b.Offset+b.Length/2)
	f.Close()
	dst := filepath.Join(t.TempDir(), "x")
	_, err = l.Extract(ctx, "iowa", v, dst)
	var ce *format.CorruptionError
	if !errors.As(err, &ce) || ce.File != format.DataFile {
		t.Fatalf("extract of a corrupt blob: %v, want a CorruptionError on %s", err, format.DataFile)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Fatalf("a refused extract left %s", dst)
	}
	ents, _ := os.ReadDir(filepath.Dir(dst))
	if len(ents) != 0 {
		t.Fatalf("a refused extract left %v", ents)
	}
}

// TestPublishBadInput: a snapshot of another dataset, a corrupted file, a
// missing directory, a bad dataset name and a period type change are
// refused with typed errors and change nothing.
func TestPublishBadInput(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	l := openLake(t, home)
	v := mustPublish(t, l, "iowa", cookSample(t, "iowa", format.WriteOptions{}))
	before := warehouseFiles(t, home)

	corrupt := cookSample(t, "iowa", format.WriteOptions{CoversThroughSeq: 1})
	p := filepath.Join(corrupt, format.DataFile)
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 1
	os.WriteFile(p, b, 0o644)

	for _, c := range []struct {
		name, dataset, dir string
		want               error
	}{
		{"other dataset", "iowa", cookSample(t, "stocks", format.WriteOptions{}), ErrBadSnapshot},
		{"corrupt file", "iowa", corrupt, ErrBadSnapshot},
		{"missing dir", "iowa", filepath.Join(t.TempDir(), "nope"), ErrBadSnapshot},
		{"bad name", "../iowa", corrupt, ErrBadSnapshot},
		{"period type change", "iowa", writeSnapshot(t, "iowa", sampleTable(t, "seattle"), format.WriteOptions{}), ErrSchemaChanged},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := l.Publish(ctx, c.dataset, c.dir)
			if !errors.Is(err, c.want) {
				t.Fatalf("publish: %v, want %v", err, c.want)
			}
		})
	}
	cur, err := l.Current(ctx, "iowa")
	if err != nil || cur.IcebergSnapshot != v.IcebergSnapshot {
		t.Fatalf("current after refused publishes: %+v, %v; want %d", cur, err, v.IcebergSnapshot)
	}
	if after := warehouseFiles(t, home); !slices.Equal(before, after) {
		t.Fatalf("refused publishes changed the warehouse:\nbefore %v\nafter  %v", before, after)
	}
	if _, err := l.Vintages(ctx, "nosuch"); !errors.Is(err, ErrNoDataset) {
		t.Fatalf("vintages of an unknown dataset: %v, want ErrNoDataset", err)
	}
}

// warehouseFiles lists every file under home/lake/warehouse.
func warehouseFiles(t testing.TB, home string) []string {
	t.Helper()
	var out []string
	root := filepath.Join(home, Dir, WarehouseDir)
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	slices.Sort(out)
	return out
}
