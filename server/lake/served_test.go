package lake

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// TestServedRecordOpensWithoutCatalog: the served-vintage record written
// from OpenSnapshotIndex maps the vintage with OpenServing on a Lake
// whose catalog never connects (ConnectLater, a PostgreSQL URI nobody
// listens on), answering as the snapshot directory does; a record that
// was tampered with is a *format.CorruptionError, and a Puffin file that
// is gone is ErrNoServingIndex.
func TestServedRecordOpensWithoutCatalog(t *testing.T) {
	home := t.TempDir()
	dir := cookSample(t, "stocks", format.WriteOptions{})
	l := openLake(t, home)
	v := mustPublish(t, l, "stocks", dir)
	s, si, err := l.OpenSnapshotIndex(context.Background(), "stocks", v, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := WriteServed(home, "stocks", si); err != nil {
		t.Fatal(err)
	}
	// Port 1 on loopback: nothing listens, the connection is refused.
	down, err := Open(context.Background(), Options{Home: home, CatalogURI: "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2", ConnectLater: true})
	if err != nil {
		t.Fatalf("Open with ConnectLater failed on a catalog that is down: %v", err)
	}
	defer down.Close()
	if _, err := down.Current(context.Background(), "stocks"); !errors.Is(err, ErrCatalogUnreachable) {
		t.Fatalf("Current with the catalog down: %v, want ErrCatalogUnreachable", err)
	}
	// Catalog() is never nil: its calls fail the same way.
	if _, err := down.Catalog().CheckNamespaceExists(context.Background(), down.Identifier("x")[:1]); !errors.Is(err, ErrCatalogUnreachable) {
		t.Fatalf("Catalog().CheckNamespaceExists with the catalog down: %v", err)
	}
	for _, err := range down.Catalog().ListTables(context.Background(), down.Identifier("x")[:1]) {
		if !errors.Is(err, ErrCatalogUnreachable) {
			t.Fatalf("Catalog().ListTables with the catalog down: %v", err)
		}
	}
	rec, err := ReadServed(home, "stocks")
	if err != nil {
		t.Fatal(err)
	}
	got, err := down.OpenServing("stocks", rec, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sameAnswers(t, got, dir)
	got.Close()

	b, err := os.ReadFile(ServedPath(home, "stocks"))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		regexp.MustCompile(`"offset":(\d+)`).ReplaceAllString(string(b), `"offset":${1}4`), // not page-aligned
		strings.Replace(string(b), `"dataset":"stocks"`, `"dataset":"gas"`, 1),
		string(b[:len(b)/2]),
	} {
		if err := os.WriteFile(ServedPath(home, "stocks"), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadServed(home, "stocks"); !errors.As(err, new(*format.CorruptionError)) {
			t.Errorf("ReadServed of a damaged record: %v, want a CorruptionError", err)
		}
	}
	wrong := *rec
	wrong.Vintage.Snapshot = "e9-s9-0123456789ab"
	if s, err := down.OpenServing("stocks", &wrong, snapshot.Options{}); err == nil || !errors.As(err, new(*format.CorruptionError)) {
		if s != nil {
			s.Close()
		}
		t.Errorf("OpenServing of a record naming another snapshot: %v, want a CorruptionError", err)
	}
	if err := os.Remove(rec.Path); err != nil {
		t.Fatal(err)
	}
	if _, err := down.OpenServing("stocks", rec, snapshot.Options{}); !errors.Is(err, ErrNoServingIndex) {
		t.Errorf("OpenServing with the Puffin file gone: %v, want ErrNoServingIndex", err)
	}
}

// TestServedRecordRemoteWarehouse: for a remote warehouse (the download
// path, forced on a file:// one) OpenServing maps the verified copy in the
// cache without the catalog, and refuses when that copy is gone (it
// downloads nothing).
func TestServedRecordRemoteWarehouse(t *testing.T) {
	home := t.TempDir()
	dir := cookSample(t, "stocks", format.WriteOptions{})
	l := openLake(t, home)
	l.forceDownload = true
	v := mustPublish(t, l, "stocks", dir)
	s, si, err := l.OpenSnapshotIndex(context.Background(), "stocks", v, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	down, err := Open(context.Background(), Options{Home: home, CatalogURI: "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2", ConnectLater: true})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	down.forceDownload = true
	got, err := down.OpenServing("stocks", si, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sameAnswers(t, got, dir)
	got.Close()
	if err := os.RemoveAll(down.opts.CacheDir); err != nil {
		t.Fatal(err)
	}
	if _, err := down.OpenServing("stocks", si, snapshot.Options{}); !errors.Is(err, ErrNoServingIndex) {
		t.Fatalf("OpenServing with the cached copy gone: %v, want ErrNoServingIndex", err)
	}
}
