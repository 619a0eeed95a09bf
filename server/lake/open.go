package lake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/energyscope/energyscope/internal/fileutil"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// OpenSnapshot opens vintage v (its IcebergSnapshot; its Snapshot, when
// set, must agree) as a serving snapshot without rebuilding or copying
// anything: from a file:// warehouse each artifact is mapped in place out
// of the vintage's Puffin file (snapshot.OpenFiles; the snapshot's Dir is
// ""). From a remote warehouse the Puffin file is first downloaded into
// Options.CacheDir, every blob's SHA-256 checked against the table
// metadata, fsynced and renamed into place, and that copy is mapped; a
// later open of the same vintage maps the cached copy.
//
// Locating the artifacts reads no Puffin footer when the table metadata's
// statistics entry carries each blob's offset and length (every publish
// since they were added; older ones fall back to the footer), and the
// table loaded last for the dataset is reused when it holds the vintage,
// so after Current or Resolve the open costs no catalog round trip.
//
// Errors: an expired or unknown vintage is ErrUnknownVintage; a vintage
// without our statistics file, or whose Puffin file is gone, is
// *NoServingIndexError; a Puffin file that is truncated or damaged (in
// the bytes the open checks: manifest, sizes, headers; a download checks
// every byte), or whose blobs are not page-aligned, is an error wrapping
// *format.CorruptionError. Nothing is left mapped after an error.
func (l *Lake) OpenSnapshot(ctx context.Context, dataset string, v Vintage, o snapshot.Options) (*snapshot.Snapshot, error) {
	s, _, err := l.OpenSnapshotIndex(ctx, dataset, v, o)
	return s, err
}

// OpenSnapshotIndex is OpenSnapshot that also returns where the
// vintage's artifacts lie (what a server records to map it again without
// the catalog: OpenServing).
func (l *Lake) OpenSnapshotIndex(ctx context.Context, dataset string, v Vintage, o snapshot.Options) (*snapshot.Snapshot, *ServingIndex, error) {
	lt, fromCache, err := l.tableFor(ctx, dataset, v.IcebergSnapshot)
	if err != nil {
		return nil, nil, err
	}
	s, si, err := l.openIn(ctx, lt, dataset, v, o)
	if fromCache && (errors.Is(err, ErrNoServingIndex) || errors.Is(err, os.ErrNotExist)) {
		// The cached metadata may predate an expiry that deleted the
		// file: ask the catalog again.
		if lt, err = l.loadIndexed(ctx, dataset); err != nil {
			return nil, nil, err
		}
		s, si, err = l.openIn(ctx, lt, dataset, v, o)
	}
	return s, si, err
}

func (l *Lake) openIn(ctx context.Context, lt *loaded, dataset string, v Vintage, o snapshot.Options) (*snapshot.Snapshot, *ServingIndex, error) {
	t := lt.t
	si, err := locate(ctx, lt, dataset, v.IcebergSnapshot)
	if err != nil {
		return nil, nil, err
	}
	if v.Snapshot != "" && v.Snapshot != si.Vintage.Snapshot {
		return nil, nil, fmt.Errorf("%w: iceberg snapshot %d of %s is es snapshot %s, not %s", ErrUnknownVintage, v.IcebergSnapshot, dataset, si.Vintage.Snapshot, v.Snapshot)
	}
	path, err := l.localCopy(ctx, t, dataset, si)
	if err != nil {
		return nil, nil, err
	}
	s, err := mapServing(path, dataset, si, o)
	if err != nil {
		return nil, nil, err
	}
	l.noteMapped(path, s) // cache.go: not pruned while mapped
	return s, si, nil
}

