package localcache

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/energyscope/energyscope/internal/fileutil"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// The vintage cache (issue 12): the published snapshots of earlier days
// (vintages) a companion fetched from the server to answer as-of reads,
// kept under the home, bounded by count and bytes, least recently used
// evicted first. It is beside the store, not in it: a vintage is never
// what a dataset serves live, has no delta and no CURRENT.
//
// Layout, under the home:
//
//	vintages/<dataset>/<snapshot-id>/      one vintage: its snapshot files,
//	                                       manifest.json and vintage.json
//	vintages/<dataset>/.dl-<snapshot-id>/  a download in progress (format.StagingPrefix)
//
// (the store's datasets are under datasets/). A vintage directory is complete once it
// has its final name: Commit writes manifest.json and vintage.json
// (fsynced), verifies every file and renames the staging directory last.
// Downloads in progress are swept when the cache opens.

// VintagesDir is the vintage cache's directory in a home.
const VintagesDir = "vintages"

// vintageMetaFile describes a cached vintage (VintageMeta as JSON).
const vintageMetaFile = "vintage.json"

// VintageMeta is what the server said of a vintage when it was fetched.
type VintageMeta struct {
	Dataset     string    `json:"dataset"`
	Snapshot    string    `json:"snapshot"` // es snapshot id
	Iceberg     int64     `json:"iceberg_snapshot"`
	CommittedAt time.Time `json:"committed_at"`
	Tags        []string  `json:"tags,omitempty"`
}

// VintageCacheOptions bound the cache.
type VintageCacheOptions struct {
	// MaxCount is the most vintages kept (all datasets); default 8.
	MaxCount int
	// MaxBytes bounds the bytes of their files; default 2 GiB. A vintage
	// larger than that alone is kept until the next one comes.
	MaxBytes int64
	// Logger; nil discards.
	Logger *slog.Logger
}

// DefaultVintageCacheOptions returns the default bounds.
func DefaultVintageCacheOptions() VintageCacheOptions {
	return VintageCacheOptions{MaxCount: 8, MaxBytes: 2 << 30}
}

// ErrNoVintage: the cache does not hold that vintage.
var ErrNoVintage = errors.New("vintage not in the cache")

// VintageCache is the bounded cache of fetched vintages. It is safe for
// concurrent use.
type VintageCache struct {
	root string
	opts VintageCacheOptions
	log  *slog.Logger

	mu struct {
		sync.Mutex
		entries map[string]*vintageEntry // dataset/snapshot
		tick    uint64                   // use counter for the LRU order
		bytes   int64
		closed  bool
	}
}

// vintageEntry is one cached vintage; the cache's mu guards its fields.
type vintageEntry struct {
	meta  VintageMeta
	dir   string
	bytes int64
	used  uint64             // mu.tick at the last use
	snap  *snapshot.Snapshot // opened on first use; the cache holds one reference
}

