package lake

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/puffin"
	"github.com/apache/iceberg-go/table"

	"github.com/energyscope/energyscope/internal/testweed"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// cookInto is a cook for PublishCooked: t written into the container.
func cookInto(dataset string, t *format.Table, o format.WriteOptions) func(*format.Container) (*format.Manifest, error) {
	o.Dataset = dataset
	if o.Epoch == 0 {
		o.Epoch = 1
	}
	if o.Created.IsZero() {
		o.Created = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	}
	return func(c *format.Container) (*format.Manifest, error) {
		m, _, err := format.WriteInto(c, t, o)
		return m, err
	}
}

// TestPublishCooked: a snapshot cooked straight into its Puffin file (the
// first publish of a table in the cache directory, then renamed into the
// new table's metadata directory; the next in place in the warehouse) is the vintage Publish makes of the
// same snapshot directory: the same blobs byte for byte, page-aligned,
// the same rows through iceberg-go's scan, the same answers mapped in
// place; iceberg-go's Puffin reader reads the file; every file was
// fsynced; no file is left beside what the metadata references.
func TestPublishCooked(t *testing.T) {
	var mu sync.Mutex
	synced := map[string]bool{}
	hook := func(p string) {
		mu.Lock()
		synced[filepath.Clean(p)] = true
		mu.Unlock()
	}
	syncHook.Store(&hook)
	t.Cleanup(func() { syncHook.Store(nil) })

	ctx := context.Background()
	home := t.TempDir()
	l := openLake(t, home)
	cases := []struct {
		dataset string
		tail    *format.TailRule
	}{{"iowa", nil}, {"stocks", format.TailList("MSFT", "IBM")}, {"seattle", nil}}
	for _, c := range cases {
		t.Run(c.dataset, func(t *testing.T) {
			tab := sampleTable(t, c.dataset)
			var vs []Vintage
			var dirs []string
			for i, f := range []float64{1, 1.5, 2} {
				o := format.WriteOptions{Epoch: 1, CoversThroughSeq: uint64(7 + i), Tail: c.tail}
				dirs = append(dirs, writeSnapshot(t, c.dataset, scaled(tab, f), o))
				var over int64
				if i > 0 {
					over = vs[i-1].IcebergSnapshot
				}
				v, m, err := l.PublishCooked(ctx, c.dataset, cookInto(c.dataset, scaled(tab, f), o), func(m *format.Manifest) PublishOptions {
					return PublishOptions{Over: over}
				})
				if err != nil {
					t.Fatalf("publish %d: %v", i, err)
				}
				want, _ := format.ReadManifest(dirs[i])
				if v.Snapshot != want.SnapshotID || m.SnapshotID != want.SnapshotID || !v.Serving || v.Rows != want.Rows {
					t.Fatalf("publish %d: vintage %+v, manifest %s, want %s", i, v, m.SnapshotID, want.SnapshotID)
				}
				vs = append(vs, v)
			}
			tbl, err := l.Table(ctx, c.dataset)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range vs {
				sameRows(t, "scan", scanRows(t, tbl, v.IcebergSnapshot), snapshotRows(t, dirs[i]))
				si, err := l.Artifacts(ctx, c.dataset, v)
				if err != nil {
					t.Fatal(err)
				}
				checkArtifacts(t, si, dirs[i])
				readWithIcebergPuffin(t, si, dirs[i])
				s, err := l.OpenSnapshot(ctx, c.dataset, v, snapshot.Options{})
				if err != nil {
					t.Fatal(err)
				}
				sameAnswers(t, s, dirs[i])
				s.Close()
			}
		})
	}
	var tbls []*table.Table
	for _, c := range cases {
		tbl, err := l.Table(ctx, c.dataset)
		if err != nil {
			t.Fatal(err)
		}
		tbls = append(tbls, tbl)
	}
	checkNoOrphans(t, home, tbls...)
	mu.Lock()
	defer mu.Unlock()
	for _, f := range warehouseFiles(t, home) {
		if !synced[f] {
			t.Errorf("%s was not fsynced", f)
		}
		if !synced[filepath.Dir(f)] {
			t.Errorf("the directory of %s was not fsynced", f)
		}
	}
	noCookTemps(t, home)
}

// readWithIcebergPuffin reads every blob of the vintage's Puffin file
// with iceberg-go's Puffin reader: each is the snapshot file's bytes.
func readWithIcebergPuffin(t *testing.T, si *ServingIndex, dir string) {
	t.Helper()
	f, err := os.Open(si.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := puffin.NewReader(f)
	if err != nil {
		t.Fatalf("iceberg-go's puffin reader: %v", err)
	}
	n := 0
	for i, bm := range r.Blobs() {
		b, err := r.ReadBlob(i)
		if err != nil {
			t.Fatalf("read blob %s: %v", bm.Type, err)
		}
		if bm.Type == BlobPadding {
			if !bytes.Equal(b.Data, make([]byte, len(b.Data))) {
				t.Errorf("padding at %d is not zeros", bm.Offset)
			}
			continue
		}
		n++
		want, err := os.ReadFile(filepath.Join(dir, bm.Properties[PropFile]))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b.Data, want) {
			t.Errorf("blob %s is not %s", bm.Type, bm.Properties[PropFile])
		}
	}
	if n != len(si.Blobs) {
		t.Errorf("the puffin reader found %d artifacts, the table metadata %d", n, len(si.Blobs))
	}
}

// noCookTemps fails if a temporary container is left in the cache.
func noCookTemps(t *testing.T, home string) {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(home, Dir, CacheDir))
	for _, e := range ents {
		if strings.Contains(e.Name(), "cook-") {
			t.Errorf("temporary container left: %s", e.Name())
		}
	}
}

