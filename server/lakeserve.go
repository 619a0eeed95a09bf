package server

// The lake as the server's store of record (issue 12; FORMAT.md "The
// lake", README "The lake"). With Options.Lake set:
//
//   - every snapshot the store puts in service (PUT, compaction by size,
//     by time or by POST .../compact) is first published to the lake as one
//     Iceberg commit, before CURRENT moves: a compaction cooks it straight
//     into the vintage's Puffin file (localcache.Options.CookPublish,
//     lake.PublishCooked: the serving files are written once); a snapshot
//     cooked elsewhere and installed (PUT, es cook) goes through the
//     store's Publish hook (localcache.Options.Publish) after it is placed. A failed publish fails the install (ErrLakeUnavailable,
//     HTTP 503): the old snapshot keeps serving and the delta keeps its
//     rows.
//   - at New, each dataset is reconciled with its table (reconcileLake):
//     the lake wins. A vintage the home does not serve is installed as the
//     lake has it (its epoch, its covers); a dataset without a table is
//     published once (the migration of a home from before the lake); a
//     head written by another engine is refused, and the vintage below it
//     keeps serving.
//   - /healthz says whether the catalog answers and which vintage each
//     dataset serves (Health.Lake, DatasetHealth.Vintage).

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/apache/iceberg-go/catalog"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
	"github.com/energyscope/energyscope/server/hub"
	"github.com/energyscope/energyscope/server/lake"
)

// ErrLakeUnavailable: a snapshot could not be published to the lake (its
// catalog or warehouse did not answer, or the commit kept losing races).
// Nothing changed: the old snapshot serves and the delta keeps its rows.
// HTTP 503.
var ErrLakeUnavailable = errors.New("lake unavailable")

// lakeError is a failed publish: it matches ErrLakeUnavailable and keeps
// the lake's error in its chain (errors.Is(err, lake.ErrConflict), ...).
type lakeError struct {
	dataset string
	err     error
}

func (e *lakeError) Error() string {
	return fmt.Sprintf("%v: publishing dataset %s to the lake failed; nothing changed, the rows are kept and the previous snapshot serves: %v", ErrLakeUnavailable, e.dataset, e.err)
}
func (e *lakeError) Unwrap() error        { return e.err }
func (e *lakeError) Is(target error) bool { return target == ErrLakeUnavailable }

// CatalogState says whether the lake's catalog answered the last check.
type CatalogState string

// Catalog states of LakeHealth.
const (
	CatalogReachable   CatalogState = "reachable"
	CatalogUnreachable CatalogState = "unreachable"
)

// LakeHealth is the lake part of Health (nil without a lake).
type LakeHealth struct {
	Catalog CatalogState `json:"catalog"`
	// Error is why the catalog is unreachable (the check's error, or the
	// last failed publish if that came later).
	Error string `json:"error,omitempty"`
	// LastPublishError is the last failed publish and when, if any since
	// the last successful one.
	LastPublishError string     `json:"last_publish_error,omitempty"`
	LastPublishAt    *time.Time `json:"last_publish_error_at,omitempty"`
}

// VintageHealth is the vintage a dataset serves, in Health.
type VintageHealth struct {
	Snapshot        string    `json:"snapshot"`
	IcebergSnapshot int64     `json:"iceberg_snapshot"`
	CommittedAt     time.Time `json:"committed_at"`
	// Refused is set when the table's head is a vintage the server does
	// not serve (another engine's commit without a serving index): why,
	// and what to do.
	Refused string `json:"refused,omitempty"`
}

// lakeCheckTimeout bounds the catalog check of /healthz.
const lakeCheckTimeout = 3 * time.Second

// lakeStartWait bounds how long New waits for the catalog's connection
// (a var: tests lower it).
var lakeStartWait = 10 * time.Second

// Lake is the server's lake, nil without one.
func (s *Server) Lake() *lake.Lake { return s.opts.Lake }

// publishToLake is the store's Publish hook: the placed snapshot dir of
// dataset becomes one Iceberg commit before CURRENT moves.
func (s *Server) publishToLake(dataset, dir string, m *format.Manifest) error {
	po, skip := s.publishOptions(dataset, m)
	if skip {
		return nil // the lake's own vintage, installed by installFromLake
	}
	start := time.Now()
	v, err := s.opts.Lake.PublishWith(s.ctx, dataset, dir, po)
	return s.published(dataset, m, v, err, start)
}

