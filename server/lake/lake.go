package lake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // the s3:// warehouse scheme
	"github.com/apache/iceberg-go/table"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/energyscope/energyscope/localcache/format"
)

// Names fixed by the lake's layout (FORMAT.md, "The lake").
const (
	CatalogName = "energyscope"
	Namespace   = "energyscope"
	// Dir is the lake's directory under a server home; CatalogFile and
	// WarehouseDir are inside it.
	Dir          = "lake"
	CatalogFile  = "catalog.db"
	WarehouseDir = "warehouse"
	CacheDir     = "cache"
)

// Sentinel errors; check them with errors.Is.
var (
	// ErrNoDataset: the catalog has no table for the dataset.
	ErrNoDataset = errors.New("lake: no such dataset")
	// ErrUnknownVintage: no vintage matches the reference (snapshot id,
	// tag, iceberg snapshot id), or it has been expired.
	ErrUnknownVintage = errors.New("lake: unknown vintage")
	// ErrBeforeFirstVintage: an as-of time earlier than the first retained
	// vintage.
	ErrBeforeFirstVintage = errors.New("lake: as-of time before the first vintage")
	// ErrNoServingIndex: the Iceberg snapshot carries no energyscope
	// serving index (another engine wrote it, or its Puffin file is
	// missing); see *NoServingIndexError.
	ErrNoServingIndex = errors.New("lake: snapshot has no serving index")
	// ErrBadSnapshot: the snapshot directory given to Publish is not a
	// valid snapshot of that dataset.
	ErrBadSnapshot = errors.New("lake: bad snapshot directory")
	// ErrSchemaChanged: the dataset's period type differs from the
	// table's (a daily dataset that became intraday, or back).
	ErrSchemaChanged = errors.New("lake: period type differs from the table's")
	// ErrConflict: Publish (or another commit) lost the race to
	// concurrent writers more times than Options.MaxRetries.
	ErrConflict = errors.New("lake: commit conflict, retries exhausted")
	// ErrClosed: the Lake was closed.
	ErrClosed = errors.New("lake: closed")
)

// NoServingIndexError names the snapshot without a serving index.
type NoServingIndexError struct {
	Dataset         string
	IcebergSnapshot int64
	Reason          string // e.g. "no statistics file", "puffin file missing"
}

func (e *NoServingIndexError) Error() string {
	return fmt.Sprintf("lake: dataset %s, iceberg snapshot %d has no energyscope serving index (%s): it was not published by es (another engine's commit?)",
		e.Dataset, e.IcebergSnapshot, e.Reason)
}

func (e *NoServingIndexError) Unwrap() error { return ErrNoServingIndex }

