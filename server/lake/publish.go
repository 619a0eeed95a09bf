package lake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// Publish makes the snapshot in snapshotDir (a finished, immutable
// snapshot directory of dataset, FORMAT.md) the dataset's current vintage
// in ONE Iceberg commit: an overwrite snapshot whose Parquet data files
// replace the table's contents (copy-on-write, no delete files) and whose
// statistics file is the Puffin file of the serving artifacts, registered
// in the same metadata swap. The table is created on first publish.
//
// The data files and the Puffin file are written once, at the same time
// (they do not depend on the Iceberg snapshot), before the commit loop.
// Concurrent publishers (in this process or others sharing the catalog)
// are serialized by a compare-and-swap on the main branch: a publish pins
// its parent, and a lost race is rebuilt on the new parent (metadata
// only: the same data and Puffin files) and retried with jittered backoff
// (at most Options.MaxRetries times, then ErrConflict). A losing
// attempt's manifests, manifest list and metadata file are deleted, and a
// publish that fails deletes its data and Puffin files, so no orphan is
// left (unless the commit's outcome is unknown: then they are kept, as
// they may be referenced).
func (l *Lake) Publish(ctx context.Context, dataset, snapshotDir string) (v Vintage, err error) {
	return l.PublishWith(ctx, dataset, snapshotDir, PublishOptions{})
}

// PublishOptions are the options of PublishWith.
type PublishOptions struct {
	// RollbackOf, when not 0, is the Iceberg snapshot id of the vintage
	// this publish restores (a server's rollback publishes the vintage's
	// rows again as a new epoch): recorded as SummaryRollbackOf in the
	// commit's summary (Vintage.RollbackOf).
	RollbackOf int64
	// Over, when not 0, pins the publish to Iceberg snapshot Over as its
	// parent: if the head is another snapshot, at the first attempt or
	// after a lost race, the publish fails with ErrHeadMoved instead of
	// rebuilding on the new head, and removes what it wrote (arbiter.go).
	Over int64
	// Verified: the caller vouches that the directory's files match its
	// manifest (it wrote them with format.Write, or checked them with
	// format.VerifyFiles, and nothing else writes there): Publish then
	// trusts the manifest's SHA-256 instead of hashing every file again.
	// The Puffin blobs carry those sums either way; a download, Verify
	// and the store's scrub check them.
	Verified bool
}