// mapServing maps si's artifacts out of the Puffin file (or its verified
// copy) at path.
func mapServing(path, dataset string, si *ServingIndex, o snapshot.Options) (*snapshot.Snapshot, error) {
	set := snapshot.FileSet{}
	for _, b := range si.Blobs {
		set[b.File] = snapshot.Region{Path: path, Offset: b.Offset, Length: b.Length}
	}
	id := si.Vintage.IcebergSnapshot
	s, err := snapshot.OpenFiles(set, o)
	if errors.Is(err, os.ErrNotExist) {
		return nil, &NoServingIndexError{Dataset: dataset, IcebergSnapshot: id, Reason: "puffin file missing: " + si.Location}
	}
	if err != nil {
		return nil, fmt.Errorf("lake: open vintage %s (iceberg snapshot %d) of %s: %w", si.Vintage.Snapshot, id, dataset, err)
	}
	if s.ID() != si.Vintage.Snapshot {
		s.Close()
		return nil, fmt.Errorf("lake: open iceberg snapshot %d of %s: %w", id, dataset,
			&format.CorruptionError{File: format.ManifestFile, Offset: -1, Err: fmt.Errorf("snapshot %s, the vintage says %s", s.ID(), si.Vintage.Snapshot)})
	}
	return s, nil
}

// OpenServing maps the vintage si locates (as OpenSnapshotIndex returned
// it, kept by the caller) WITHOUT the catalog: out of the Puffin file of
// a file:// warehouse, or out of its verified copy in Options.CacheDir for
// a remote one (a copy is only ever renamed into the cache verified;
// OpenServing downloads nothing: a vintage not cached is
// *NoServingIndexError). A server uses it at start, to serve the
// vintage it recorded while its catalog opens or is down. The manifest
// mapped must be si's snapshot.
func (l *Lake) OpenServing(dataset string, si *ServingIndex, o snapshot.Options) (*snapshot.Snapshot, error) {
	if err := si.check(); err != nil {
		return nil, &format.CorruptionError{File: si.Location, Offset: -1, Err: err}
	}
	path := si.Path
	if path == "" || l.forceDownload {
		if l.opts.CacheDir == "" {
			return nil, &NoServingIndexError{Dataset: dataset, IcebergSnapshot: si.Vintage.IcebergSnapshot, Reason: "remote warehouse and no cache directory"}
		}
		path = filepath.Join(l.opts.CacheDir, cacheName(si.Location))
		st, err := os.Stat(path)
		if err != nil || (si.Size > 0 && st.Size() != si.Size) {
			return nil, &NoServingIndexError{Dataset: dataset, IcebergSnapshot: si.Vintage.IcebergSnapshot, Reason: "no verified copy of " + si.Location + " in the cache"}
		}
		touchCached(path) // used now (cache.go)
	}
	s, err := mapServing(path, dataset, si, o)
	if err == nil {
		l.noteMapped(path, s)
	}
	return s, err
}

// check applies the layout rules to a ServingIndex read from elsewhere.
func (si *ServingIndex) check() error {
	if si.Vintage.Snapshot == "" || si.Location == "" {
		return errors.New("serving index without vintage or location")
	}
	seen := map[string]bool{}
	for _, b := range si.Blobs {
		if err := checkBlob(b.File, b.Type, b.Offset, si.Size, b.Length, b.SHA256, seen); err != nil {
			return err
		}
	}
	return checkRequired(seen)
}

// locate finds vintage id's serving artifacts: from the blob offsets the
// table metadata carries, or else from the Puffin footer.
func locate(ctx context.Context, lt *loaded, dataset string, id int64) (*ServingIndex, error) {
	t := lt.t
	sf, ok := lt.stats[id]
	cur, err := vintageWith(t, id, ok)
	if err != nil {
		return nil, fmt.Errorf("%w (expired, or never in dataset %s)", err, dataset)
	}
	if !ok || cur.Snapshot == "" {
		return nil, &NoServingIndexError{Dataset: dataset, IcebergSnapshot: id, Reason: "no energyscope statistics file"}
	}
	si := &ServingIndex{Vintage: cur, Location: sf.StatisticsPath, Size: sf.FileSizeInBytes}
	if strings.HasPrefix(sf.StatisticsPath, "file:") || filepath.IsAbs(sf.StatisticsPath) {
		si.Path = localPathOf(sf.StatisticsPath)
	}
	blobs, ok, err := blobsFromMetadata(sf)
	if err != nil {
		return nil, &format.CorruptionError{File: sf.StatisticsPath, Offset: -1, Err: err}
	}
	if ok {
		si.Blobs = blobs
		return si, nil
	}
	fs, err := t.FS(ctx)
	if err != nil {
		return nil, err
	}
	blobs, size, err := readFooter(fs, sf.StatisticsPath, cur)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, &NoServingIndexError{Dataset: dataset, IcebergSnapshot: id, Reason: "puffin file missing: " + sf.StatisticsPath}
	case err != nil:
		return nil, &format.CorruptionError{File: sf.StatisticsPath, Offset: -1, Err: err}
	}
	si.Blobs, si.Size = blobs, size
	return si, nil
}

