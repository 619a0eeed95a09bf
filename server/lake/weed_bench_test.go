package lake

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/internal/testweed"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// BenchmarkColdOpenWeed measures a replica's cold start from a remote
// lake: a fresh Lake with an empty download cache on SeaweedFS (weed
// mini on loopback: its Iceberg REST catalog and S3) opens the current
// vintage (Open, Current, OpenSnapshot: the Puffin file downloaded, every
// blob's SHA-256 checked, mapped) and answers one lookup; side by side in
// each iteration, the same vintage from a file:// lake (mapped in place).
// It reports both, their ratio, the Puffin file's size and the download
// rate.
//
//	go test ./server/lake -run '^$' -bench ColdOpenWeed -benchtime 3x
//	ES_LAKE_BENCH_ROWS=13800000 go test ./server/lake -run '^$' -bench ColdOpenWeed -benchtime 1x -timeout 30m
func BenchmarkColdOpenWeed(b *testing.B) {
	w := testweed.Start(b)
	for _, kv := range w.Env() {
		k, v, _ := strings.Cut(kv, "=")
		b.Setenv(k, v)
	}
	tab := benchTable(benchRows(b))
	ctx := context.Background()
	dir := filepath.Join(b.TempDir(), "snap")
	if _, _, err := format.Write(dir, tab, format.WriteOptions{Dataset: "bench", Epoch: 1}); err != nil {
		b.Fatal(err)
	}
	fileHome := b.TempDir()
	weedOpts := func() Options {
		return Options{Home: b.TempDir(), CatalogURI: w.Catalog, Warehouse: w.RESTWarehouse(), S3Endpoint: w.S3}
	}
	var size int64
	for _, o := range []Options{{Home: fileHome}, weedOpts()} {
		l, err := Open(ctx, o)
		if err != nil {
			b.Fatal(err)
		}
		v, err := l.Publish(ctx, "bench", dir)
		if err != nil {
			b.Fatal(err)
		}
		if o.CatalogURI != "" {
			t, err := l.Table(ctx, "bench")
			if err != nil {
				b.Fatal(err)
			}
			for sf := range t.Metadata().Statistics() {
				if sf.SnapshotID == v.IcebergSnapshot {
					size = sf.FileSizeInBytes
				}
			}
		}
		l.Close()
	}
	probe := tab.Series[len(tab.Series)/2].ID
	cold := func(o Options) {
		l, err := Open(ctx, o)
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		v, err := l.Current(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		s, err := l.OpenSnapshot(ctx, "bench", v, snapshot.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := s.Lookup(probe); !ok {
			b.Fatal("probe series missing")
		}
		s.Close()
	}
	var local, remote time.Duration
	for b.Loop() {
		t0 := time.Now()
		cold(Options{Home: fileHome})
		t1 := time.Now()
		cold(weedOpts()) // a new home: nothing cached
		remote += time.Since(t1)
		local += t1.Sub(t0)
	}
	n := float64(b.N)
	b.ReportMetric(local.Seconds()*1000/n, "file_ms")
	b.ReportMetric(remote.Seconds()*1000/n, "weed_ms")
	b.ReportMetric(remote.Seconds()/local.Seconds(), "weed/file")
	b.ReportMetric(float64(size)/(1<<20), "puffin_MiB")
	b.ReportMetric(float64(size)/(1<<20)/(remote.Seconds()/n), "MiB/s")
}
