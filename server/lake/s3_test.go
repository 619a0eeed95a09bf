package lake

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// fakeS3 starts an in-process S3 server on 127.0.0.1 with one bucket and
// points the AWS environment at it (static test credentials; no instance
// metadata lookups).
func fakeS3(t *testing.T, bucket string) (endpoint string, be *s3mem.Backend) {
	t.Helper()
	be = s3mem.New()
	if err := be.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(be).Server())
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "test-key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_S3_ENDPOINT", "")
	return srv.URL, be
}

// TestS3Warehouse publishes two vintages of a sample with a cold tier to
// an s3:// warehouse on an in-process S3 server: iceberg-go's own scan of
// both vintages equals the snapshot rows; OpenSnapshot downloads each
// vintage's Puffin file into the cache (every blob's SHA-256 checked),
// maps it and answers exactly as the snapshot directory; a second open
// maps the cached copy without downloading; a damaged object is refused
// with a CorruptionError and nothing is cached; nothing is written to the
// local disk but the catalog and the cache.
func TestS3Warehouse(t *testing.T) {
	ctx := context.Background()
	endpoint, be := fakeS3(t, "lake")
	home := t.TempDir()
	l, err := Open(ctx, Options{Home: home, Warehouse: "s3://lake/wh", S3Endpoint: endpoint, S3Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tab := sampleTable(t, "stocks")
	dir1 := writeSnapshot(t, "stocks", tab, format.WriteOptions{Epoch: 1, Tail: format.TailList("MSFT")})
	dir2 := writeSnapshot(t, "stocks", scaled(tab, 2), format.WriteOptions{Epoch: 2, CoversThroughSeq: 4, Tail: format.TailList("MSFT")})
	v1 := mustPublish(t, l, "stocks", dir1)
	v2 := mustPublish(t, l, "stocks", dir2)
	tbl, err := l.Table(ctx, "stocks")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tbl.MetadataLocation(), "s3://lake/wh/") {
		t.Fatalf("metadata at %s, want under s3://lake/wh/", tbl.MetadataLocation())
	}
	sameRows(t, "scan of the current vintage", scanRows(t, tbl, v2.IcebergSnapshot), snapshotRows(t, dir2))
	sameRows(t, "scan of the older vintage", scanRows(t, tbl, v1.IcebergSnapshot), snapshotRows(t, dir1))

	cacheDir := filepath.Join(home, Dir, CacheDir)
	cached := func() []string {
		ents, _ := os.ReadDir(cacheDir)
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	for i, x := range []struct {
		v   Vintage
		dir string
	}{{v2, dir2}, {v1, dir1}} {
		s, err := l.OpenSnapshot(ctx, "stocks", x.v, snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		sameAnswers(t, s, x.dir)
		s.Close()
		if n := len(cached()); n != i+1 {
			t.Fatalf("cache holds %v after %d opens", cached(), i+1)
		}
	}
	// A second open maps the cached copy: with the object gone from the
	// bucket it still opens.
	si, err := locate(ctx, indexTable(tbl), "stocks", v2.IcebergSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimPrefix(si.Location, "s3://lake/")
	obj, err := be.GetObject("lake", key, nil)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := io.ReadAll(obj.Contents)
	obj.Contents.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := be.DeleteObject("lake", key); err != nil {
		t.Fatal(err)
	}
	s, err := l.OpenSnapshot(ctx, "stocks", v2, snapshot.Options{})
	if err != nil {
		t.Fatalf("open from the cache: %v", err)
	}
	s.Close()

	// A damaged object: the download is refused, nothing is cached.
	if err := os.RemoveAll(cacheDir); err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(orig)
	b, _ := si.Blob(format.IndexFile)
	bad[b.Offset+b.Length/2] ^= 0x20
	if _, err := be.PutObject("lake", key, map[string]string{}, bytes.NewReader(bad), int64(len(bad)), nil); err != nil {
		t.Fatal(err)
	}
	_, err = l.OpenSnapshot(ctx, "stocks", v2, snapshot.Options{})
	var ce *format.CorruptionError
	if !errors.As(err, &ce) || ce.File != format.IndexFile {
		t.Fatalf("download of a damaged Puffin file: %v, want a CorruptionError on %s", err, format.IndexFile)
	}
	if left := cached(); len(left) != 0 {
		t.Fatalf("a refused download left %v in the cache", left)
	}
	// The object gone: NoServingIndexError.
	if _, err := be.DeleteObject("lake", key); err != nil {
		t.Fatal(err)
	}
	if _, err := l.OpenSnapshot(ctx, "stocks", v2, snapshot.Options{}); !errors.Is(err, ErrNoServingIndex) {
		t.Fatalf("Puffin object missing: %v, want ErrNoServingIndex", err)
	}
	// Only the catalog and the (emptied) cache are local.
	ents, _ := os.ReadDir(filepath.Join(home, Dir))
	for _, e := range ents {
		if e.Name() != CatalogFile && !strings.HasPrefix(e.Name(), CatalogFile+"-") && e.Name() != CacheDir {
			t.Fatalf("local lake directory holds %s", e.Name())
		}
	}
}

// TestS3Options: a bad s3 warehouse or endpoint is refused before
// anything is opened.
func TestS3Options(t *testing.T) {
	for _, o := range []Options{
		{Home: t.TempDir(), Warehouse: "s3:///nobucket"},
		{Home: t.TempDir(), Warehouse: "s3://b/p", S3Endpoint: "localhost:9000"},
		{Home: t.TempDir(), Warehouse: "gs://b/p"},
	} {
		if _, err := Open(context.Background(), o); err == nil {
			t.Fatalf("Open(%+v) succeeded", o)
		}
	}
}

// TestS3RollbackExpire: on an s3:// warehouse a rollback restores an
// older vintage (scan and serving index), and expiry removes the expired
// vintages' objects while the kept ones still open.
func TestS3RollbackExpire(t *testing.T) {
	ctx := context.Background()
	endpoint, be := fakeS3(t, "lake")
	l, err := Open(ctx, Options{Home: t.TempDir(), Warehouse: "s3://lake/wh", S3Endpoint: endpoint, S3Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tab := sampleTable(t, "iowa")
	var vs []Vintage
	var dirs []string
	for i := range 3 {
		d := writeSnapshot(t, "iowa", scaled(tab, float64(i+1)), format.WriteOptions{CoversThroughSeq: uint64(i)})
		dirs = append(dirs, d)
		vs = append(vs, mustPublish(t, l, "iowa", d))
	}
	objects := func() int {
		r, err := be.ListBucket("lake", &gofakes3.Prefix{}, gofakes3.ListBucketPage{})
		if err != nil {
			t.Fatal(err)
		}
		return len(r.Contents)
	}
	rb, err := l.Rollback(ctx, "iowa", vs[0])
	if err != nil {
		t.Fatal(err)
	}
	tbl, _ := l.Table(ctx, "iowa")
	sameRows(t, "rollback", scanRows(t, tbl, rb.IcebergSnapshot), snapshotRows(t, dirs[0]))
	s, err := l.OpenSnapshot(ctx, "iowa", rb, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sameAnswers(t, s, dirs[0])
	s.Close()
	before := objects()
	res, err := l.Expire(ctx, "iowa", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Expired) != 3 || objects() >= before {
		t.Fatalf("expired %d vintages, objects %d -> %d", len(res.Expired), before, objects())
	}
	if _, err := l.OpenSnapshot(ctx, "iowa", vs[1], snapshot.Options{}); !errors.Is(err, ErrUnknownVintage) {
		t.Fatalf("expired vintage: %v", err)
	}
	s, err = l.OpenSnapshot(ctx, "iowa", rb, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sameAnswers(t, s, dirs[0])
	s.Close()
}

// TestS3Region: with no region configured anywhere, an s3:// warehouse
// on an S3-compatible endpoint signs with DefaultS3Region and publishes
// (the AWS SDK used to refuse the first write: "A region must be set");
// one on AWS itself (no endpoint) is ErrNoS3Region at Open; a region from
// AWS_REGION is used as is.
func TestS3Region(t *testing.T) {
	ctx := context.Background()
	endpoint, _ := fakeS3(t, "lake")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	l, err := Open(ctx, Options{Home: t.TempDir(), Warehouse: "s3://lake/wh", S3Endpoint: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Publish(ctx, "stocks", cookSample(t, "stocks", format.WriteOptions{})); err != nil {
		t.Fatalf("publish without a configured region: %v", err)
	}
	if _, err := Open(ctx, Options{Home: t.TempDir(), Warehouse: "s3://lake/wh"}); !errors.Is(err, ErrNoS3Region) {
		t.Fatalf("AWS warehouse without a region: %v, want ErrNoS3Region", err)
	}
	t.Setenv("AWS_REGION", "eu-west-3")
	l2, err := Open(ctx, Options{Home: t.TempDir(), Warehouse: "s3://lake/wh"})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if r := l2.props[iceio.S3Region]; r != "eu-west-3" {
		t.Fatalf("region %q, want AWS_REGION's", r)
	}
}
