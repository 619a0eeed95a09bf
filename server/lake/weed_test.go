package lake

// The lake against real remote parts: SeaweedFS's weed mini on loopback
// (internal/testweed: an S3 server and an Iceberg REST catalog; make test
// builds weed through scripts/install-deps.sh), with its REST catalog, and
// with PostgreSQL (internal/testpg) as the catalog over weed's S3. Under
// CI=true they always run; elsewhere they skip without weed (or without
// root and PostgreSQL).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/energyscope/energyscope/internal/testpg"
	"github.com/energyscope/energyscope/internal/testweed"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// TestWeedRESTCatalog: the lake with SeaweedFS's Iceberg REST catalog
// and its S3 warehouse (the catalog places the table under its table
// bucket). First, a wrong catalog credential (ES_CATALOG_CREDENTIAL) is
// an error at Open that creates nothing.
func TestWeedRESTCatalog(t *testing.T) {
	s := testweed.Start(t)
	s.Setenv(t)
	t.Setenv(EnvCatalogCredential, s.AccessKey+":wrong")
	if _, err := Open(context.Background(), Options{Home: t.TempDir(), CatalogURI: s.Catalog, Warehouse: s.RESTWarehouse(), S3Endpoint: s.S3}); err == nil {
		t.Fatal("Open with a wrong catalog credential succeeded")
	}
	if objs, err := s.Objects(s.TableBucket, ""); err != nil || len(objs) != 0 {
		t.Fatalf("a refused Open wrote %v (%v)", objs, err)
	}
	t.Setenv(EnvCatalogCredential, s.Credential())
	remoteLake(t, s, s.TableBucket, func(home string) Options {
		return Options{Home: home, CatalogURI: s.Catalog, Warehouse: s.RESTWarehouse(), S3Endpoint: s.S3}
	})

	// A bearer token (ES_CATALOG_TOKEN) instead of the credential reads
	// the same lake; a wrong one is refused.
	tok, err := s.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvCatalogCredential, "")
	for _, x := range []struct {
		token string
		ok    bool
	}{{tok, true}, {tok[:len(tok)-4] + "AAAA", false}} {
		t.Setenv(EnvCatalogToken, x.token)
		l, err := Open(context.Background(), Options{Home: t.TempDir(), CatalogURI: s.Catalog, Warehouse: s.RESTWarehouse(), S3Endpoint: s.S3})
		if err == nil {
			var vs []Vintage
			vs, err = l.Vintages(context.Background(), "stocks")
			if err == nil && len(vs) == 0 {
				t.Fatal("no vintages through the token")
			}
			l.Close()
		}
		if (err == nil) != x.ok {
			t.Fatalf("token (valid %v): %v", x.ok, err)
		}
	}
}

// TestWeedPostgresCatalog: the lake with its catalog in PostgreSQL and
// its warehouse on SeaweedFS's S3 (several servers sharing a lake).
func TestWeedPostgresCatalog(t *testing.T) {
	s := testweed.Start(t)
	pg := testpg.Start(t)
	s.Setenv(t)
	remoteLake(t, s, s.Bucket, func(home string) Options {
		return Options{Home: home, CatalogURI: pg.URI, Warehouse: s.Warehouse("wh"), S3Endpoint: s.S3}
	})
}