// PublishWith is Publish with options.
func (l *Lake) PublishWith(ctx context.Context, dataset, snapshotDir string, o PublishOptions) (v Vintage, err error) {
	if err := format.ValidDatasetName(dataset); err != nil {
		return Vintage{}, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	src, err := readSnapshotFiles(snapshotDir)
	if err != nil {
		return Vintage{}, err
	}
	defer src.close()
	if src.m.Dataset != dataset {
		return Vintage{}, fmt.Errorf("%w: %s holds dataset %q, not %q", ErrBadSnapshot, snapshotDir, src.m.Dataset, dataset)
	}
	t, err := l.loadOrCreate(ctx, dataset, src.m.PeriodType)
	if err != nil {
		return Vintage{}, err
	}
	// The files' SHA-256 are checked against the manifest while the data
	// and Puffin files are written; nothing is committed unless they match.
	verified := make(chan error, 1)
	if o.Verified {
		verified <- nil
	} else {
		go func() { verified <- src.verify(snapshotDir) }()
	}
	w, err := l.writeFiles(ctx, t, src)
	if verr := <-verified; verr != nil {
		if err == nil {
			w.remove()
		}
		return Vintage{}, verr
	}
	if err != nil {
		return Vintage{}, err
	}
	defer func() {
		if err != nil && !errors.Is(err, errUnknownOutcome) {
			w.remove()
		}
	}()
	return l.commitRetrying(ctx, dataset, t, func(t *table.Table) (*attempt, error) {
		return l.publishAttempt(ctx, t, src, w, o)
	})
}

// written is what a publish wrote before its commit loop.
type written struct {
	fs     iceio.WriteFileIO
	data   []iceberg.DataFile
	puffin string
	sf     table.StatisticsFile // snapshot ids unset
	keep   map[string]bool      // every location above
}

func (w *written) remove() {
	for loc := range w.keep {
		w.fs.Remove(loc)
	}
}

// writeFiles writes the data files and the Puffin file of src at the same
// time and reads the data files' footers back into Iceberg data files.
func (l *Lake) writeFiles(ctx context.Context, t *table.Table, src *source) (*written, error) {
	return l.writeFilesWith(ctx, t, src, func(fs iceio.WriteFileIO) (table.StatisticsFile, string, error) {
		return writePuffin(fs, t.Location(), src)
	})
}

// writeFilesWith is writeFiles with puffin writing (or finishing) the
// Puffin file, while the data files are written.
func (l *Lake) writeFilesWith(ctx context.Context, t *table.Table, src *source, puffin func(iceio.WriteFileIO) (table.StatisticsFile, string, error)) (*written, error) {
	fs, err := writableFS(ctx, t)
	if err != nil {
		return nil, err
	}
	w := &written{fs: fs, keep: map[string]bool{}}
	var (
		wg        sync.WaitGroup
		puffinErr error
	)
	wg.Go(func() {
		w.sf, w.puffin, puffinErr = puffin(fs)
	})
	locs, dataErr := writeDataFiles(ctx, fs, t.Location(), src)
	wg.Wait()
	for _, loc := range locs {
		w.keep[loc] = true
	}
	if w.puffin != "" {
		w.keep[w.puffin] = true
	}
	if err := errors.Join(dataErr, puffinErr); err != nil {
		w.remove()
		return nil, err
	}
	spec := t.Spec()
	for _, loc := range locs {
		df, err := table.FileToDataFile(ctx, fs, loc, t.Schema(), spec, 0, t.Properties())
		if err != nil {
			w.remove()
			return nil, fmt.Errorf("lake: read back %s: %w", loc, err)
		}
		w.data = append(w.data, df)
	}
	return w, nil
}

// readSnapshot reads a snapshot directory's manifest and files, checks
// every file's SHA-256 against the manifest, and opens the readers.
func readSnapshot(dir string) (*source, error) {
	s, err := readSnapshotFiles(dir)
	if err != nil {
		return nil, err
	}
	if err := s.verify(dir); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// readSnapshotFiles reads a snapshot directory's manifest and files
// (sizes checked) and opens the readers over them; verify checks the
// contents.
func readSnapshotFiles(dir string) (*source, error) {
	snap, err := snapshot.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadSnapshot, dir, err)
	}
	return sourceOf(snap, dir)
}

// sourceOf opens the readers over the files of snap (mapped from where),
// sizes checked against its manifest; it takes over snap.
func sourceOf(snap *snapshot.Snapshot, dir string) (*source, error) {
	m := snap.Manifest
	mb, _ := snap.FileBytes(format.ManifestFile)
	msum := sha256.Sum256(mb)
	s := &source{m: m, snap: snap, files: map[string][]byte{format.ManifestFile: mb}, sums: map[string]string{format.ManifestFile: hex.EncodeToString(msum[:])}}
	for _, fi := range m.Files {
		b, ok := snap.FileBytes(fi.Name)
		if !ok || int64(len(b)) != fi.Size {
			s.close()
			return nil, fmt.Errorf("%w: %s/%s has %d bytes, its manifest entry %d", ErrBadSnapshot, dir, fi.Name, len(b), fi.Size)
		}
		s.files[fi.Name] = b
		s.sums[fi.Name] = fi.SHA256
	}
	if err := s.open(); err != nil {
		s.close()
		return nil, fmt.Errorf("%w: %s: %w", ErrBadSnapshot, dir, err)
	}
	return s, nil
}

