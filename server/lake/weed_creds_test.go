package lake

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/iceberg-go/catalog"

	"github.com/energyscope/energyscope/internal/testweed"
	"github.com/energyscope/energyscope/localcache/format"
)

// TestWeedWrongS3SecretCreatesNothing: SeaweedFS's REST catalog with the
// right catalog credential but a wrong S3 secret. The catalog would
// create a table with its own credentials; the warehouse refuses ours.
// The publish fails with an error saying the warehouse refused the
// write, and the catalog holds no table (before, an empty table was
// left), the bucket no object. With the right secret the same publish
// then lands.
func TestWeedWrongS3SecretCreatesNothing(t *testing.T) {
	s := testweed.Start(t)
	s.Setenv(t)
	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
	ctx := context.Background()
	opts := Options{Home: t.TempDir(), CatalogURI: s.Catalog, Warehouse: s.RESTWarehouse(), S3Endpoint: s.S3}
	l, err := Open(ctx, opts)
	if err != nil {
		t.Fatalf("open (the catalog credential is right): %v", err)
	}
	defer l.Close()
	dir := writeSnapshot(t, "stocks", sampleTable(t, "stocks"), format.WriteOptions{Epoch: 1, CoversThroughSeq: 1})
	_, err = l.Publish(ctx, "stocks", dir)
	if !errors.Is(err, ErrWarehouseRefused) {
		t.Fatalf("publish with a wrong S3 secret: %v, want ErrWarehouseRefused", err)
	}
	t.Logf("refused: %v", err)
	cat, err := l.CatalogContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for id, err := range cat.ListTables(ctx, catalog.ToIdentifier(Namespace)) {
		if err != nil {
			break // no namespace: nothing was created either
		}
		t.Fatalf("the catalog holds table %v after a refused publish", id)
	}
	if objs, err := s.Objects(s.TableBucket, ""); err != nil || len(objs) != 0 {
		t.Fatalf("a refused publish left %v (%v)", objs, err)
	}

	t.Setenv("AWS_SECRET_ACCESS_KEY", s.SecretKey)
	l2, err := Open(ctx, Options{Home: t.TempDir(), CatalogURI: s.Catalog, Warehouse: s.RESTWarehouse(), S3Endpoint: s.S3})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	mustPublish(t, l2, "stocks", dir)
}