// blobsFromMetadata reads the artifact blobs from the statistics entry of
// the table metadata. ok is false when an artifact lacks its offset or
// length (a Puffin file written before they were recorded there).
func blobsFromMetadata(sf table.StatisticsFile) (blobs []Blob, ok bool, err error) {
	seen := map[string]bool{}
	for _, bm := range sf.BlobMetadata {
		file := bm.Properties[PropFile]
		if file == "" {
			continue
		}
		offs, lens := bm.Properties[PropOffset], bm.Properties[PropLength]
		if offs == "" || lens == "" {
			return nil, false, nil
		}
		off, err1 := strconv.ParseInt(offs, 10, 64)
		n, err2 := strconv.ParseInt(lens, 10, 64)
		if err := errors.Join(err1, err2); err != nil || off < 0 || n < 0 {
			return nil, false, fmt.Errorf("blob %s: bad offset %q or length %q", file, offs, lens)
		}
		if err := checkBlob(file, string(bm.Type), off, sf.FileSizeInBytes, n, bm.Properties[PropSHA256], seen); err != nil {
			return nil, false, err
		}
		blobs = append(blobs, Blob{File: file, Type: string(bm.Type), Offset: off, Length: n, SHA256: bm.Properties[PropSHA256]})
	}
	if err := checkRequired(seen); err != nil {
		return nil, false, err
	}
	return blobs, true, nil
}

// checkBlob applies the layout rules of FORMAT.md to one artifact blob;
// size <= 0 skips the bound check.
func checkBlob(file, typ string, off, size, n int64, sha string, seen map[string]bool) error {
	switch {
	case blobTypeOf(file) != typ:
		return fmt.Errorf("blob %s for file %q: unknown artifact", typ, file)
	case off%PageSize != 0:
		return fmt.Errorf("blob %s at offset %d: not page-aligned (%d), cannot be mapped in place", typ, off, PageSize)
	case size > 0 && off+n > size:
		return fmt.Errorf("blob %s [%d,+%d) beyond the file's %d bytes", typ, off, n, size)
	case !isHexSHA256(sha):
		return fmt.Errorf("blob %s: bad sha256 %q", typ, sha)
	case seen[file]:
		return fmt.Errorf("file %q twice", file)
	}
	seen[file] = true
	return nil
}

func checkRequired(seen map[string]bool) error {
	for _, need := range []string{format.ManifestFile, format.IndexFile, format.HashFile, format.DataFile} {
		if !seen[need] {
			return fmt.Errorf("no %s blob", need)
		}
	}
	return nil
}

func isHexSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// tableFor is dataset's table with its statistics index: the one loaded
// last when it holds Iceberg snapshot id (fromCache), else loaded now.
func (l *Lake) tableFor(ctx context.Context, dataset string, id int64) (lt *loaded, fromCache bool, err error) {
	if lt, ok := l.cachedTable(dataset, id); ok {
		return l.indexed(dataset, lt), true, nil
	}
	lt, err = l.loadIndexed(ctx, dataset)
	return lt, false, err
}

// localCopy is the path of si's Puffin file on this machine: the
// warehouse's own file, or else its verified copy in the cache
// (downloaded if absent).
func (l *Lake) localCopy(ctx context.Context, t *table.Table, dataset string, si *ServingIndex) (string, error) {
	if si.Path != "" && !l.forceDownload {
		return si.Path, nil
	}
	return l.download(ctx, t, dataset, si)
}

// cacheName is the cached copy's file name of a Puffin file: named after
// its location (unique: the name holds the snapshot id and a UUID).
func cacheName(location string) string {
	h := sha256.Sum256([]byte(location))
	return hex.EncodeToString(h[:16]) + ".puffin"
}