// verify checks every file's SHA-256 against the manifest.
func (s *source) verify(dir string) (err error) {
	defer guardFault(debug.SetPanicOnFault(true), &err)
	for _, fi := range s.m.Files {
		sum := sha256.Sum256(s.files[fi.Name])
		if hex.EncodeToString(sum[:]) != fi.SHA256 {
			return fmt.Errorf("%w: %s/%s does not match its manifest entry (SHA-256)", ErrBadSnapshot, dir, fi.Name)
		}
	}
	return nil
}

// loadOrCreate loads the dataset's table, creating it for period type pt,
// and checks the period type.
func (l *Lake) loadOrCreate(ctx context.Context, dataset string, pt format.PeriodType) (*table.Table, error) {
	ident := l.Identifier(dataset)
	cat, err := l.CatalogContext(ctx)
	if err != nil {
		return nil, err
	}
	t, err := cat.LoadTable(ctx, ident)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		if err := l.probeWarehouse(ctx); err != nil { // s3.go: nothing is created if our writes are refused
			return nil, err
		}
		t, err = cat.CreateTable(ctx, ident, icebergSchema(pt), catalog.WithProperties(iceberg.Properties{
			"format-version":                  "2",
			"write.parquet.compression-codec": "zstd",
			"energyscope.dataset":             dataset,
		}))
		if errors.Is(err, catalog.ErrTableAlreadyExists) {
			t, err = cat.LoadTable(ctx, ident)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("lake: table %s: %w", dataset, err)
	}
	if got, ok := periodTypeOf(t.Schema()); !ok || got != pt {
		return nil, fmt.Errorf("%w: dataset %s: table has %q, snapshot has %q", ErrSchemaChanged, dataset, got, pt)
	}
	return t, nil
}

// attempt is one staged commit: the transaction, the new snapshot, the
// extra updates (statistics) and every file it wrote, for cleanup.
type attempt struct {
	txn     *table.Transaction
	staged  *table.StagedTable
	snap    *table.Snapshot
	updates []table.Update
	puffin  string          // Puffin location, "" if none written
	keep    map[string]bool // files the attempt reuses and must not delete
}

// publishAttempt stages, on t, the replacement of the table's contents by
// w's data files and registers w's Puffin file for the staged snapshot.
func (l *Lake) publishAttempt(ctx context.Context, t *table.Table, src *source, w *written, o PublishOptions) (*attempt, error) {
	if err := checkOver(o.Over, headID(t)); err != nil {
		return nil, err
	}
	txn := t.NewTransaction()
	if err := txn.AssertRefSnapshotID(table.MainBranch); err != nil {
		return nil, err
	}
	props := iceberg.Properties{
		SummarySnapshot:  src.m.SnapshotID,
		SummaryEpoch:     strconv.FormatUint(src.m.Epoch, 10),
		SummaryCoversSeq: strconv.FormatUint(src.m.CoversThroughSeq, 10),
		SummaryRows:      strconv.FormatInt(src.m.Rows, 10),
	}
	if o.RollbackOf != 0 {
		props[SummaryRollbackOf] = strconv.FormatInt(o.RollbackOf, 10)
	}
	var err error
	if head := t.CurrentSnapshot(); head == nil {
		err = txn.AddDataFiles(ctx, w.data, props)
	} else {
		var fs iceio.IO
		if fs, err = t.FS(ctx); err != nil {
			return nil, err
		}
		data, deletes, lerr := liveFiles(fs, head)
		if lerr != nil {
			return nil, lerr
		}
		err = txn.ReplaceFiles(ctx, data, w.data, deletes, props)
	}
	if err != nil {
		return nil, fmt.Errorf("lake: stage the data files: %w", err)
	}
	a, err := stage(txn)
	if err != nil {
		return nil, err
	}
	a.keep = w.keep
	a.updates = append(a.updates, table.NewSetStatisticsUpdate(forSnapshot(w.sf, a.snap)))
	return a, nil
}

func stage(txn *table.Transaction) (*attempt, error) {
	st, err := txn.StagedTable()
	if err != nil {
		return nil, err
	}
	snap := st.CurrentSnapshot()
	if snap == nil {
		return nil, errors.New("lake: staged table has no snapshot")
	}
	return &attempt{txn: txn, staged: st, snap: snap}, nil
}