// Options configure Open. The zero value with Home set is the embedded
// default: a SQLite catalog at <Home>/lake/catalog.db and a file://
// warehouse at <Home>/lake/warehouse.
type Options struct {
	// Home is the server home; required unless both CatalogURI and
	// Warehouse are given.
	Home string
	// CatalogURI selects the catalog: "" for the embedded SQLite file,
	// "sqlite:PATH" for another SQLite file, "postgres://..." or
	// "postgresql://..." for a PostgreSQL database (through pgx),
	// "http://..." or "https://..." for an Iceberg REST catalog.
	CatalogURI string
	// Warehouse is where data, manifests and Puffin files go:
	// "file:///abs/path", a plain absolute path, or "s3://bucket/prefix"
	// (an S3 or S3-compatible object store: credentials and, unless
	// S3Region is set, the region come from the usual AWS sources:
	// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
	// AWS_REGION, AWS_PROFILE and the shared config files). Default
	// <Home>/lake/warehouse.
	Warehouse string
	// S3Endpoint is the S3 endpoint URL of an s3:// warehouse when it is
	// not AWS (MinIO, SeaweedFS, ...): path-style addressing is used.
	// Empty: AWS_S3_ENDPOINT, else AWS.
	S3Endpoint string
	// S3Region overrides the region of an s3:// warehouse.
	S3Region string
	// CacheDir is where OpenSnapshot keeps the Puffin files it downloads
	// from a remote warehouse (verified copies, named after the file's
	// location). Default <Home>/lake/cache.
	CacheDir string
	// CacheBytes bounds the cache: after a download, the least recently
	// opened copies are deleted until the cache holds at most this many
	// bytes (the one just downloaded always stays, and so does every copy
	// a snapshot of this Lake still maps: cache.go). Default 8 GiB.
	// Expire deletes the copies of the vintages it expires.
	CacheBytes int64
	// MaxRetries bounds how often a commit that lost a race is rebuilt
	// and retried. Default 20.
	MaxRetries int
	// RetryBackoff is the first backoff after a conflict; it doubles up
	// to 64 times itself, with full jitter. Default 5 ms.
	RetryBackoff time.Duration
	// OrphanMinAge: Expire deletes unreferenced files only when they
	// are older than this (younger ones may belong to a publish in
	// flight). Default 1 hour.
	OrphanMinAge time.Duration
	// Logger receives warnings (a losing attempt's cleanup that failed).
	// nil discards.
	Logger *slog.Logger
	// ConnectLater: Open returns without waiting for the catalog, which
	// it connects in the background; the first call that needs it waits,
	// and a catalog that cannot be reached fails that call
	// (ErrCatalogUnreachable; the next call tries again) instead of Open.
	// A server sets it: it maps its recorded vintages while the catalog
	// opens, and starts while the catalog is down (OpenServing).
	ConnectLater bool
}

// DefaultOptions returns the options of the embedded default for home.
func DefaultOptions(home string) Options {
	o := Options{Home: home}
	o.EnsureDefaults()
	return o
}