// download copies si's Puffin file into the cache directory unless a
// verified copy is there, and returns the copy's path. Every artifact
// blob's SHA-256 is checked against the table metadata before the copy is
// renamed into place (fsynced), so a cached copy is always a verified one.
func (l *Lake) download(ctx context.Context, t *table.Table, dataset string, si *ServingIndex) (string, error) {
	dir := l.opts.CacheDir
	if dir == "" {
		return "", errors.New("lake: a remote warehouse needs Options.CacheDir (or Home) to download serving indexes into")
	}
	dst := filepath.Join(dir, cacheName(si.Location))
	if st, err := os.Stat(dst); err == nil && (si.Size <= 0 || st.Size() == si.Size) {
		touchCached(dst) // most recently used: pruned last
		return dst, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("lake: cache: %w", err)
	}
	fs, err := t.FS(ctx)
	if err != nil {
		return "", err
	}
	src, err := fs.Open(si.Location)
	if errors.Is(err, os.ErrNotExist) {
		return "", &NoServingIndexError{Dataset: dataset, IcebergSnapshot: si.Vintage.IcebergSnapshot, Reason: "puffin file missing: " + si.Location}
	}
	if err != nil {
		return "", fmt.Errorf("lake: download %s: %w", si.Location, err)
	}
	defer src.Close()
	sweepCacheTemps(dir, l.opts.OrphanMinAge)
	tmp, err := os.CreateTemp(dir, cacheTempPrefix+"*")
	if err != nil {
		return "", fmt.Errorf("lake: cache: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	n, err := io.Copy(tmp, ctxReader{ctx, src})
	if err != nil {
		return "", fmt.Errorf("lake: download %s: %w", si.Location, err)
	}
	if si.Size > 0 && n != si.Size {
		return "", fmt.Errorf("lake: download %s: %w", si.Location, &format.CorruptionError{File: si.Location, Offset: -1, Err: fmt.Errorf("%d bytes, the table metadata says %d", n, si.Size)})
	}
	for _, b := range si.Blobs {
		if err := checkSHA(tmp, b); err != nil {
			return "", fmt.Errorf("lake: download %s: %w", si.Location, err)
		}
	}
	if err := fileutil.SyncClose(tmp); err != nil {
		return "", err
	}
	if err := fileutil.Rename(tmp.Name(), dst); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	ok = true
	pruneCache(dir, l.opts.CacheBytes, dst, l.inUse)
	return dst, nil
}

// pruneCache deletes the least recently used cached Puffin files until
// the cache holds at most limit bytes, never keep nor a file inUse says
// a snapshot maps (cache.go): while those are over the limit the cache
// is. A file another process maps is unaffected on Unix (its mapping
// lives on; the name goes); where the system refuses (Windows), it stays
// for a later prune.
func pruneCache(dir string, limit int64, keep string, inUse func(path string) bool) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type cf struct {
		path string
		size int64
		used time.Time
	}
	var files []cf
	var total int64
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".puffin") || strings.HasPrefix(e.Name(), cacheTempPrefix) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		files = append(files, cf{filepath.Join(dir, e.Name()), info.Size(), info.ModTime()})
		total += info.Size()
	}
	slices.SortFunc(files, func(a, b cf) int { return a.used.Compare(b.used) })
	for _, f := range files {
		if total <= limit {
			return
		}
		if f.path == keep || inUse(f.path) {
			continue
		}
		if os.Remove(f.path) == nil {
			total -= f.size
		}
	}
}

// dropCachedPuffins deletes the cached copies of the Puffin files that
// before references and after no longer does (expired vintages).
func (l *Lake) dropCachedPuffins(before, after *table.Table) {
	if l.opts.CacheDir == "" {
		return
	}
	live := map[string]bool{}
	for sf := range after.Metadata().Statistics() {
		live[sf.StatisticsPath] = true
	}
	for sf := range before.Metadata().Statistics() {
		if !live[sf.StatisticsPath] {
			os.Remove(filepath.Join(l.opts.CacheDir, cacheName(sf.StatisticsPath)))
		}
	}
}

const cacheTempPrefix = format.TempPrefix + "puffin-"