// cookToLake is the store's CookPublish hook: a compaction cooks its
// snapshot straight into the Puffin file of the vintage it becomes
// (lake.PublishCooked), committed before CURRENT moves; the home gets no
// directory of it (the store maps it through OpenSnapshot).
func (s *Server) cookToLake(dataset string, cook func(*format.Container) (*format.Manifest, error)) (*format.Manifest, error) {
	start := time.Now()
	var cookErr error
	v, m, err := s.opts.Lake.PublishCooked(s.ctx, dataset, func(c *format.Container) (*format.Manifest, error) {
		m, err := cook(c)
		cookErr = err
		return m, err
	}, func(m *format.Manifest) lake.PublishOptions {
		po, _ := s.publishOptions(dataset, m)
		return po
	})
	if cookErr != nil {
		return nil, cookErr // the fold failed: not the lake's failure
	}
	if err := s.published(dataset, m, v, err, start); err != nil {
		return nil, err
	}
	return m, nil
}

// publishOptions are the options of publishing snapshot m of dataset;
// skip: it is the lake's own vintage being installed (nothing to do).
func (s *Server) publishOptions(dataset string, m *format.Manifest) (po lake.PublishOptions, skip bool) {
	s.lk.Lock()
	skip = s.lk.installing[dataset] == m.SnapshotID
	// The store hands over a snapshot it has just written (format.Write)
	// or checked (Install's VerifyFiles): not hashed again.
	po = lake.PublishOptions{Verified: true}
	if rb, ok := s.lk.rollbackOf[dataset]; ok && rb.snapshot == m.SnapshotID {
		po.RollbackOf = rb.of
	}
	s.lk.Unlock()
	if !skip {
		po.Over = s.publishOver(dataset, m) // replica.go: a compaction is pinned to its parent
	}
	return po, skip
}

// published records the outcome of publishing snapshot m of dataset as
// vintage v (err: the publish failed) and returns the hook's error.
func (s *Server) published(dataset string, m *format.Manifest, v lake.Vintage, err error, start time.Time) error {
	if errors.Is(err, lake.ErrHeadMoved) {
		return err // another replica published first: not a failure of the lake
	}
	if err != nil {
		s.lakeFailed(err)
		if errors.Is(err, lake.ErrSchemaChanged) {
			return fmt.Errorf("%w: dataset %s: %v", ErrConflict, dataset, err)
		}
		return &lakeError{dataset: dataset, err: err}
	}
	if v.Snapshot != m.SnapshotID {
		// Publish reads the manifest it commits: this cannot happen.
		return &lakeError{dataset: dataset, err: fmt.Errorf("the lake recorded snapshot %q for %s", v.Snapshot, m.SnapshotID)}
	}
	s.lk.Lock()
	s.lk.vintages[dataset] = v
	delete(s.lk.refused, dataset)
	s.lk.pubErr, s.lk.pubErrAt = nil, time.Time{}
	s.lk.Unlock()
	s.log.Info("published to the lake", "dataset", dataset, "snapshot", v.Snapshot, "iceberg_snapshot", v.IcebergSnapshot,
		"epoch", v.Epoch, "covers", v.CoversSeq, "seconds", time.Since(start).Seconds())
	s.expireAfterPublish(dataset) // retention (vintages.go), in the background
	return nil
}

// rollbackMark is a rollback being installed: its snapshot restores the
// vintage with Iceberg snapshot id of.
type rollbackMark struct {
	snapshot string
	of       int64
}

// lastLakeError is the last failed publish or catalog check.
func (s *Server) lastLakeError() error {
	s.lk.Lock()
	defer s.lk.Unlock()
	return s.lk.pubErr
}

func (s *Server) lakeFailed(err error) {
	s.lk.Lock()
	s.lk.pubErr, s.lk.pubErrAt = err, time.Now().UTC()
	s.lk.Unlock()
	s.log.Error("publish to the lake failed", "err", err)
}

// lakeHealth checks the catalog (a namespace lookup, bounded by
// lakeCheckTimeout) and reports it with the last failed publish.
func (s *Server) lakeHealth() *LakeHealth {
	l := s.opts.Lake
	if l == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, lakeCheckTimeout)
	defer cancel()
	h := &LakeHealth{Catalog: CatalogReachable}
	if _, err := l.Catalog().CheckNamespaceExists(ctx, catalog.ToIdentifier(lake.Namespace)); err != nil {
		h.Catalog, h.Error = CatalogUnreachable, s.scrub(err.Error())
	}
	s.lk.Lock()
	if s.lk.pubErr != nil {
		at := s.lk.pubErrAt
		h.LastPublishError, h.LastPublishAt = s.scrub(s.lk.pubErr.Error()), &at
	}
	s.lk.Unlock()
	return h
}

