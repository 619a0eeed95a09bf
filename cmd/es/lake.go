package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/lake"
)

// lakeFlags are the flags that place a server home's lake (README, "The
// lake"): by default an embedded SQLite catalog at HOME/lake/catalog.db
// and a warehouse at HOME/lake/warehouse.
type lakeFlags struct {
	catalog, warehouse, s3Endpoint string
}

func (f *lakeFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&f.catalog, "catalog", "", "Iceberg catalog of the lake: empty = embedded SQLite at HOME/lake/catalog.db; postgres://... (several servers), http(s)://... (REST; credentials from ES_CATALOG_CREDENTIAL=ID:SECRET or ES_CATALOG_TOKEN) or sqlite:PATH")
	fs.StringVar(&f.warehouse, "warehouse", "", "where the lake's data and serving files go: file:///PATH, an absolute path or s3://BUCKET/PREFIX (default HOME/lake/warehouse)")
	fs.StringVar(&f.s3Endpoint, "s3-endpoint", "", "S3 endpoint URL for an s3:// --warehouse (credentials from the usual AWS variables)")
}

// set reports whether a lake flag was given.
func (f *lakeFlags) set() bool { return f.catalog != "" || f.warehouse != "" || f.s3Endpoint != "" }

func (f *lakeFlags) options(home string) (lake.Options, error) {
	o := lake.DefaultOptions(home)
	o.CatalogURI, o.Warehouse, o.S3Endpoint = f.catalog, f.warehouse, f.s3Endpoint
	if err := o.Validate(); err != nil {
		return o, usageError{err}
	}
	return o, nil
}

// open opens (creating if needed) home's lake.
func (f *lakeFlags) open(home string, log *slog.Logger) (*lake.Lake, error) {
	return f.openWith(home, log, false)
}

// openWith is open; later connects the catalog in the background (es
// serve: it maps its recorded vintages meanwhile, and starts while the
// catalog is down).
func (f *lakeFlags) openWith(home string, log *slog.Logger, later bool) (*lake.Lake, error) {
	o, err := f.options(home)
	if err != nil {
		return nil, err
	}
	o.Logger = log
	o.ConnectLater = later
	l, err := lake.Open(context.Background(), o)
	if err != nil {
		return nil, fmt.Errorf("open the lake (catalog %q, warehouse %q): %w", orDefault(f.catalog, filepath.Join(home, lake.Dir, lake.CatalogFile)), orDefault(f.warehouse, filepath.Join(home, lake.Dir, lake.WarehouseDir)), err)
	}
	return l, nil
}

// hasLake reports whether home is a server home with a lake (es serve
// made HOME/lake).
func hasLake(home string) bool {
	_, err := os.Stat(filepath.Join(home, lake.Dir))
	return !errors.Is(err, os.ErrNotExist)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// withLake gives o the hooks of a server home with a lake (HOME/lake):
// snapshots open from the lake, where the server keeps them (the home
// holds no copy of a published snapshot), and a writable store publishes
// every snapshot it is about to serve (es compact, es cook) as the server
// does (cooked straight into the vintage's Puffin file: CookPublish). lk is used when given; else the home's embedded lake is opened for
// each call (a command opens few snapshots). A home without a lake is
// left alone.
func withLake(home string, o *localcache.Options, lk *lake.Lake, stderr io.Writer) *localcache.Options {
	if lk == nil && !hasLake(home) {
		return o
	}
	get := func() (*lake.Lake, func(), error) {
		if lk != nil {
			return lk, func() {}, nil
		}
		l, err := lake.Open(context.Background(), lake.DefaultOptions(home))
		if err != nil {
			return nil, nil, err
		}
		return l, func() { l.Close() }, nil
	}
	o.OpenSnapshot = server.SnapshotOpener(context.Background(), home, get, nil, slog.New(slog.NewTextHandler(stderr, nil)))
	if !o.ReadOnly {
		o.Publish = func(dataset, dir string, m *format.Manifest) error {
			l, release, err := get()
			if err != nil {
				return fmt.Errorf("open the lake: %w", err)
			}
			defer release()
			v, err := l.Publish(context.Background(), dataset, dir)
			if err != nil {
				return fmt.Errorf("publish to the lake (nothing changed): %w", err)
			}
			fmt.Fprintf(stderr, "published %s to the lake: iceberg snapshot %d\n", v.Snapshot, v.IcebergSnapshot)
			return nil
		}
		// A compaction (es compact) or a cook (es cook) writes its
		// snapshot straight into the vintage's Puffin file, as the
		// server's do.
		o.CookPublish = func(dataset string, cook func(*format.Container) (*format.Manifest, error)) (*format.Manifest, error) {
			l, release, err := get()
			if err != nil {
				return nil, fmt.Errorf("open the lake: %w", err)
			}
			defer release()
			var cookErr error
			v, m, err := l.PublishCooked(context.Background(), dataset, func(c *format.Container) (*format.Manifest, error) {
				m, err := cook(c)
				cookErr = err
				return m, err
			}, nil)
			if cookErr != nil {
				return nil, cookErr
			}
			if err != nil {
				return nil, fmt.Errorf("publish to the lake (nothing changed): %w", err)
			}
			fmt.Fprintf(stderr, "published %s to the lake: iceberg snapshot %d\n", v.Snapshot, v.IcebergSnapshot)
			return m, nil
		}
	}
	return o
}

// verifyInLake checks snapshot id of dataset as home's embedded lake holds
// it: every serving file copied out of the vintage's Puffin file against
// the SHA-256 the table metadata gives, then format.Verify of the copy (in
// a temporary directory of the home, removed after).
func verifyInLake(home, dataset, id string) (*format.Manifest, error) {
	ctx := context.Background()
	l, err := lake.Open(ctx, lake.DefaultOptions(home))
	if err != nil {
		return nil, err
	}
	defer l.Close()
	v, err := l.Resolve(ctx, dataset, id)
	if err != nil {
		return nil, err
	}
	if v.Snapshot != id {
		return nil, fmt.Errorf("the lake has no vintage %s (resolved to %q)", id, v.Snapshot)
	}
	tmp, err := os.MkdirTemp(home, ".verify-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "snap")
	if _, err := l.Extract(ctx, dataset, v, dir); err != nil {
		return nil, err
	}
	return format.Verify(dir)
}