func writableFS(ctx context.Context, t *table.Table) (iceio.WriteFileIO, error) {
	fs, err := t.FS(ctx)
	if err != nil {
		return nil, err
	}
	w, ok := fs.(iceio.WriteFileIO)
	if !ok {
		return nil, fmt.Errorf("lake: warehouse IO %T is read-only", fs)
	}
	return w, nil
}

// commitRetrying runs build on the latest table and commits its attempt,
// retrying on a lost race. It returns the committed vintage.
func (l *Lake) commitRetrying(ctx context.Context, dataset string, t *table.Table, build func(*table.Table) (*attempt, error)) (Vintage, error) {
	backoff := l.opts.RetryBackoff
	for try := 0; ; try++ {
		a, err := build(t)
		if errors.Is(err, errNothingToDo) {
			return vintageByID(t, headID(t))
		}
		if err != nil {
			l.cleanup(ctx, t, a, nil)
			return Vintage{}, err
		}
		if l.beforeCommit != nil {
			l.beforeCommit()
		}
		fresh, committed, err := l.commit(ctx, dataset, t, a)
		if committed {
			l.metrics.commits.Add(1)
			if v, err := vintageByID(fresh, a.snap.SnapshotID); err == nil {
				return v, nil
			}
			return Vintage{IcebergSnapshot: a.snap.SnapshotID}, nil
		}
		if fresh == nil {
			return Vintage{}, err
		}
		conflict := errors.Is(err, table.ErrCommitFailed) || headID(fresh) != headID(t) || isBusy(err)
		if !conflict {
			return Vintage{}, fmt.Errorf("lake: commit %s: %w", dataset, err)
		}
		if try >= l.opts.MaxRetries {
			return Vintage{}, fmt.Errorf("%w: dataset %s after %d attempts: %w", ErrConflict, dataset, try+1, err)
		}
		l.metrics.conflicts.Add(1)
		l.opts.Logger.Debug("lake: commit lost a race; rebuilding", "dataset", dataset, "attempt", try+1, "err", err)
		sleepJitter(ctx, backoff)
		if err := ctx.Err(); err != nil {
			return Vintage{}, err
		}
		backoff = min(backoff*2, l.opts.RetryBackoff*64)
		t = fresh
	}
}

// commit swaps the metadata in one catalog commit: the transaction's
// updates (the new snapshot, the main ref) plus a.updates (statistics)
// under the transaction's requirements (the pinned parent). On failure it
// reloads the table: if the new snapshot is the head after all, the
// commit happened; otherwise the attempt's files are deleted and the
// fresh table is returned for a retry (nil if it cannot be loaded).
func (l *Lake) commit(ctx context.Context, dataset string, base *table.Table, a *attempt) (fresh *table.Table, committed bool, err error) {
	cat, err := l.CatalogContext(ctx)
	if err != nil {
		return nil, false, err
	}
	tc, err := a.txn.TableCommit()
	if err == nil {
		_, _, err = cat.CommitTable(ctx, l.Identifier(dataset), tc.Requirements, append(tc.Updates, a.updates...))
	}
	fresh, lerr := cat.LoadTable(ctx, l.Identifier(dataset))
	if err == nil {
		a.txn.MarkCommitted()
		if lerr != nil {
			return nil, true, nil
		}
		return fresh, true, nil
	}
	if lerr != nil {
		// Unknown outcome: keep the files (they may be referenced).
		return nil, false, fmt.Errorf("lake: commit %s: %w (and reloading: %v): %w", dataset, err, lerr, errUnknownOutcome)
	}
	if headID(fresh) == a.snap.SnapshotID {
		a.txn.MarkCommitted()
		return fresh, true, nil
	}
	l.cleanup(ctx, base, a, fresh)
	return fresh, false, err
}