// vintageHealth is the vintage dataset serves (nil if unknown).
func (s *Server) vintageHealth(dataset string) *VintageHealth {
	s.lk.Lock()
	defer s.lk.Unlock()
	v, ok := s.lk.vintages[dataset]
	why := s.lk.refused[dataset]
	if !ok && why == "" {
		return nil
	}
	return &VintageHealth{Snapshot: v.Snapshot, IcebergSnapshot: v.IcebergSnapshot, CommittedAt: v.CommittedAt, Refused: why}
}

// lakeHead is a table's head and the vintage to serve (the head, or the
// newest serving vintage below another engine's head), read once at New.
type lakeHead struct {
	head, cur lake.Vintage
	err       error // of reading them; ErrNoDataset: no table
}

// startLake gives the store's options the lake's hooks and starts
// reading every table's head (readLakeHeads) while the store opens: the
// store maps each dataset's recorded vintage (lake.ReadServed) without
// the catalog, and waits for the heads only for a dataset it has no
// matching record of. It returns the wait for the heads (nil: the catalog
// did not answer).
func (s *Server) startLake(lo *localcache.Options) func() map[string]lakeHead {
	var (
		once  sync.Once
		heads map[string]lakeHead
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		heads = s.readLakeHeads()
	}()
	wait := func() map[string]lakeHead {
		once.Do(func() { <-done })
		return heads
	}
	l := s.opts.Lake
	home := s.opts.Home
	fromLake := snapshotOpener(s.ctx, home, func() (*lake.Lake, func(), error) { return l, func() {}, nil }, s.knownVintage, s.log,
		func(dataset string, si *lake.ServingIndex) {
			if err := lake.WriteServed(home, dataset, si); err != nil {
				s.log.Warn("record the served vintage (the next start asks the catalog for it)", "dataset", dataset, "err", err)
			}
		})
	lo.Publish = s.publishToLake
	lo.CookPublish = s.cookToLake
	lo.OpenSnapshot = func(dataset, id string) (*snapshot.Snapshot, error) {
		if si, err := lake.ReadServed(home, dataset); err == nil && si.Vintage.Snapshot == id {
			snap, err := l.OpenServing(dataset, si, snapshot.Options{Warm: s.opts.WarmSnapshots, HugeIndex: !s.opts.MappedIndex})
			if err == nil {
				s.lk.Lock()
				if _, ok := s.lk.vintages[dataset]; !ok {
					s.lk.vintages[dataset] = si.Vintage
				}
				s.lk.Unlock()
				return snap, nil
			}
			s.log.Warn("the recorded vintage did not open; asking the catalog", "dataset", dataset, "snapshot", id, "err", err)
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("served-vintage record unreadable; asking the catalog", "dataset", dataset, "err", err)
		}
		wait() // knownVintage answers from the heads
		return fromLake(dataset, id)
	}
	return wait
}

// readLakeHeads reads every table's head once, at New: the store's
// opener (knownVintage) then maps the vintage to serve without asking
// the catalog again, and reconcileLake decides from the same read. A
// catalog that does not answer is recorded (lakeFailed) and gives nil:
// the home serves what it holds.
func (s *Server) readLakeHeads() map[string]lakeHead {
	l := s.opts.Lake
	// A catalog that does not answer at all (packets dropped) must not
	// hold the start: past lakeStartWait the home serves its recorded
	// vintages, as when the catalog refuses.
	cctx, cancel := context.WithTimeout(s.ctx, lakeStartWait)
	cat, err := l.CatalogContext(cctx)
	cancel()
	if err != nil {
		s.lakeFailed(fmt.Errorf("open the lake's catalog: %w", err))
		return nil
	}
	heads := map[string]lakeHead{}
	for id, err := range cat.ListTables(s.ctx, catalog.ToIdentifier(lake.Namespace)) {
		if err != nil {
			s.lakeFailed(fmt.Errorf("list the lake's tables: %w", err))
			return nil
		}
		n := catalog.TableNameFromIdent(id)
		if format.ValidDatasetName(n) != nil {
			continue
		}
		var h lakeHead
		h.head, h.err = l.Head(s.ctx, n)
		h.cur = h.head
		if h.err == nil && !h.head.Serving {
			h.cur, h.err = l.Current(s.ctx, n)
		}
		heads[n] = h
		if h.err == nil {
			s.lk.Lock()
			s.lk.vintages[n] = h.cur
			s.lk.Unlock()
		}
	}
	return heads
}