// OpenVintageCache opens (creating) the vintage cache of home, sweeping
// unfinished downloads and incomplete entries, and evicting down to the
// bounds.
func OpenVintageCache(home string, o *VintageCacheOptions) (*VintageCache, error) {
	opts := DefaultVintageCacheOptions()
	if o != nil {
		if o.MaxCount > 0 {
			opts.MaxCount = o.MaxCount
		}
		if o.MaxBytes > 0 {
			opts.MaxBytes = o.MaxBytes
		}
		opts.Logger = o.Logger
	}
	c := &VintageCache{root: filepath.Join(home, VintagesDir), opts: opts, log: opts.Logger}
	if c.log == nil {
		c.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c.mu.entries = map[string]*vintageEntry{}
	if err := os.MkdirAll(c.root, 0o755); err != nil {
		return nil, fmt.Errorf("vintage cache: %w", err)
	}
	dss, err := os.ReadDir(c.root)
	if err != nil {
		return nil, fmt.Errorf("vintage cache: %w", err)
	}
	type found struct {
		e   *vintageEntry
		mod time.Time
	}
	var all []found
	for _, d := range dss {
		if !d.IsDir() || format.ValidDatasetName(d.Name()) != nil {
			continue
		}
		dsDir := filepath.Join(c.root, d.Name())
		vs, err := os.ReadDir(dsDir)
		if err != nil {
			return nil, fmt.Errorf("vintage cache: %w", err)
		}
		for _, v := range vs {
			dir := filepath.Join(dsDir, v.Name())
			if strings.HasPrefix(v.Name(), ".") {
				os.RemoveAll(dir) // a download (or an eviction) cut short
				continue
			}
			e, mod, err := readVintageEntry(dir, d.Name(), v.Name())
			if err != nil {
				c.log.Warn("vintage cache: dropping an incomplete vintage", "dir", dir, "err", err)
				os.RemoveAll(dir)
				continue
			}
			all = append(all, found{e, mod})
		}
	}
	// The least recently written first: that is the LRU order to start from.
	slices.SortFunc(all, func(a, b found) int { return a.mod.Compare(b.mod) })
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range all {
		c.mu.tick++
		f.e.used = c.mu.tick
		c.mu.entries[f.e.meta.Dataset+"/"+f.e.meta.Snapshot] = f.e
		c.mu.bytes += f.e.bytes
	}
	c.evictLocked("")
	return c, nil
}

func readVintageEntry(dir, dataset, id string) (*vintageEntry, time.Time, error) {
	m, err := format.ReadManifest(dir)
	if err != nil {
		return nil, time.Time{}, err
	}
	st, err := os.Stat(filepath.Join(dir, vintageMetaFile))
	if err != nil {
		return nil, time.Time{}, err
	}
	b, err := os.ReadFile(filepath.Join(dir, vintageMetaFile))
	if err != nil {
		return nil, time.Time{}, err
	}
	var meta VintageMeta
	if err := json.Unmarshal(b, &meta); err != nil {
		return nil, time.Time{}, err
	}
	if meta.Dataset != dataset || meta.Snapshot != id || m.SnapshotID != id || m.Dataset != dataset {
		return nil, time.Time{}, fmt.Errorf("vintage.json names %s/%s, manifest %s/%s", meta.Dataset, meta.Snapshot, m.Dataset, m.SnapshotID)
	}
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return &vintageEntry{meta: meta, dir: dir, bytes: n}, st.ModTime(), nil
}

// Stage opens the download of vintage meta (manifest m) into the cache:
// a Stage like the store's (chunks and files verified as they arrive, a
// later Stage of the same vintage by this process resumes), whose Commit
// keeps the vintage in the cache (Commit below) instead of installing it.
func (c *VintageCache) Stage(meta VintageMeta, m *format.Manifest) (*Stage, error) {
	if m == nil || meta.Dataset != m.Dataset || meta.Snapshot != m.SnapshotID {
		return nil, fmt.Errorf("vintage cache: stage of %s/%s with another manifest", meta.Dataset, meta.Snapshot)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("vintage cache: %w", err)
	}
	dir, err := c.stagingDir(meta.Dataset, meta.Snapshot)
	if err != nil {
		return nil, err
	}
	return &Stage{dataset: meta.Dataset, m: m, dir: dir, commit: func(dir string) error { return c.Commit(meta, m, dir) }}, nil
}

// stagingDir returns (creating) the directory in which to download the
// files of vintage snapshotID of dataset; what an earlier attempt of this
// process left there is kept, so the download resumes.
func (c *VintageCache) stagingDir(dataset, snapshotID string) (string, error) {
	if err := format.ValidDatasetName(dataset); err != nil {
		return "", err
	}
	if err := validSnapshotName(snapshotID); err != nil {
		return "", err
	}
	dir := filepath.Join(c.root, dataset, format.StagingPrefix+snapshotID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("vintage cache: %w", err)
	}
	return dir, nil
}

// validSnapshotName refuses an id that is not one path element.
func validSnapshotName(id string) error {
	if id == "" || id != filepath.Base(id) || strings.ContainsAny(id, `/\:`) || strings.HasPrefix(id, ".") || len(id) > 128 {
		return fmt.Errorf("vintage cache: invalid snapshot id %q", id)
	}
	return nil
}

// Commit makes the downloaded vintage in dir (a Stage directory holding
// every file of m) a cached vintage: it writes manifest.json and
// vintage.json, verifies every file against m (size, SHA-256), and
// renames dir to its final name; then it evicts the least recently used
// vintages beyond the bounds (never this one). A vintage already cached is
// kept and dir removed.
func (c *VintageCache) Commit(meta VintageMeta, m *format.Manifest, dir string) error {
	if meta.Dataset != m.Dataset || meta.Snapshot != m.SnapshotID {
		return fmt.Errorf("vintage cache: vintage %s/%s with the manifest of %s/%s", meta.Dataset, meta.Snapshot, m.Dataset, m.SnapshotID)
	}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("vintage cache: %w", err)
	}
	if err := format.ValidDatasetName(meta.Dataset); err != nil {
		return err
	}
	if err := validSnapshotName(meta.Snapshot); err != nil {
		return err
	}
	key := meta.Dataset + "/" + meta.Snapshot
	final := filepath.Join(c.root, meta.Dataset, meta.Snapshot)
	if c.Has(meta.Dataset, meta.Snapshot) {
		os.RemoveAll(dir)
		return nil
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := fileutil.WriteFile(filepath.Join(dir, format.ManifestFile), mb, 0o644); err != nil {
		return fmt.Errorf("vintage cache: %w", err)
	}
	if err := format.VerifyFiles(dir, m); err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("vintage cache: %s: %w", meta.Snapshot, err)
	}
	vb, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return err
	}
	if err := fileutil.WriteFile(filepath.Join(dir, vintageMetaFile), vb, 0o644); err != nil {
		return fmt.Errorf("vintage cache: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return ErrClosed
	}
	if c.mu.entries[key] != nil {
		os.RemoveAll(dir)
		return nil
	}
	// A directory of this name not in the map is an evicted vintage whose
	// last reader has not let go yet (it is deleted when it does): wait
	// for it to go rather than replace mapped files.
	if _, err := os.Stat(final); err == nil {
		return fmt.Errorf("vintage cache: %s is still being evicted; try again", meta.Snapshot)
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return fmt.Errorf("vintage cache: %w", err)
	}
	if err := fileutil.Rename(dir, final); err != nil {
		return fmt.Errorf("vintage cache: %w", err)
	}
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	c.mu.tick++
	c.mu.entries[key] = &vintageEntry{meta: meta, dir: final, bytes: n, used: c.mu.tick}
	c.mu.bytes += n
	c.evictLocked(key)
	return nil
}

