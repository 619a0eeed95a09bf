package lake

// The PostgreSQL catalog against a real PostgreSQL server from Debian's
// postgresql package (scripts/install-deps.sh installs it), started on
// loopback as the postgres user and stopped after. It needs root (runuser);
// under CI=true it always runs, elsewhere it skips without root or the
// package.

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/energyscope/energyscope/internal/testpg"
	"github.com/energyscope/energyscope/localcache/format"
)

func TestPostgresCatalog(t *testing.T) {
	ctx := context.Background()
	uri := testpg.Start(t).URI
	home := t.TempDir()
	wh := "file://" + filepath.Join(home, Dir, WarehouseDir)
	open := func() *Lake {
		l, err := Open(ctx, Options{CatalogURI: uri, Warehouse: wh})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	l := open()
	tab := sampleTable(t, "stocks")
	dir1 := writeSnapshot(t, "stocks", tab, format.WriteOptions{})
	v1 := mustPublish(t, l, "stocks", dir1)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for w := range 3 {
		lw := open()
		dirs := []string{
			writeSnapshot(t, "stocks", scaled(tab, float64(2+2*w)), format.WriteOptions{CoversThroughSeq: uint64(1 + 2*w)}),
			writeSnapshot(t, "stocks", scaled(tab, float64(3+2*w)), format.WriteOptions{CoversThroughSeq: uint64(2 + 2*w)}),
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, d := range dirs {
				if _, err := lw.Publish(ctx, "stocks", d); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	vs, err := l.Vintages(ctx, "stocks")
	if err != nil || len(vs) != 7 {
		t.Fatalf("%d vintages, %v; want 7", len(vs), err)
	}
	tbl, _ := l.Table(ctx, "stocks")
	sameRows(t, "older vintage", scanRows(t, tbl, v1.IcebergSnapshot), snapshotRows(t, dir1))
	checkNoOrphans(t, home, tbl)
	if v, err := l.Resolve(ctx, "stocks", time.Now().UTC().Format(time.RFC3339Nano)); err != nil || v.IcebergSnapshot != vs[6].IcebergSnapshot {
		t.Fatalf("as-of now: %+v, %v", v, err)
	}
}