// EnsureDefaults fills unset fields.
func (o *Options) EnsureDefaults() {
	if o.CacheDir == "" && o.Home != "" {
		o.CacheDir = filepath.Join(o.Home, Dir, CacheDir)
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = 8 << 30
	}
	if o.MaxRetries <= 0 {
		o.MaxRetries = 20
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = 5 * time.Millisecond
	}
	if o.OrphanMinAge <= 0 {
		o.OrphanMinAge = time.Hour
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Validate checks a copy with defaults filled in.
func (o Options) Validate() error {
	if o.Home == "" && (o.CatalogURI == "" || o.Warehouse == "") {
		return errors.New("lake: Options.Home is required unless CatalogURI and Warehouse are both set")
	}
	if o.Warehouse != "" {
		u, err := url.Parse(o.Warehouse)
		if err != nil {
			return fmt.Errorf("lake: warehouse %q: %w", o.Warehouse, err)
		}
		switch {
		case u.Scheme == "file", u.Scheme == "" && filepath.IsAbs(o.Warehouse):
		case u.Scheme == "s3":
			if u.Host == "" {
				return fmt.Errorf("lake: warehouse %q: want s3://bucket/prefix", o.Warehouse)
			}
		default:
			return fmt.Errorf("lake: warehouse %q: want file:///path, an absolute path or s3://bucket/prefix", o.Warehouse)
		}
	}
	if o.S3Endpoint != "" {
		u, err := url.Parse(o.S3Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("lake: S3 endpoint %q: want http(s)://host[:port]", o.S3Endpoint)
		}
	}
	return nil
}

// Lake is an open catalog and warehouse. It is safe for concurrent use;
// several Lakes (in one process or several) may share a catalog: commits
// are compare-and-swap on the table's main branch.
type Lake struct {
	opts    Options
	metrics struct{ commits, conflicts, cleaned atomic.Int64 }
	props   iceberg.Properties // of the catalog

	// The catalog, once connected (CatalogContext); connecting is closed
	// when the connection under way ends, connErr is the last failure.
	cmu        sync.Mutex
	cat        catalog.Catalog
	connecting chan struct{}
	connErr    error
	closed     bool
	warehouse  string // URI (file:///...)
	ns         table.Identifier

	// tables holds the table loaded last per dataset (OpenSnapshot reuses
	// it when it holds the vintage asked for).
	tables struct {
		sync.Mutex
		m map[string]*loaded
	}
	// cached records which cached Puffin copies this Lake maps (cache.go).
	cached cacheUse
	// forceDownload makes OpenSnapshot download even from a file://
	// warehouse (tests of the remote path).
	forceDownload bool
	// beforeCommit runs before each catalog commit (tests: another writer
	// wins the race).
	beforeCommit func()
}

// Open opens (creating if needed) the catalog and the namespace; with
// Options.ConnectLater it returns at once and connects in the background.
func Open(ctx context.Context, o Options) (*Lake, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	registerSyncFS()
	wh := o.Warehouse
	if wh == "" {
		wh = filepath.Join(o.Home, Dir, WarehouseDir)
	}
	if u, err := url.Parse(wh); err == nil && u.Scheme == "" {
		abs, err := filepath.Abs(wh)
		if err != nil {
			return nil, err
		}
		wh = (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
	}
	if p := localPathOf(wh); strings.HasPrefix(wh, "file:") {
		// Created here: make its entry durable. One that exists needs no
		// fsync at every open (a third of a fresh open's CPU): its first
		// durable write in this process syncs its parents again.
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return nil, fmt.Errorf("lake: warehouse: %w", err)
			}
			if err := syncParents(filepath.Join(p, ".")); err != nil {
				return nil, err
			}
		} else if err != nil {
			return nil, fmt.Errorf("lake: warehouse: %w", err)
		}
	}
	props, err := catalogProps(o, wh)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(wh, "s3:") {
		if err := s3Props(ctx, o, wh, props); err != nil {
			return nil, err
		}
	}
	l := &Lake{opts: o, props: props, warehouse: wh, ns: catalog.ToIdentifier(Namespace)}
	if o.ConnectLater {
		l.startConnect()
		return l, nil
	}
	if _, err := l.CatalogContext(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// ErrCatalogUnreachable: the catalog could not be opened (a database
// that does not answer, a REST service down); the error wraps the cause.
var ErrCatalogUnreachable = errors.New("lake: catalog unreachable")

// CatalogContext returns the catalog, waiting for its connection (Open
// with Options.ConnectLater connects in the background). A connection
// that failed is tried again by the next call; its error wraps
// ErrCatalogUnreachable.
func (l *Lake) CatalogContext(ctx context.Context) (catalog.Catalog, error) {
	l.cmu.Lock()
	if l.cat != nil || l.closed {
		c := l.cat
		l.cmu.Unlock()
		if c == nil {
			return nil, ErrClosed
		}
		return c, nil
	}
	ch := l.connecting
	l.cmu.Unlock()
	if ch == nil {
		ch = l.startConnect()
	}
	select {
	case <-ch:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrCatalogUnreachable, ctx.Err())
	}
	l.cmu.Lock()
	defer l.cmu.Unlock()
	if l.cat != nil {
		return l.cat, nil
	}
	if l.closed {
		return nil, ErrClosed
	}
	return nil, l.connErr
}

// startConnect starts a connection to the catalog unless one is under
// way, and returns the channel closed when it ends.
func (l *Lake) startConnect() chan struct{} {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	if l.connecting != nil {
		return l.connecting
	}
	ch := make(chan struct{})
	l.connecting = ch
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
		defer cancel()
		cat, err := l.connect(ctx)
		l.cmu.Lock()
		defer l.cmu.Unlock()
		defer close(ch)
		l.connecting = nil
		if err != nil {
			l.connErr = err
			return
		}
		if l.closed {
			if c, ok := cat.(catalog.Closer); ok {
				c.Close()
			}
			return
		}
		l.cat, l.connErr = cat, nil
	}()
	return ch
}

// connectTimeout bounds one connection attempt to the catalog (a
// database that never answers); the next call that needs the catalog
// tries again.
const connectTimeout = time.Minute

// connect opens the catalog and creates the namespace if needed.
func (l *Lake) connect(ctx context.Context) (catalog.Catalog, error) {
	cat, err := catalog.Load(ctx, CatalogName, l.props)
	if err != nil {
		return nil, fmt.Errorf("%w: open catalog: %w", ErrCatalogUnreachable, err)
	}
	if err := cat.CreateNamespace(ctx, l.ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		if c, ok := cat.(catalog.Closer); ok {
			c.Close()
		}
		return nil, fmt.Errorf("%w: create namespace: %w", ErrCatalogUnreachable, err)
	}
	return cat, nil
}

// catalogProps maps Options to iceberg-go catalog properties.
func catalogProps(o Options, warehouse string) (iceberg.Properties, error) {
	uri := o.CatalogURI
	sqlite := func(path string) (iceberg.Properties, error) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("lake: catalog: %w", err)
		}
		// WAL with synchronous=FULL: a commit is durable when it returns;
		// busy_timeout lets several processes share the file.
		dsn := "file:" + filepath.ToSlash(path) + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)"
		return iceberg.Properties{
			"type":                "sql",
			"uri":                 dsn,
			sqlcat.DriverKey:      sqliteshim.ShimName,
			sqlcat.DialectKey:     string(sqlcat.SQLite),
			"warehouse":           warehouse,
			"init_catalog_tables": "true",
		}, nil
	}
	switch {
	case uri == "":
		return sqlite(filepath.Join(o.Home, Dir, CatalogFile))
	case strings.HasPrefix(uri, "sqlite:"):
		return sqlite(strings.TrimPrefix(uri, "sqlite:"))
	case strings.HasPrefix(uri, "postgres://"), strings.HasPrefix(uri, "postgresql://"):
		return postgresProps(uri, warehouse)
	case strings.HasPrefix(uri, "http://"), strings.HasPrefix(uri, "https://"):
		return restProps(uri, warehouse)
	}
	return nil, fmt.Errorf("lake: catalog URI %q: want postgres://..., http(s)://... (REST) or sqlite:PATH", uri)
}