// remoteLake runs the lake's life on a remote catalog and warehouse: opts
// gives the options of a server whose home is home (each Lake below has
// its own home, as separate servers would).
//
// A first server publishes two vintages: iceberg-go's own scan of each
// equals its snapshot; every file lies in bucket and the bucket holds no
// other file of the table. A second server opens both vintages
// (downloaded into its cache, every blob's SHA-256 checked) and answers
// exactly as the snapshot directories; its vintages and as-of reads agree.
// Three servers then publish at once: all commits land on a linear
// history and the losing attempts leave no object behind. Retention: a
// tag keeps the first vintage, Expire(keep 2) deletes the others' objects,
// an expired vintage is ErrUnknownVintage, and a rollback to the tagged
// one restores its rows and serving index.
func remoteLake(t *testing.T, s *testweed.Server, bucket string, opts func(home string) Options) {
	ctx := context.Background()
	open := func() *Lake {
		l, err := Open(ctx, opts(t.TempDir()))
		if err != nil {
			t.Fatalf("open: %v\n%s", err, s.Log())
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	l1 := open()
	tab := sampleTable(t, "stocks")
	dir1 := writeSnapshot(t, "stocks", tab, format.WriteOptions{Epoch: 1, CoversThroughSeq: 1, Tail: format.TailList("MSFT")})
	dir2 := writeSnapshot(t, "stocks", scaled(tab, 2), format.WriteOptions{Epoch: 2, CoversThroughSeq: 2, Tail: format.TailList("MSFT")})
	v1 := mustPublish(t, l1, "stocks", dir1)
	v2 := mustPublish(t, l1, "stocks", dir2)
	tbl, err := l1.Table(ctx, "stocks")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tbl.Location(), "s3://"+bucket+"/") {
		t.Fatalf("table at %s, want in bucket %s", tbl.Location(), bucket)
	}
	sameRows(t, "scan of vintage 2", scanRows(t, tbl, v2.IcebergSnapshot), snapshotRows(t, dir2))
	sameRows(t, "scan of vintage 1", scanRows(t, tbl, v1.IcebergSnapshot), snapshotRows(t, dir1))
	checkBucket(t, s, bucket, tbl)

	// A second server: nothing cached, both vintages downloaded.
	home2 := t.TempDir()
	o2 := opts(home2)
	l2, err := Open(ctx, o2)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	cur, err := l2.Current(ctx, "stocks")
	if err != nil || cur.IcebergSnapshot != v2.IcebergSnapshot || cur.Snapshot != v2.Snapshot || !cur.Serving {
		t.Fatalf("second server's current vintage %+v, %v; want %+v", cur, err, v2)
	}
	for _, x := range []struct {
		v   Vintage
		dir string
	}{{v2, dir2}, {v1, dir1}} {
		snap, err := l2.OpenSnapshot(ctx, "stocks", x.v, snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		sameAnswers(t, snap, x.dir)
		snap.Close()
		if err := l2.Verify(ctx, "stocks", x.v); err != nil {
			t.Fatal(err)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(home2, Dir, CacheDir)); len(ents) != 2 {
		t.Fatalf("the second server's cache holds %d files, want the 2 downloaded vintages", len(ents))
	}
	vs, err := l2.Vintages(ctx, "stocks")
	if err != nil || len(vs) != 2 || vs[0].Snapshot != v1.Snapshot || vs[1].Snapshot != v2.Snapshot || vs[1].CoversSeq != 2 || vs[1].Epoch != 2 || vs[1].Rows == 0 {
		t.Fatalf("vintages %+v, %v", vs, err)
	}
	for when, want := range map[string]Vintage{
		v1.CommittedAt.Format(time.RFC3339Nano): v1,
		v2.CommittedAt.Format(time.RFC3339Nano): v2,
		v1.Snapshot:                             v1,
		fmt.Sprint(v2.IcebergSnapshot):          v2,
	} {
		if got, err := l2.Resolve(ctx, "stocks", when); err != nil || got.IcebergSnapshot != want.IcebergSnapshot {
			t.Fatalf("as-of %s: %+v, %v; want %d", when, got, err, want.IcebergSnapshot)
		}
	}
	if _, err := l2.Resolve(ctx, "stocks", v1.CommittedAt.Add(-time.Second).Format(time.RFC3339Nano)); !errors.Is(err, ErrBeforeFirstVintage) {
		t.Fatalf("as-of before the first vintage: %v", err)
	}
	if _, err := l2.Resolve(ctx, "stocks", "e9-s9-999999999999"); !errors.Is(err, ErrUnknownVintage) {
		t.Fatalf("unknown vintage: %v", err)
	}

	// Three servers publish at once: every commit lands on a linear
	// history; losing attempts leave nothing.
	const writers, each = 3, 2
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	var lakes []*Lake
	for w := range writers {
		l := open()
		lakes = append(lakes, l)
		var dirs []string
		for i := range each {
			n := 3 + w*each + i
			dirs = append(dirs, writeSnapshot(t, "stocks", scaled(tab, float64(n)), format.WriteOptions{Epoch: uint64(n), CoversThroughSeq: uint64(n)}))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, d := range dirs {
				if _, err := l.Publish(ctx, "stocks", d); err != nil {
					errs <- fmt.Errorf("writer %d: %w", w, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var conflicts int64
	for _, l := range lakes {
		conflicts += l.Metrics().Conflicts
	}
	tbl, _ = l1.Table(ctx, "stocks")
	vs = vintagesOf(tbl)
	if len(vs) != 2+writers*each {
		t.Fatalf("%d vintages after the concurrent publishes, want %d", len(vs), 2+writers*each)
	}
	for i := 1; i < len(vs); i++ {
		if p := tbl.SnapshotByID(vs[i].IcebergSnapshot).ParentSnapshotID; p == nil || *p != vs[i-1].IcebergSnapshot || !vs[i].Serving {
			t.Fatalf("vintage %d: parent is not vintage %d, or no serving index: %+v", i, i-1, vs[i])
		}
	}
	checkBucket(t, s, bucket, tbl)
	t.Logf("%d concurrent commits, %d lost races rebuilt", writers*each, conflicts)

	// Retention and rollback.
	if err := l1.Tag(ctx, "stocks", v1, "first"); err != nil {
		t.Fatal(err)
	}
	res, err := l1.Expire(ctx, "stocks", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Expired) != len(vs)-3 {
		t.Fatalf("expired %d vintages of %d, want all but the tagged one and the last 2", len(res.Expired), len(vs))
	}
	tbl, _ = l1.Table(ctx, "stocks")
	checkBucket(t, s, bucket, tbl)
	if _, err := open().OpenSnapshot(ctx, "stocks", v2, snapshot.Options{}); !errors.Is(err, ErrUnknownVintage) {
		t.Fatalf("open of an expired vintage: %v, want ErrUnknownVintage", err)
	}
	rb, err := l2.Rollback(ctx, "stocks", v1)
	if err != nil {
		t.Fatal(err)
	}
	tbl, _ = l1.Table(ctx, "stocks")
	sameRows(t, "rollback to the tagged vintage", scanRows(t, tbl, rb.IcebergSnapshot), snapshotRows(t, dir1))
	l3 := open()
	cur, err = l3.Current(ctx, "stocks")
	if err != nil || cur.IcebergSnapshot != rb.IcebergSnapshot || cur.RollbackOf != v1.IcebergSnapshot {
		t.Fatalf("current after the rollback %+v, %v", cur, err)
	}
	snap, err := l3.OpenSnapshot(ctx, "stocks", cur, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sameAnswers(t, snap, dir1)
	snap.Close()
	checkBucket(t, s, bucket, tbl)
}

// checkBucket fails unless the objects under the table's location in
// bucket are exactly the files its metadata references.
func checkBucket(t *testing.T, s *testweed.Server, bucket string, tbl *table.Table) {
	t.Helper()
	prefix := strings.TrimPrefix(tbl.Location(), "s3://"+bucket+"/") + "/"
	keys, err := s.Objects(bucket, prefix)
	if err != nil {
		t.Fatal(err)
	}
	var objs []string
	for _, k := range keys {
		objs = append(objs, "s3://"+bucket+"/"+k)
	}
	ref := referencedFiles(t, tbl)
	if !slices.Equal(objs, ref) {
		var orphan, missing []string
		for _, o := range objs {
			if !slices.Contains(ref, o) {
				orphan = append(orphan, o)
			}
		}
		for _, r := range ref {
			if !slices.Contains(objs, r) {
				missing = append(missing, r)
			}
		}
		t.Fatalf("bucket and metadata disagree:\norphans %v\nmissing %v", orphan, missing)
	}
}
