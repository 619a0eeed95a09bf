package lake

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// liveFiles lists the data files and the delete files snapshot s reads.
func liveFiles(fs iceio.IO, s *table.Snapshot) (data, deletes []iceberg.DataFile, err error) {
	mans, err := s.Manifests(fs)
	if err != nil {
		return nil, nil, err
	}
	for _, m := range mans {
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				return nil, nil, err
			}
			if m.ManifestContent() == iceberg.ManifestContentData {
				data = append(data, e.DataFile())
			} else {
				deletes = append(deletes, e.DataFile())
			}
		}
	}
	return data, deletes, nil
}

// liveDataFiles lists the data files a snapshot reads (not deleted).
func liveDataFiles(fs iceio.IO, s *table.Snapshot) ([]iceberg.DataFile, error) {
	mans, err := s.Manifests(fs)
	if err != nil {
		return nil, err
	}
	var out []iceberg.DataFile
	for _, m := range mans {
		if m.ManifestContent() != iceberg.ManifestContentData {
			return nil, fmt.Errorf("snapshot %d has delete files (another engine's merge-on-read write)", s.SnapshotID)
		}
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				return nil, err
			}
			out = append(out, e.DataFile())
		}
	}
	return out, nil
}

// Rollback makes vintage v current again in one commit: a new overwrite
// snapshot whose data files are v's (the same Parquet files, re-added;
// the files current now are removed from the new snapshot) and whose
// statistics file is v's Puffin file (the same file, registered again for
// the new snapshot), with v's summary keys and energyscope.rollback-of =
// v's Iceberg snapshot id. History stays linear and v's es snapshot id is
// current again; expiry keeps shared files while any retained snapshot
// references them. Rolling back to the current vintage changes nothing. A
// vintage that was expired is ErrUnknownVintage; one without a serving
// index is ErrNoServingIndex.
func (l *Lake) Rollback(ctx context.Context, dataset string, v Vintage) (Vintage, error) {
	t, err := l.load(ctx, dataset)
	if err != nil {
		return Vintage{}, err
	}
	return l.commitRetrying(ctx, dataset, t, func(t *table.Table) (*attempt, error) {
		target := t.SnapshotByID(v.IcebergSnapshot)
		if target == nil {
			return nil, fmt.Errorf("%w: iceberg snapshot %d (%s) of dataset %s no longer exists (expired?): cannot roll back to it",
				ErrUnknownVintage, v.IcebergSnapshot, v.Snapshot, dataset)
		}
		tv, err := vintageByID(t, target.SnapshotID)
		if err != nil {
			return nil, err
		}
		sf, ok := statisticsOf(t, target.SnapshotID)
		if !ok || !tv.Serving {
			return nil, &NoServingIndexError{Dataset: dataset, IcebergSnapshot: target.SnapshotID, Reason: "no energyscope statistics file: cannot roll back to it"}
		}
		head := t.CurrentSnapshot()
		fs, err := t.FS(ctx)
		if err != nil {
			return nil, err
		}
		want, err := liveDataFiles(fs, target)
		if err != nil {
			return nil, err
		}
		var have []iceberg.DataFile
		if head != nil {
			if have, err = liveDataFiles(fs, head); err != nil {
				return nil, err
			}
		}
		wantSet := map[string]bool{}
		for _, f := range want {
			wantSet[f.FilePath()] = true
		}
		haveSet := map[string]bool{}
		var del, add []iceberg.DataFile
		for _, f := range have {
			haveSet[f.FilePath()] = true
			if !wantSet[f.FilePath()] {
				del = append(del, f)
			}
		}
		for _, f := range want {
			if !haveSet[f.FilePath()] {
				add = append(add, f)
			}
		}
		if len(del) == 0 && len(add) == 0 {
			// v is the head, or the head already reads v's files (a
			// rollback to v): nothing to commit.
			return nil, errNothingToDo
		}
		props := iceberg.Properties{}
		for k, val := range target.Summary.Properties {
			switch k {
			case SummarySnapshot, SummaryEpoch, SummaryCoversSeq, SummaryRows:
				props[k] = val
			}
		}
		props[SummaryRollbackOf] = strconv.FormatInt(target.SnapshotID, 10)
		txn := t.NewTransaction()
		if err := txn.AssertRefSnapshotID(table.MainBranch); err != nil {
			return nil, err
		}
		if err := txn.ReplaceDataFilesWithDataFiles(ctx, del, add, props); err != nil {
			return nil, fmt.Errorf("lake: rollback: %w", err)
		}
		a, err := stage(txn)
		if err != nil {
			return nil, err
		}
		nsf := sf
		nsf.SnapshotID = a.snap.SnapshotID
		nsf.BlobMetadata = append([]table.BlobMetadata(nil), sf.BlobMetadata...)
		for i := range nsf.BlobMetadata {
			nsf.BlobMetadata[i].SnapshotID = a.snap.SnapshotID
		}
		a.updates = append(a.updates, table.NewSetStatisticsUpdate(nsf))
		return a, nil
	})
}