// Metrics counts what this Lake did since Open.
type Metrics struct {
	Commits      int64 // commits that landed (publish, rollback)
	Conflicts    int64 // attempts that lost a race and were rebuilt
	FilesCleaned int64 // files of losing attempts deleted
}

// Metrics returns a snapshot of the counters.
func (l *Lake) Metrics() Metrics {
	return Metrics{Commits: l.metrics.commits.Load(), Conflicts: l.metrics.conflicts.Load(), FilesCleaned: l.metrics.cleaned.Load()}
}

// Close releases the catalog.
func (l *Lake) Close() error {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	l.closed = true
	cat := l.cat
	l.cat = nil
	if c, ok := cat.(catalog.Closer); ok {
		return c.Close()
	}
	return nil
}

// Warehouse is the warehouse URI.
func (l *Lake) Warehouse() string { return l.warehouse }

// Catalog exposes the iceberg-go catalog (tests and tools that read the
// lake with iceberg-go's own scan). It never blocks and is never nil:
// each call waits for the connection (bounded by its context) and fails
// with ErrCatalogUnreachable while the catalog cannot be reached
// (lazycat.go).
func (l *Lake) Catalog() catalog.Catalog { return lazyCatalog{l} }

// Identifier is the table identifier of dataset.
func (l *Lake) Identifier(dataset string) table.Identifier {
	return catalog.ToIdentifier(Namespace, dataset)
}

// load loads a dataset's table; ErrNoDataset if there is none.
func (l *Lake) load(ctx context.Context, dataset string) (*table.Table, error) {
	if err := format.ValidDatasetName(dataset); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDataset, err)
	}
	cat, err := l.CatalogContext(ctx)
	if err != nil {
		return nil, err
	}
	t, err := cat.LoadTable(ctx, l.Identifier(dataset))
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return nil, fmt.Errorf("%w: %s", ErrNoDataset, dataset)
	}
	if err != nil {
		return nil, fmt.Errorf("lake: load %s: %w", dataset, err)
	}
	l.remember(dataset, t)
	return t, nil
}

// Table loads a dataset's Iceberg table (for readers using iceberg-go's
// own scan).
func (l *Lake) Table(ctx context.Context, dataset string) (*table.Table, error) {
	return l.load(ctx, dataset)
}
