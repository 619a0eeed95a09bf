package lake

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/puffin"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// puffinMagic opens and closes a Puffin file.
var puffinMagic = []byte("PFA1")

// PublishCooked is Publish of a snapshot cooked straight into its Puffin
// file: the serving files are written once (a store's compaction writes
// no snapshot directory). cook writes the snapshot into the container it
// is given (format.WriteInto, format.WriteSortedInto) and returns its
// manifest; the container begins with the Puffin magic and PublishCooked
// appends the Puffin footer (FORMAT.md, "The lake": the same layout as
// Publish writes, the artifacts in the order the writer placed them).
// When the warehouse is a local directory and the table exists, the
// container is created in the table's metadata directory and becomes the
// vintage's Puffin file where it lies; otherwise (an s3 warehouse, or the
// table's first publish) it is written under Options.CacheDir (the
// system's temporary directory without one) and then renamed into the
// table's metadata directory (a local warehouse on the same filesystem)
// or uploaded as Publish uploads its Puffin file, and removed (a crash leaves it to the cache's sweep of
// temporary files). opts, when set, gives the options of the
// publish from the manifest (called after cook, before the commit).
//
// The container is fsynced (file and directory) before any commit
// references it; it depends on no Iceberg snapshot (its blobs carry
// snapshot id -1), so every attempt of the commit loop reuses it. A
// publish that fails removes it with its data files (unless the commit's
// outcome is unknown); one killed before its commit leaves a file no
// metadata references, which Expire's orphan cleanup deletes and which
// is never served (a vintage is located only through committed table
// metadata). Each PublishCooked creates its own container (a new UUID in
// its name): it never finds, let alone trusts, an earlier one.
func (l *Lake) PublishCooked(ctx context.Context, dataset string, cook func(*format.Container) (*format.Manifest, error),
	opts func(*format.Manifest) PublishOptions) (v Vintage, m *format.Manifest, err error) {
	if err := format.ValidDatasetName(dataset); err != nil {
		return Vintage{}, nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	cat, err := l.CatalogContext(ctx)
	if err != nil {
		return Vintage{}, nil, err
	}
	t, err := cat.LoadTable(ctx, l.Identifier(dataset))
	if err != nil && !errors.Is(err, catalog.ErrNoSuchTable) {
		return Vintage{}, nil, fmt.Errorf("lake: table %s: %w", dataset, err)
	}
	name := "es-serving-" + uuid.NewString() + ".puffin"
	var loc, path string // loc: the Puffin file in the warehouse; path: the container
	inPlace := t != nil && isLocal(t.Location())
	if inPlace {
		loc = t.Location() + "/metadata/" + name
		path = localPathOf(loc)
	} else {
		dir := l.opts.CacheDir
		if dir == "" {
			dir = os.TempDir()
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return Vintage{}, nil, err
		}
		// A temporary name of the download cache: never pruned as a
		// copy, swept once older than OrphanMinAge if a crash left it.
		path = filepath.Join(dir, cacheTempPrefix+"cook-"+name)
	}
	c, err := format.CreateContainer(path, puffinMagic)
	if err != nil {
		return Vintage{}, nil, fmt.Errorf("lake: create the serving index of %s: %w", dataset, err)
	}
	removeContainer := true
	defer func() {
		if removeContainer {
			c.Remove()
		}
	}()
	if m, err = cook(c); err != nil {
		return Vintage{}, nil, err
	}
	if m.Dataset != dataset {
		return Vintage{}, nil, fmt.Errorf("%w: the cook wrote dataset %q, not %q", ErrBadSnapshot, m.Dataset, dataset)
	}
	if t == nil || !inPlace {
		if t, err = l.loadOrCreate(ctx, dataset, m.PeriodType); err != nil {
			return Vintage{}, nil, err
		}
		loc = t.Location() + "/metadata/" + name
		// A table's first publish in a local warehouse: the container
		// moves into place when the cache shares the filesystem.
		if isLocal(loc) && c.Rename(localPathOf(loc)) == nil {
			inPlace, path = true, localPathOf(loc)
		}
	} else if got, ok := periodTypeOf(t.Schema()); !ok || got != m.PeriodType {
		return Vintage{}, nil, fmt.Errorf("%w: dataset %s: table has %q, snapshot has %q", ErrSchemaChanged, dataset, got, m.PeriodType)
	}
	sf, err := finishPuffin(c, loc, m)
	if err != nil {
		return Vintage{}, nil, fmt.Errorf("lake: write the serving index of %s: %w", dataset, err)
	}
	src, err := containerSource(c, m)
	if err != nil {
		return Vintage{}, nil, err
	}
	// Closed before anything removes or moves the container (Windows
	// refuses to for a mapped file), at the latest on return.
	closeSrc := sync.OnceFunc(src.close)
	defer closeSrc()
	// The container is fsynced (or uploaded) while the data files are
	// written; the commit waits for both.
	w, err := l.writeFilesWith(ctx, t, src, func(fs iceio.WriteFileIO) (table.StatisticsFile, string, error) {
		if !inPlace {
			return sf, loc, upload(fs, c, loc)
		}
		if err := c.Durable(); err != nil {
			return sf, loc, err
		}
		noteSynced(path)
		noteSynced(filepath.Dir(path))
		return sf, loc, nil
	})
	if err != nil {
		return Vintage{}, nil, err
	}
	// In place, the Puffin file is now w's (removed with the data files
	// if the publish fails); the local copy of an uploaded one becomes
	// the download cache's copy once the commit lands (keepUploaded).
	removeContainer = false
	if inPlace {
		c.Close()
	}
	defer func() {
		if err != nil && !errors.Is(err, errUnknownOutcome) {
			closeSrc()
			w.remove()
		}
	}()
	var po PublishOptions
	if opts != nil {
		po = opts(m)
	}
	v, err = l.commitRetrying(ctx, dataset, t, func(t *table.Table) (*attempt, error) {
		return l.publishAttempt(ctx, t, src, w, po)
	})
	if !inPlace {
		closeSrc()
		l.keepUploaded(c, loc, err == nil)
	}
	return v, m, err
}

// keepUploaded makes the local container of a Puffin file uploaded to loc
// the download cache's copy of it when its commit landed (committed), so
// that the store's OpenSnapshot of the new vintage maps it instead of
// downloading the file just uploaded; otherwise it is removed. Its bytes
// are the ones uploaded, and each blob's SHA-256 in the Puffin footer was
// computed from them as they were written, as a downloaded copy's are
// checked: it is fsynced and renamed into the cache like a download.
// Failing that, it is removed and the first open downloads.
func (l *Lake) keepUploaded(c *format.Container, loc string, committed bool) {
	dir := l.opts.CacheDir
	// A local warehouse's vintage is mapped where it lies (si.Path), never
	// from the cache: a container that took the copy path there (its
	// rename failed: another filesystem) has no use as a cached copy.
	if !committed || isLocal(loc) || dir == "" || filepath.Dir(c.Path()) != filepath.Clean(dir) {
		c.Remove()
		return
	}
	dst := filepath.Join(dir, cacheName(loc))
	if err := c.Durable(); err != nil {
		c.Remove()
		return
	}
	if err := c.Rename(dst); err != nil {
		c.Remove()
		return
	}
	c.Close()
	pruneCache(dir, l.opts.CacheBytes, dst, l.inUse)
}

// isLocal: the location is a local path (the file:// scheme or none).
func isLocal(location string) bool {
	return strings.HasPrefix(location, "file:") || filepath.IsAbs(location)
}

// upload copies the finished container to loc in the warehouse.
func upload(fs iceio.WriteFileIO, c *format.Container, loc string) error {
	f, err := os.Open(c.Path())
	if err != nil {
		return err
	}
	defer f.Close()
	out, err := fs.Create(loc)
	if err != nil {
		return err
	}
	_, err = io.CopyBuffer(out, f, make([]byte, copyReadSize))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fs.Remove(loc)
		return fmt.Errorf("write serving index: %w", err)
	}
	return nil
}