// sweepCacheTemps removes the temporary files of downloads older than
// minAge (a process killed mid-download leaves one; never read).
func sweepCacheTemps(dir string, minAge time.Duration) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), cacheTempPrefix) {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > minAge {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// checkSHA reads blob b back from f and compares its SHA-256.
func checkSHA(f io.ReaderAt, b Blob) error {
	h := sha256.New()
	n, err := io.Copy(h, io.NewSectionReader(f, b.Offset, b.Length))
	if err == nil && n != b.Length {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return &format.CorruptionError{File: b.File, Offset: -1, Err: err}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != b.SHA256 {
		return &format.CorruptionError{File: b.File, Offset: -1, Err: fmt.Errorf("SHA-256 %s, the table metadata says %s", got, b.SHA256)}
	}
	return nil
}

// ctxReader stops a copy when ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// loaded is a table as loaded once, with its statistics entries by
// snapshot id (the metadata's Statistics() copies every entry on each
// call: an index keeps an open O(1) in the number of vintages).
type loaded struct {
	t     *table.Table
	stats map[int64]table.StatisticsFile
}

func indexTable(t *table.Table) *loaded {
	lt := &loaded{t: t, stats: map[int64]table.StatisticsFile{}}
	for sf := range t.Metadata().Statistics() {
		lt.stats[sf.SnapshotID] = sf
	}
	return lt
}

// cachedTable returns the table loaded last for dataset if it holds
// Iceberg snapshot id (snapshots and their statistics entries never
// change once committed), or nil.
func (l *Lake) cachedTable(dataset string, id int64) (*loaded, bool) {
	l.tables.Lock()
	lt := l.tables.m[dataset]
	l.tables.Unlock()
	if lt == nil || lt.t.SnapshotByID(id) == nil {
		return nil, false
	}
	return lt, true
}

// remember keeps t as the table loaded last for dataset; its statistics
// index is built on first use (loadIndexed).
func (l *Lake) remember(dataset string, t *table.Table) {
	l.tables.Lock()
	defer l.tables.Unlock()
	if l.tables.m == nil {
		l.tables.m = map[string]*loaded{}
	}
	l.tables.m[dataset] = &loaded{t: t}
}

// loadIndexed loads dataset's table with its statistics index, and keeps
// the index with the remembered table.
func (l *Lake) loadIndexed(ctx context.Context, dataset string) (*loaded, error) {
	t, err := l.load(ctx, dataset)
	if err != nil {
		return nil, err
	}
	return l.indexed(dataset, &loaded{t: t}), nil
}

// indexed returns lt with its statistics index built (once), and keeps
// the index with the remembered table when that is still lt's table.
func (l *Lake) indexed(dataset string, lt *loaded) *loaded {
	if lt.stats != nil {
		return lt
	}
	full := indexTable(lt.t)
	l.tables.Lock()
	if cur := l.tables.m[dataset]; cur != nil && cur.t == lt.t {
		l.tables.m[dataset] = full
	}
	l.tables.Unlock()
	return full
}

// Verify re-reads vintage v's serving artifacts where OpenSnapshot maps
// them (the Puffin file of a file:// warehouse, or the cached copy of a
// remote one, downloading and verifying it if absent) and checks every
// blob's SHA-256 against the table metadata: what a scrub does for a
// snapshot directory, for a snapshot mapped out of the lake. A flipped
// byte is a *format.CorruptionError naming the snapshot file. Reads run
// at the disk's pace; ctx stops them.
func (l *Lake) Verify(ctx context.Context, dataset string, v Vintage) error {
	lt, _, err := l.tableFor(ctx, dataset, v.IcebergSnapshot)
	if err != nil {
		return err
	}
	si, err := locate(ctx, lt, dataset, v.IcebergSnapshot)
	if err != nil {
		return err
	}
	path, err := l.localCopy(ctx, lt.t, dataset, si)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return &NoServingIndexError{Dataset: dataset, IcebergSnapshot: v.IcebergSnapshot, Reason: "puffin file missing: " + si.Location}
	}
	if err != nil {
		return err
	}
	defer f.Close()
	for _, b := range si.Blobs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := checkSHA(f, b); err != nil {
			return fmt.Errorf("lake: verify vintage %s (iceberg snapshot %d) of %s: %w", si.Vintage.Snapshot, v.IcebergSnapshot, dataset, err)
		}
	}
	return nil
}