// reconcileLake makes the home serve what the lake says, dataset by
// dataset (see the top of this file), from the heads read at New. A
// catalog that does not answer leaves the home serving what it has: it is
// logged and /healthz says so.
func (s *Server) reconcileLake(heads map[string]lakeHead) {
	if heads == nil {
		s.log.Error("the lake's catalog did not answer at start: the datasets serve the vintages the home recorded; publishes fail until it answers", "err", s.lastLakeError())
		return
	}
	names := map[string]bool{}
	for _, n := range s.store.DatasetNames() {
		names[n] = true
	}
	for n := range heads {
		names[n] = true
	}
	for n := range names {
		h, ok := heads[n]
		if !ok {
			h.err = lake.ErrNoDataset
		}
		if err := s.reconcileDataset(n, h); err != nil {
			s.log.Error("dataset not reconciled with the lake; it serves what the home holds", "dataset", n, "err", err)
			if !errors.Is(err, lake.ErrNoServingIndex) {
				s.lakeFailed(fmt.Errorf("reconcile %s: %w", n, err))
			}
		}
	}
}

// reconcileDataset reconciles one dataset with its table's head h.
func (s *Server) reconcileDataset(name string, h lakeHead) error {
	head, cur, err := h.head, h.cur, h.err
	if errors.Is(err, lake.ErrNoDataset) || errors.Is(err, lake.ErrUnknownVintage) {
		return s.migrateToLake(name)
	}
	if !head.Serving && head.IcebergSnapshot != 0 {
		why := fmt.Sprintf("the head of table %s.%s (iceberg snapshot %d) was written by another engine and has no energyscope serving index; it is not served. Cook it from the table's rows with 'es cook --home HOME --from-lake --dataset %s'",
			lake.Namespace, name, head.IcebergSnapshot, name)
		s.log.Error("lake head refused", "dataset", name, "table", lake.Namespace+"."+name, "iceberg_snapshot", head.IcebergSnapshot, "hint", "es cook --from-lake --dataset "+name)
		s.lk.Lock()
		s.lk.refused[name] = why
		s.lk.Unlock()
	}
	if err != nil {
		return err // e.g. no vintage of the history has a serving index: serve the home's
	}
	_, id, _, serr := s.store.State(name)
	if serr == nil && id == cur.Snapshot {
		s.lk.Lock()
		s.lk.vintages[name] = cur
		s.lk.Unlock()
		return nil
	}
	s.log.Info("the lake holds another vintage than the home serves; installing the lake's", "dataset", name, "home", id, "lake", cur.Snapshot, "epoch", cur.Epoch)
	return s.installFromLake(name, cur)
}

// migrateToLake publishes the snapshot a dataset serves to a lake that
// has no table for it: once, when a home from before the lake (or a cook
// without the lake) first starts with it.
func (s *Server) migrateToLake(name string) error {
	st, err := s.store.Status()
	if err != nil {
		return err
	}
	for _, d := range st {
		if d.Name != name || d.Health != localcache.Healthy {
			continue
		}
		s.log.Info("migrating the dataset into the lake: publishing the snapshot it serves (once)", "dataset", name, "snapshot", d.Manifest.SnapshotID)
		v, err := s.opts.Lake.Publish(s.ctx, name, d.Dir)
		if err != nil {
			return fmt.Errorf("migrate %s into the lake: %w", name, err)
		}
		s.lk.Lock()
		s.lk.vintages[name] = v
		s.lk.Unlock()
		// From now on it serves from the lake: the home's copy goes.
		if err := s.store.Remap(name); err != nil {
			return fmt.Errorf("migrate %s into the lake: serve it from the lake: %w", name, err)
		}
		return nil
	}
	return nil // not served here (damaged, or neither side has it)
}