// TestPublishCookedFailures: a cook that fails, one that writes another
// dataset, a commit that loses to a moved head (ErrHeadMoved) and a
// conflict retried on the new head: nothing is left behind by the
// failures, and the retried publish reuses its one container.
func TestPublishCookedFailures(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	l := openLake(t, home)
	tab := sampleTable(t, "iowa")
	v1, _, err := l.PublishCooked(ctx, "iowa", cookInto("iowa", tab, format.WriteOptions{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if _, _, err := l.PublishCooked(ctx, "iowa", func(c *format.Container) (*format.Manifest, error) {
		cookInto("iowa", scaled(tab, 2), format.WriteOptions{})(c)
		return nil, boom
	}, nil); !errors.Is(err, boom) {
		t.Fatalf("failed cook: %v", err)
	}
	if _, _, err := l.PublishCooked(ctx, "iowa", cookInto("other", scaled(tab, 2), format.WriteOptions{}), nil); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("cook of another dataset: %v", err)
	}
	if _, _, err := l.PublishCooked(ctx, "iowa", cookInto("iowa", scaled(tab, 3), format.WriteOptions{}),
		func(*format.Manifest) PublishOptions { return PublishOptions{Over: v1.IcebergSnapshot + 1} }); !errors.Is(err, ErrHeadMoved) {
		t.Fatalf("pinned to a head that is not: %v", err)
	}
	tbl, _ := l.Table(ctx, "iowa")
	checkNoOrphans(t, home, tbl)
	noCookTemps(t, home)
	if cur, _ := l.Current(ctx, "iowa"); cur.IcebergSnapshot != v1.IcebergSnapshot {
		t.Fatalf("head %d after failed publishes, want %d", cur.IcebergSnapshot, v1.IcebergSnapshot)
	}

	// Another writer commits while the cooked publish waits to commit:
	// it loses the race once, rebuilds on the new head with the same
	// container, and commits.
	other := writeSnapshot(t, "iowa", scaled(tab, 5), format.WriteOptions{CoversThroughSeq: 5})
	raced := false
	l.beforeCommit = func() {
		if !raced {
			raced = true
			l2 := openLake(t, home)
			mustPublish(t, l2, "iowa", other)
		}
	}
	v, _, err := l.PublishCooked(ctx, "iowa", cookInto("iowa", scaled(tab, 4), format.WriteOptions{CoversThroughSeq: 9}), nil)
	l.beforeCommit = nil
	if err != nil {
		t.Fatal(err)
	}
	tbl, _ = l.Table(ctx, "iowa")
	if headID(tbl) != v.IcebergSnapshot || len(vintagesOf(tbl)) != 3 {
		t.Fatalf("head %d, want %d; %d vintages", headID(tbl), v.IcebergSnapshot, len(vintagesOf(tbl)))
	}
	checkNoOrphans(t, home, tbl)
	if _, err := l.OpenSnapshot(ctx, "iowa", v, snapshot.Options{}); err != nil {
		t.Fatal(err)
	}
}

// TestPublishCookedS3: with an S3 warehouse (SeaweedFS) the cooked
// container is written in the cache directory, uploaded as the vintage's
// Puffin file and removed: a lake with an empty cache downloads and
// verifies it and answers as the snapshot directory does; no temporary
// container is left.
func TestPublishCookedS3(t *testing.T) {
	s := testweed.Start(t)
	s.Setenv(t)
	ctx := context.Background()
	home := t.TempDir()
	l, err := Open(ctx, Options{Home: home, Warehouse: s.Warehouse("cooked"), S3Endpoint: s.S3})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tab := sampleTable(t, "stocks")
	var dirs []string
	var vs []Vintage
	for i, f := range []float64{1, 2} {
		o := format.WriteOptions{CoversThroughSeq: uint64(i), Tail: format.TailList("MSFT")}
		dirs = append(dirs, writeSnapshot(t, "stocks", scaled(tab, f), o))
		v, _, err := l.PublishCooked(ctx, "stocks", cookInto("stocks", scaled(tab, f), o), nil)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	noCookTemps(t, home)
	// The publishing lake keeps each uploaded container as its download
	// cache's verified copy: opening the vintage it just committed maps
	// that copy instead of downloading the file again.
	for i, v := range vs {
		si, err := l.Artifacts(ctx, "stocks", v)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(filepath.Join(l.opts.CacheDir, cacheName(si.Location)))
		if err != nil {
			t.Fatalf("vintage %d: no cached copy of the uploaded Puffin file: %v", i, err)
		}
		for _, b := range si.Blobs {
			if err := checkSHA(f, b); err != nil {
				t.Fatalf("vintage %d: cached copy: %v", i, err)
			}
		}
		f.Close()
	}
	l.Close()
	// Another lake on the same catalog with an empty cache: it downloads.
	l2, err := Open(ctx, Options{Home: home, CacheDir: t.TempDir(), Warehouse: s.Warehouse("cooked"), S3Endpoint: s.S3})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	for i, v := range vs {
		si, err := l2.Artifacts(ctx, "stocks", v)
		if err != nil {
			t.Fatal(err)
		}
		if si.Path != "" || !strings.HasPrefix(si.Location, "s3://") {
			t.Fatalf("vintage %d lies at %q (%q): not in the bucket", i, si.Location, si.Path)
		}
		if err := l2.Verify(ctx, "stocks", v); err != nil {
			t.Fatal(err)
		}
		snap, err := l2.OpenSnapshot(ctx, "stocks", v, snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		sameAnswers(t, snap, dirs[i])
		snap.Close()
	}
}