// errNothingToDo short-cuts a rollback to the current vintage.
var errNothingToDo = errors.New("lake: nothing to do")

var tagRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,63}$`)

// ErrBadTag: a tag name that is not allowed, or already used.
var ErrBadTag = errors.New("lake: bad tag name")

// Tag names vintage v: a tag ref on its Iceberg snapshot, which keeps it
// through expiry, and a name Resolve accepts. Names start with a letter
// (letters, digits, '_', '.', '-', at most 64), must not look like an es
// snapshot id, and must be new (ErrBadTag).
func (l *Lake) Tag(ctx context.Context, dataset string, v Vintage, name string) error {
	if !tagRE.MatchString(name) || esSnapshotRE.MatchString(name) || name == table.MainBranch {
		return fmt.Errorf("%w: %q (a letter, then letters, digits, '_', '.', '-'; not an es snapshot id, not %q)", ErrBadTag, name, table.MainBranch)
	}
	t, err := l.load(ctx, dataset)
	if err != nil {
		return err
	}
	if t.SnapshotByID(v.IcebergSnapshot) == nil {
		return fmt.Errorf("%w: iceberg snapshot %d of dataset %s (expired?)", ErrUnknownVintage, v.IcebergSnapshot, dataset)
	}
	for n := range t.Metadata().Refs() {
		if n == name {
			return fmt.Errorf("%w: %q already names a vintage of %s", ErrBadTag, name, dataset)
		}
	}
	_, _, err = l.Catalog().CommitTable(ctx, l.Identifier(dataset),
		[]table.Requirement{table.AssertTableUUID(t.Metadata().TableUUID()), table.AssertRefSnapshotID(name, nil)},
		[]table.Update{table.NewSetSnapshotRefUpdate(name, v.IcebergSnapshot, table.TagRef, 0, 0, 0)})
	if err != nil {
		return fmt.Errorf("lake: tag %s of %s: %w", name, dataset, err)
	}
	return nil
}

// ExpireResult reports what Expire removed.
type ExpireResult struct {
	Expired      []Vintage // the vintages removed from the table
	OrphansFound int       // unreferenced files older than Options.OrphanMinAge, deleted
}

// Expire removes old vintages: a vintage is kept if it is among the keepN
// newest of the main branch's history OR committed within keepFor, if a
// tag names it, or if it is current (Iceberg's expire-snapshots rules;
// keepN >= 1). The expired snapshots' manifest lists, manifests, data
// files and Puffin files no retained vintage references are deleted, then
// files in the table's location that no metadata references and that are
// older than Options.OrphanMinAge (a publish in flight writes younger
// ones) are deleted too.
func (l *Lake) Expire(ctx context.Context, dataset string, keepN int, keepFor time.Duration) (ExpireResult, error) {
	var res ExpireResult
	if keepN < 1 || keepFor < 0 {
		return res, fmt.Errorf("lake: expire: keep at least 1 vintage (got %d) for a non-negative time (got %v)", keepN, keepFor)
	}
	backoff := l.opts.RetryBackoff
	for try := 0; ; try++ {
		t, err := l.load(ctx, dataset)
		if err != nil {
			return res, err
		}
		before := vintagesOf(t)
		txn := t.NewTransaction()
		if err := txn.ExpireSnapshots(table.WithRetainLast(keepN), table.WithOlderThan(keepFor)); err != nil {
			return res, fmt.Errorf("lake: expire %s: %w", dataset, err)
		}
		nt, err := txn.Commit(ctx)
		if err != nil {
			fresh, lerr := l.load(ctx, dataset)
			if lerr == nil && (errors.Is(err, table.ErrCommitFailed) || fresh.MetadataLocation() != t.MetadataLocation() || isBusy(err)) && try < l.opts.MaxRetries {
				sleepJitter(ctx, backoff)
				backoff = min(backoff*2, l.opts.RetryBackoff*64)
				continue
			}
			return res, fmt.Errorf("lake: expire %s: %w", dataset, err)
		}
		kept := map[int64]bool{}
		for _, v := range vintagesOf(nt) {
			kept[v.IcebergSnapshot] = true
		}
		l.dropCachedPuffins(t, nt)
		for _, v := range before {
			if !kept[v.IcebergSnapshot] {
				res.Expired = append(res.Expired, v)
			}
		}
		or, err := nt.DeleteOrphanFiles(ctx, table.WithFilesOlderThan(l.opts.OrphanMinAge))
		if err != nil {
			return res, fmt.Errorf("lake: orphan cleanup of %s: %w", dataset, err)
		}
		res.OrphansFound = len(or.DeletedFiles)
		return res, nil
	}
}

func sleepJitter(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Duration(randN(int64(d) + 1))):
	}
}