// evictLocked drops the least recently used vintages until the cache is
// within its bounds, never keep; c.mu is held. A vintage in use is
// unmapped and deleted when its last reader releases it.
func (c *VintageCache) evictLocked(keep string) {
	for len(c.mu.entries) > c.opts.MaxCount || c.mu.bytes > c.opts.MaxBytes {
		var victim string
		var oldest uint64
		for k, e := range c.mu.entries {
			if k != keep && (victim == "" || e.used < oldest) {
				victim, oldest = k, e.used
			}
		}
		if victim == "" {
			return
		}
		c.dropLocked(victim)
	}
}

// dropLocked removes one entry from the cache and its directory from the
// disk (after its last reader); c.mu is held.
func (c *VintageCache) dropLocked(key string) {
	e := c.mu.entries[key]
	delete(c.mu.entries, key)
	c.mu.bytes -= e.bytes
	c.log.Info("vintage cache: evicting", "dataset", e.meta.Dataset, "snapshot", e.meta.Snapshot, "bytes", e.bytes)
	if e.snap == nil {
		os.RemoveAll(e.dir)
		return
	}
	dir := e.dir
	e.snap.OnClose(func() { os.RemoveAll(dir) })
	e.snap.Unref()
}

// Has reports whether the cache holds the vintage.
func (c *VintageCache) Has(dataset, snapshotID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.entries[dataset+"/"+snapshotID] != nil
}

// Find returns the most recently committed cached vintage of dataset for
// which match is true (say, one carrying a tag).
func (c *VintageCache) Find(dataset string, match func(VintageMeta) bool) (VintageMeta, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var best *vintageEntry
	for _, e := range c.mu.entries {
		if e.meta.Dataset == dataset && match(e.meta) && (best == nil || e.meta.CommittedAt.After(best.meta.CommittedAt)) {
			best = e
		}
	}
	if best == nil {
		return VintageMeta{}, false
	}
	return best.meta, true
}

// Acquire returns the mapped snapshot of a cached vintage with a
// reference the caller must drop (Unref); the points it gives are valid
// until then. It marks the vintage used. ErrNoVintage if it is not
// cached.
func (c *VintageCache) Acquire(dataset, snapshotID string) (*snapshot.Snapshot, VintageMeta, error) {
	key := dataset + "/" + snapshotID
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, VintageMeta{}, ErrClosed
	}
	e := c.mu.entries[key]
	if e == nil {
		return nil, VintageMeta{}, fmt.Errorf("%w: %s of %s", ErrNoVintage, snapshotID, dataset)
	}
	if e.snap == nil {
		s, err := snapshot.OpenOptions(e.dir, snapshot.Options{})
		if err != nil {
			// Damaged on disk: drop it, so that the next read fetches it again.
			c.dropLocked(key)
			return nil, VintageMeta{}, fmt.Errorf("vintage cache: %w", err)
		}
		e.snap = s
	}
	if !e.snap.TryRef() {
		return nil, VintageMeta{}, fmt.Errorf("%w: %s of %s", ErrNoVintage, snapshotID, dataset)
	}
	c.mu.tick++
	e.used = c.mu.tick
	return e.snap, e.meta, nil
}

// Usage reports how many vintages the cache holds and their bytes.
func (c *VintageCache) Usage() (count int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.entries), c.mu.bytes
}

// Close drops the cache's references; mappings in use stay until their
// readers release them. The files stay on disk for the next open.
func (c *VintageCache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil
	}
	c.mu.closed = true
	for _, e := range c.mu.entries {
		if e.snap != nil {
			e.snap.Unref()
			e.snap = nil
		}
	}
	return nil
}
