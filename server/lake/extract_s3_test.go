package lake

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/energyscope/energyscope/internal/testweed"
	"github.com/energyscope/energyscope/localcache/format"
)

// TestExtractFromS3InFewReads: Extract copies a vintage's blobs out of an
// S3 warehouse (SeaweedFS) in large reads. Each read of iceberg-go's S3
// file is one ranged GET, so a copy 32 KiB at a time (io.Copy's buffer)
// cost a GET per 32 KiB: a pet-scale vintage (235 MiB) took ~7,500 GETs
// and 13 s at start of a fresh replica (BENCHMARKS.md "Cluster: the
// issue's benchmarks with live companions"). A proxy in front of weed's
// S3 counts the GETs.
func TestExtractFromS3InFewReads(t *testing.T) {
	s := testweed.Start(t)
	s.Setenv(t)
	target, err := url.Parse(s.S3)
	if err != nil {
		t.Fatal(err)
	}
	var gets atomic.Int64
	rp := httputil.NewSingleHostReverseProxy(target)
	px := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	defer px.Close()

	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "snap")
	tab := benchTable(1 << 19)
	m, _, err := format.Write(dir, tab, format.WriteOptions{Dataset: "ex", Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(ctx, Options{Home: t.TempDir(), Warehouse: s.Warehouse("ex"), S3Endpoint: px.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	v, err := l.Publish(ctx, "ex", dir)
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	for _, f := range m.Files {
		size += f.Size
	}
	before := gets.Load()
	out := filepath.Join(t.TempDir(), "out")
	got, err := l.Extract(ctx, "ex", v, out)
	if err != nil {
		t.Fatal(err)
	}
	if got.SnapshotID != m.SnapshotID {
		t.Fatalf("extracted snapshot %s, published %s", got.SnapshotID, m.SnapshotID)
	}
	n := gets.Load() - before
	// Metadata reads plus one GET per blob per 8 MiB; the 32 KiB copy
	// needed size/32 KiB (~280 here).
	if max := int64(len(m.Files)+1)*(1+size/(8<<20)) + 10; n > max {
		t.Fatalf("Extract of %d bytes in %d files made %d GETs; want at most %d", size, len(m.Files), n, max)
	}
	t.Logf("Extract of %d bytes in %d files: %d GETs", size, len(m.Files), n)
}