// finishPuffin appends the Puffin footer to the container c holding the
// snapshot m: every artifact the writer placed, with padding blobs over
// the gaps, and returns the statistics file to register for loc (its
// snapshot ids unset: see forSnapshot).
func finishPuffin(c *format.Container, loc string, m *format.Manifest) (table.StatisticsFile, error) {
	const unknown = -1
	fields := []int32{fieldSeriesID, fieldPeriod, fieldValue}
	sf := table.StatisticsFile{StatisticsPath: loc}
	var blobs []puffin.BlobMetadata
	end := int64(len(puffinMagic))
	for _, p := range c.Files() {
		typ := blobTypeOf(p.Name)
		if typ == "" {
			return sf, fmt.Errorf("the container holds %s, not a serving artifact", p.Name)
		}
		if gap := p.Offset - end; gap > 0 {
			blobs = append(blobs, puffin.BlobMetadata{Type: BlobPadding, SnapshotID: unknown, SequenceNumber: unknown, Fields: []int32{}, Offset: end, Length: gap})
		}
		var sum string
		if fi := m.File(p.Name); fi != nil {
			sum = fi.SHA256
		} else {
			var err error
			if sum, err = c.SHA256(p.Name); err != nil {
				return sf, err
			}
		}
		blobs = append(blobs, puffin.BlobMetadata{Type: puffin.BlobType(typ), SnapshotID: unknown, SequenceNumber: unknown, Fields: fields,
			Offset: p.Offset, Length: p.Length, Properties: map[string]string{PropFile: p.Name, PropSHA256: sum}})
		tprops := map[string]string{PropFile: p.Name, PropSHA256: sum}
		if recordOffsets {
			tprops[PropOffset] = strconv.FormatInt(p.Offset, 10)
			tprops[PropLength] = strconv.FormatInt(p.Length, 10)
		}
		sf.BlobMetadata = append(sf.BlobMetadata, table.BlobMetadata{Type: table.BlobType(typ), Fields: fields, Properties: tprops})
		end = p.Offset + p.Length
	}
	payload, err := json.Marshal(puffin.Footer{Blobs: blobs, Properties: map[string]string{
		SummarySnapshot: m.SnapshotID, "dataset": m.Dataset, puffin.CreatedBy: createdBy}})
	if err != nil {
		return sf, err
	}
	footer := make([]byte, 0, len(payload)+16)
	footer = append(footer, puffinMagic...)
	footer = append(footer, payload...)
	footer = binary.LittleEndian.AppendUint32(footer, uint32(len(payload)))
	footer = binary.LittleEndian.AppendUint32(footer, 0) // flags: uncompressed
	footer = append(footer, puffinMagic...)
	if _, err := c.Append(footer); err != nil {
		return sf, err
	}
	sf.FileSizeInBytes = c.Size()
	sf.FileFooterSizeInBytes = int64(len(footer))
	return sf, nil
}

// containerSource maps the snapshot m written into c.
func containerSource(c *format.Container, m *format.Manifest) (*source, error) {
	set := snapshot.FileSet{}
	for _, p := range c.Files() {
		set[p.Name] = snapshot.Region{Path: c.Path(), Offset: p.Offset, Length: p.Length}
	}
	snap, err := snapshot.OpenFiles(set, snapshot.Options{})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadSnapshot, c.Path(), err)
	}
	if snap.ID() != m.SnapshotID {
		snap.Close()
		return nil, fmt.Errorf("%w: %s holds snapshot %s, the cook wrote %s", ErrBadSnapshot, c.Path(), snap.ID(), m.SnapshotID)
	}
	return sourceOf(snap, c.Path())
}