// errUnknownOutcome: a commit failed and the table could not be reloaded
// to tell whether it landed; the files it references are kept.
var errUnknownOutcome = errors.New("lake: commit outcome unknown")

func randN(n int64) int64 { return rand.Int64N(n) }

func headID(t *table.Table) int64 {
	if s := t.CurrentSnapshot(); s != nil {
		return s.SnapshotID
	}
	return 0
}

func isBusy(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "SQLITE_BUSY") || strings.Contains(s, "database is locked")
}

// cleanup deletes what a losing attempt wrote: its Puffin file, the
// manifest list of its snapshot, the manifests it added and the data
// files they added, and any metadata file the catalog wrote for it
// (metadata files of versions after base's up to fresh's that fresh does
// not reference: no commit can ever point at them any more).
func (l *Lake) cleanup(ctx context.Context, base *table.Table, a *attempt, fresh *table.Table) {
	if a == nil {
		return
	}
	fs, err := writableFS(ctx, base)
	if err != nil {
		return
	}
	var doomed []string
	if a.puffin != "" && !a.keep[a.puffin] {
		doomed = append(doomed, a.puffin)
	}
	if a.snap != nil {
		doomed = append(doomed, a.snap.ManifestList)
		mans, err := a.snap.Manifests(fs)
		if err != nil {
			l.opts.Logger.Warn("lake: cleanup: read manifests", "err", err)
		}
		for _, m := range mans {
			if m.SnapshotID() != a.snap.SnapshotID {
				continue
			}
			doomed = append(doomed, m.FilePath())
			for e, err := range m.Entries(fs, false) {
				if err != nil {
					l.opts.Logger.Warn("lake: cleanup: read manifest", "manifest", m.FilePath(), "err", err)
					break
				}
				if e.Status() == iceberg.EntryStatusADDED && e.SnapshotID() == a.snap.SnapshotID && !a.keep[e.DataFile().FilePath()] {
					doomed = append(doomed, e.DataFile().FilePath())
				}
			}
		}
	}
	if fresh != nil {
		doomed = append(doomed, deadMetadataFiles(fs, base, fresh)...)
	}
	for _, p := range doomed {
		if err := fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.opts.Logger.Warn("lake: cleanup of a losing attempt", "file", p, "err", err)
		} else if err == nil {
			l.metrics.cleaned.Add(1)
		}
	}
}

// metadataVersion parses NNNNN from ".../NNNNN-<uuid>.metadata.json".
func metadataVersion(loc string) (int, bool) {
	name := path.Base(loc)
	if !strings.HasSuffix(name, ".metadata.json") {
		return 0, false
	}
	i := strings.IndexByte(name, '-')
	if i <= 0 {
		return 0, false
	}
	n, err := strconv.Atoi(name[:i])
	return n, err == nil
}

// deadMetadataFiles lists metadata files with versions in (base, fresh]
// that fresh does not reference.
func deadMetadataFiles(fs iceio.IO, base, fresh *table.Table) []string {
	lo, ok1 := metadataVersion(base.MetadataLocation())
	hi, ok2 := metadataVersion(fresh.MetadataLocation())
	lister, ok3 := fs.(iceio.ListableIO)
	if !ok1 || !ok2 || !ok3 {
		return nil
	}
	// Compare local paths or URIs with the scheme kept: path.Dir would
	// fold "file:///a" into "file:/a" and miss a live file.
	norm := func(p string) string { return localPathOf(p) }
	live := map[string]bool{norm(fresh.MetadataLocation()): true}
	for e := range fresh.Metadata().PreviousFiles() {
		live[norm(e.MetadataFile)] = true
	}
	loc := fresh.MetadataLocation()
	dir := loc[:strings.LastIndexByte(loc, '/')]
	var out []string
	lister.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if norm(p) != norm(dir) {
				return filepath.SkipDir
			}
			return nil
		}
		v, ok := metadataVersion(p)
		if !ok || v <= lo || v > hi || live[norm(p)] {
			return nil
		}
		out = append(out, p)
		return nil
	})
	return out
}