// installFromLake puts vintage v of dataset name in service as the lake
// has it (its epoch and covers), without publishing it again, and
// announces it: companions follow.
func (s *Server) installFromLake(name string, v lake.Vintage) error {
	unlock := s.lockName(name)
	defer unlock()
	d, unlockD := s.lockOpen(name)
	defer unlockD()
	tmp, err := s.newUploadDir()
	if err != nil {
		return err
	}
	defer s.removeUploadDir(tmp)
	dir := filepath.Join(tmp, "snap")
	oldEpoch, _, _, _ := s.store.State(name)
	if _, err := s.opts.Lake.Extract(s.ctx, name, v, dir); err != nil {
		return err
	}
	s.lk.Lock()
	s.lk.installing[name] = v.Snapshot
	s.lk.Unlock()
	if d != nil {
		d.applyMu.Lock() // the follower waits (reapplyAboveLocked below)
	}
	m, err := s.store.Install(name, dir)
	if d != nil {
		if e, _, _, serr := s.store.State(name); err == nil && serr == nil && e != oldEpoch {
			s.reapplyAboveLocked(d, m.CoversThroughSeq)
		}
		d.applyMu.Unlock()
	}
	s.lk.Lock()
	delete(s.lk.installing, name)
	s.lk.Unlock()
	if err != nil {
		return err
	}
	if d == nil {
		if d, err = s.openInstalled(name); err != nil {
			return err
		}
		defer d.mu.Unlock()
	}
	// As after a PUT: no catch-up crosses the installed snapshot (records
	// at or below its covers are in it; a new epoch's subscribers start
	// from it, so none of the old epoch's records is served).
	forget := m.CoversThroughSeq
	change := hub.Compacted
	if e, _, seq, err := s.store.State(name); err == nil && e != oldEpoch {
		forget = max(forget, seq)
		change = hub.Replaced
	}
	s.resetHistoryLocked(d, forget)
	s.refreshFilesLocked(d)
	s.lk.Lock()
	s.lk.vintages[name] = v
	s.lk.Unlock()
	s.hub.Announce(name, m, change)
	return nil
}

// SnapshotOpener is the store's OpenSnapshot hook for a home served from
// a lake (localcache.Options.OpenSnapshot): snapshot id of a dataset is
// mapped in place out of the lake's vintage with that es snapshot id; if
// the lake has no such vintage (not published yet: a home from before the
// lake, or its first open before the migration) or cannot be reached, the
// snapshot's directory in the home is opened when it is there. open
// gives the lake and a release (the es command opens it per call; the
// server passes its own). known, when set, answers the vintage of an id
// without asking the catalog.
func SnapshotOpener(ctx context.Context, home string, open func() (*lake.Lake, func(), error), known func(dataset, id string) (lake.Vintage, bool),
	log *slog.Logger) func(dataset, id string) (*snapshot.Snapshot, error) {
	return snapshotOpener(ctx, home, open, known, log, nil)
}

// snapshotOpener is SnapshotOpener; opened, when set, is told where each
// vintage it mapped out of the lake lies.
func snapshotOpener(ctx context.Context, home string, open func() (*lake.Lake, func(), error), known func(dataset, id string) (lake.Vintage, bool),
	log *slog.Logger, opened func(dataset string, si *lake.ServingIndex)) func(dataset, id string) (*snapshot.Snapshot, error) {
	return func(dataset, id string) (*snapshot.Snapshot, error) {
		dir := filepath.Join(home, localcache.DatasetsDir, dataset, format.SnapshotsDir, id)
		var lerr error
		if l, release, err := open(); err != nil {
			lerr = err
		} else {
			v, ok := lake.Vintage{}, false
			if known != nil {
				v, ok = known(dataset, id)
			}
			if !ok {
				if v, err = l.Resolve(ctx, dataset, id); err == nil && v.Snapshot == id {
					ok = true
				} else if err != nil && !errors.Is(err, lake.ErrNoDataset) && !errors.Is(err, lake.ErrUnknownVintage) {
					lerr = err
				}
			}
			if ok {
				snap, si, err := l.OpenSnapshotIndex(ctx, dataset, v, snapshot.Options{})
				release()
				if err == nil {
					if opened != nil {
						opened(dataset, si)
					}
					return snap, nil
				}
				lerr = err
			} else {
				release()
			}
		}
		snap, err := snapshot.Open(dir)
		if err != nil && lerr != nil {
			return nil, fmt.Errorf("snapshot %s of %s: not in the lake (%w) nor in the home (%w)", id, dataset, lerr, err)
		}
		if err == nil && lerr != nil {
			log.Warn("the lake did not open the snapshot; serving its copy in the home", "dataset", dataset, "snapshot", id, "err", lerr)
		}
		return snap, err
	}
}

// knownVintage is the vintage dataset serves or is installing, if its es
// snapshot id is id (no catalog round trip).
func (s *Server) knownVintage(dataset, id string) (lake.Vintage, bool) {
	s.lk.Lock()
	defer s.lk.Unlock()
	if v, ok := s.lk.vintages[dataset]; ok && v.Snapshot == id {
		return v, true
	}
	return lake.Vintage{}, false
}
