package companion_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/energyscope/energyscope/internal/companion"
	"github.com/energyscope/energyscope/internal/testweed"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/cook"
	"github.com/energyscope/energyscope/server/cook/samples"
	"github.com/energyscope/energyscope/server/lake"
)

// TestCompanionAsOfWeedLake: a companion's as-of reads when its server's
// lake is remote: SeaweedFS on loopback (internal/testweed), its Iceberg
// REST catalog and S3. The server's download cache is emptied after the
// publishes, so each vintage the companion asks for is downloaded from
// the bucket by the server (verified), sent over the sync connection and
// answered through the companion's bridge; the cache holds them after.
func TestCompanionAsOfWeedLake(t *testing.T) {
	w := testweed.Start(t)
	w.Setenv(t)
	ctx := context.Background()
	home := t.TempDir()
	lk, err := lake.Open(ctx, lake.Options{Home: home, CatalogURI: w.Catalog, Warehouse: w.RESTWarehouse(), S3Endpoint: w.S3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	srv, err := server.New(server.Options{Home: home, Lake: lk, CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	var opts cook.InputOptions
	for _, s := range samples.Sets {
		if s.Dataset == "stocks" {
			opts = s.Opts
		}
	}
	if _, err := srv.Replace("stocks", []string{"../../server/cook/samples/stocks.csv"}, opts); err != nil {
		t.Fatal(err)
	}
	for _, v := range []float64{1000, 2000} {
		if _, _, err := srv.Ingest("stocks", []format.Record{{Op: format.Upsert, SeriesID: "MSFT", Period: jan2000, Value: v}}); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.Compact("stocks"); err != nil {
			t.Fatal(err)
		}
	}
	vs, err := lk.Vintages(ctx, "stocks")
	if err != nil || len(vs) != 3 {
		t.Fatalf("vintages %+v, %v; want 3", vs, err)
	}
	// The publishes left their Puffin files in the server's download
	// cache: empty it (the current vintage stays mapped), so that the
	// older vintages come from the bucket.
	cache := filepath.Join(home, lake.Dir, lake.CacheDir)
	ents, err := os.ReadDir(cache)
	if err != nil || len(ents) == 0 {
		t.Fatalf("server cache after the publishes: %v %v", ents, err)
	}
	for _, e := range ents {
		if err := os.Remove(filepath.Join(cache, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	c, err := companion.Start(companion.Config{Home: t.TempDir(), Port: 0, Server: hs.URL, Datasets: []string{"stocks"}})
	if err != nil {
		t.Fatal(err)
	}
	defer closeC(t, c)
	waitFor(t, "the current snapshot synced", func() bool {
		_, id, _, err := c.Store().State("stocks")
		return err == nil && id == vs[2].Snapshot
	})
	wantValue(t, c, 39.81, "MSFT", "2000-01", "2000-01", "asof="+vs[0].Snapshot)
	wantValue(t, c, 1000, "MSFT", "2000-01", "2000-01", "asof="+vs[1].Snapshot)
	wantValue(t, c, 2000, "MSFT", "2000-01", "2000-01", "asof="+vs[2].Snapshot)
	if ents, _ := os.ReadDir(cache); len(ents) < 2 {
		t.Fatalf("server cache after the as-of reads holds %d files: the older vintages were not downloaded", len(ents))
	}
}
