package server

// Vintages on a lake-backed server (issue 12): the as-of reads of
// asof.go behind the HTTP routes, rollback as a new epoch, tags and
// retention.
//
//	GET  /v1/datasets/{name}/vintages        every retained vintage, oldest first
//	GET  /v1/series/{id}?asof=WHEN           the series as vintage WHEN had it
//	GET  /v1/series/{id}/revisions?period=P  every value P had across vintages
//	POST /v1/datasets/{name}/rollback?to=V   make vintage V current again (a new epoch)
//	POST /v1/datasets/{name}/tags            {"vintage": V, "name": T}: keep V forever as T

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
	"github.com/energyscope/energyscope/server/lake"
)

// vintageState is the server's as-of side, opened on first use.
type vintageState struct {
	once sync.Once
	a    *AsOf
	err  error

	// expiring: datasets with a retention pass running (expirePass).
	emu      sync.Mutex
	expiring map[string]expiring
	// beforeExpire, when set (tests), runs in a background retention pass
	// before it asks the lake, with the pass's context (a catalog that
	// hangs).
	beforeExpire func(context.Context)
}

// asOf returns the server's as-of reads; ErrNoLake without a lake.
func (s *Server) asOf() (*AsOf, error) {
	if s.opts.Lake == nil {
		return nil, ErrNoLake
	}
	s.vint.once.Do(func() {
		s.vint.a, s.vint.err = NewAsOf(s.opts.Lake, AsOfOptions{
			Current: func(dataset string) string {
				if h, _, ok := s.Head(dataset); ok {
					return h.Snapshot
				}
				return ""
			},
		})
	})
	return s.vint.a, s.vint.err
}

// closeVintages lets go of the opened vintages (Close).
func (s *Server) closeVintages() {
	if s.vint.a != nil {
		s.vint.a.Close()
	}
}

// asofStatus maps an error of a vintage request to its HTTP status: 400 a
// bad WHEN or period, 404 an unknown dataset, vintage or series, or a time
// before the first vintage, 409 a vintage without a serving index, 503
// no lake or a lake that cannot be reached.
func asofStatus(err error) int {
	switch {
	case errors.Is(err, ErrBadWhen), errors.Is(err, lake.ErrBadTag):
		return http.StatusBadRequest
	case errors.Is(err, lake.ErrUnknownVintage), errors.Is(err, lake.ErrBeforeFirstVintage), errors.Is(err, lake.ErrNoDataset):
		return http.StatusNotFound
	case errors.Is(err, lake.ErrNoServingIndex):
		return http.StatusConflict
	case errors.Is(err, ErrNoLake), errors.Is(err, ErrLakeUnavailable):
		return http.StatusServiceUnavailable
	}
	return statusOf(err)
}

func (s *Server) failAsOf(w http.ResponseWriter, r *http.Request, err error) {
	if code := asofStatus(err); code != http.StatusInternalServerError {
		httpError(w, code, err.Error())
		return
	}
	s.fail(w, r, err)
}

// seriesDataset finds the dataset of a series reference ("id" or
// "dataset:id"): the dataset serving it now, or the one named (a series
// only older vintages have must be named with its dataset).
func (s *Server) seriesDataset(ref string) (dataset, id string, err error) {
	in, err := s.store.Info(ref)
	if err == nil {
		return in.Dataset, in.ID, nil
	}
	if !errors.Is(err, localcache.ErrNotFound) {
		return "", "", err
	}
	if i := strings.IndexByte(ref, ':'); i > 0 && format.ValidDatasetName(ref[:i]) == nil {
		return ref[:i], ref[i+1:], nil
	}
	return "", "", fmt.Errorf("%w (for a series only older vintages have, name its dataset: DATASET:%s)", err, ref)
}

// ViewAsOf calls fn with the points of series ref in [from, to] as the
// vintage WHEN names had them, and that vintage. The points are valid
// only during fn.
func (s *Server) ViewAsOf(ctx context.Context, ref, when string, from, to int64, fn func(lake.Vintage, localcache.Result) error) error {
	a, err := s.asOf()
	if err != nil {
		return err
	}
	if err := checkWhen(when); err != nil {
		return err
	}
	dataset, id, err := s.seriesDataset(ref)
	if err != nil {
		return err
	}
	v, err := a.Resolve(ctx, dataset, when)
	if err != nil {
		return err
	}
	return a.View(ctx, dataset, v, id, from, to, func(res localcache.Result) error { return fn(v, res) })
}

// handleSeriesAsOf is GET /v1/series/{id}?asof=WHEN: the answer of
// handleSeries as the vintage had it. JSON carries "vintage"; CSV and
// Arrow say it in the ES-Vintage header (its es snapshot id) and
// ES-Vintage-Committed-At.
func (s *Server) handleSeriesAsOf(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id := r.PathValue("id")
	from, err := parseTimeParam(q.Get("from"), false)
	if err != nil {
		httpError(w, http.StatusBadRequest, "from: "+err.Error())
		return
	}
	to, err := parseTimeParam(q.Get("to"), true)
	if err != nil {
		httpError(w, http.StatusBadRequest, "to: "+err.Error())
		return
	}
	var body bytes.Buffer
	var ctype string
	var vin lake.Vintage
	accept := r.Header.Get("Accept")
	err = s.ViewAsOf(r.Context(), id, q.Get("asof"), from, to, func(v lake.Vintage, res localcache.Result) error {
		vin = v
		if strings.Contains(accept, "application/json") && !strings.Contains(accept, "application/vnd.apache.arrow.stream") {
			ctype = encodeSeriesJSONAsOf(&body, id, res, v)
			return nil
		}
		ctype = encodeSeries(&body, id, res, accept)
		return nil
	})
	if err != nil {
		s.failAsOf(w, r, err)
		return
	}
	s.m.lookups.Inc()
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("ES-Vintage", vin.Snapshot)
	w.Header().Set("ES-Vintage-Committed-At", vin.CommittedAt.Format(time.RFC3339Nano))
	w.Write(body.Bytes())
}

// encodeSeriesJSONAsOf is encodeSeries' JSON plus the vintage.
func encodeSeriesJSONAsOf(buf *bytes.Buffer, id string, res localcache.Result, v lake.Vintage) string {
	m := seriesJSON(id, res)
	m["vintage"] = v
	json.NewEncoder(buf).Encode(m)
	return "application/json"
}

// handleVintages is GET /v1/datasets/{name}/vintages: a JSON array of
// lake.Vintage, oldest first, read from the catalog.
func (s *Server) handleVintages(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if s.opts.Lake == nil {
		s.failAsOf(w, r, ErrNoLake)
		return
	}
	vs, err := s.opts.Lake.Vintages(r.Context(), name)
	if err != nil {
		s.failAsOf(w, r, lakeErr(err))
		return
	}
	if vs == nil {
		vs = []lake.Vintage{}
	}
	writeJSON(w, vs)
}

// RevisionsAnswer is the JSON of GET /v1/series/{id}/revisions.
type RevisionsAnswer struct {
	Series    string     `json:"series"`
	Dataset   string     `json:"dataset"`
	Period    string     `json:"period"`
	Revisions []Revision `json:"revisions"`
}

// SeriesRevisions lists every value period (a date or an RFC 3339 time) of
// series ref had across the retained vintages of its dataset, oldest
// first.
func (s *Server) SeriesRevisions(ctx context.Context, ref, period string) (*RevisionsAnswer, error) {
	a, err := s.asOf()
	if err != nil {
		return nil, err
	}
	p, err := ParsePeriod(period)
	if err != nil {
		return nil, err
	}
	dataset, id, err := s.seriesDataset(ref)
	if err != nil {
		return nil, err
	}
	revs, err := a.Revisions(ctx, dataset, id, p)
	if err != nil {
		return nil, err
	}
	return &RevisionsAnswer{Series: id, Dataset: dataset, Period: period, Revisions: revs}, nil
}

// handleRevisions is GET /v1/series/{id}/revisions?period=P.
func (s *Server) handleRevisions(w http.ResponseWriter, r *http.Request) {
	ans, err := s.SeriesRevisions(r.Context(), r.PathValue("id"), r.URL.Query().Get("period"))
	if err != nil {
		s.failAsOf(w, r, err)
		return
	}
	writeJSON(w, ans)
}

// RollbackResult says what a rollback did.
type RollbackResult struct {
	// From is the vintage made current again; Manifest the snapshot now
	// serving (its rows, a new epoch); Dropped the pending records the
	// new epoch dropped.
	From     lake.Vintage     `json:"from"`
	Manifest *format.Manifest `json:"manifest"`
	Dropped  uint64           `json:"dropped_records"`
}

// Rollback makes vintage to (a time, date, es snapshot id, tag or Iceberg
// id) of dataset name current again: its rows are installed as a NEW
// EPOCH, like a PUT of them, published to the lake as one commit whose
// summary marks it a rollback of v (lake.SummaryRollbackOf, shown by es
// vintages as rollback_of); subscribers follow it as any replacement (they re-download or rebase),
// and records applied since the dataset's snapshot that were not yet in
// a snapshot are dropped (the new epoch covers every seq so far). A
// vintage that was expired is lake.ErrUnknownVintage; nothing changes on
// any error.
func (s *Server) Rollback(ctx context.Context, name, to string) (*RollbackResult, error) {
	a, err := s.asOf()
	if err != nil {
		return nil, err
	}
	if err := format.ValidDatasetName(name); err != nil {
		return nil, badInput(err)
	}
	a.Invalidate(name)
	v, err := a.Resolve(ctx, name, to)
	if err != nil {
		if errors.Is(err, lake.ErrUnknownVintage) {
			err = fmt.Errorf("cannot roll back: %w", err)
		}
		return nil, err
	}
	snap, err := a.Acquire(ctx, name, v)
	if err != nil {
		return nil, err
	}
	defer snap.Unref()
	unlock := s.lockName(name)
	defer unlock()
	d, unlockD := s.lockOpen(name)
	defer unlockD()
	var dropped uint64
	if _, _, recs, err := s.store.Pending(name); err == nil {
		dropped = uint64(len(recs))
	}
	epoch, covers := s.nextEpoch(name)
	tmp, err := s.newUploadDir()
	if err != nil {
		return nil, err
	}
	defer s.removeUploadDir(tmp)
	dir := filepath.Join(tmp, "snap")
	m, err := copyVintage(snap, dir, format.WriteOptions{Dataset: name, Epoch: epoch, CoversThroughSeq: covers, Version: s.opts.FormatVersion})
	if err != nil {
		return nil, fmt.Errorf("rollback %s to %s: %w", name, v.Snapshot, err)
	}
	s.lk.Lock()
	s.lk.rollbackOf[name] = rollbackMark{snapshot: m.SnapshotID, of: v.IcebergSnapshot}
	s.lk.Unlock()
	release, err := s.installReplacement(name, d, dir, m, covers)
	s.lk.Lock()
	delete(s.lk.rollbackOf, name)
	s.lk.Unlock()
	if err != nil {
		return nil, err
	}
	defer release()
	a.Invalidate(name)
	s.log.Info("rolled back dataset", "dataset", name, "to", v.Snapshot, "iceberg_snapshot", v.IcebergSnapshot,
		"epoch", epoch, "snapshot", m.SnapshotID, "rows", m.Rows, "dropped_records", dropped)
	return &RollbackResult{From: v, Manifest: m, Dropped: dropped}, nil
}

// copyVintage writes the rows of snap as a new snapshot in dir (with o's
// epoch and covers).
func copyVintage(snap *snapshot.Snapshot, dir string, o format.WriteOptions) (*format.Manifest, error) {
	t, err := sortedOf(snap)
	if err != nil {
		return nil, err
	}
	m, _, err := format.WriteSorted(dir, t, o)
	return m, err
}

// sortedOf copies the rows of snap, in its order, reading its mappings
// under a fault guard.
func sortedOf(snap *snapshot.Snapshot) (t *format.SortedTable, err error) {
	defer guardFault(debug.SetPanicOnFault(true), &err, nil)
	t = format.NewSortedTable(snap.Manifest.PeriodType, snap.NumSeries(), int(snap.Manifest.Rows))
	for row := uint32(0); row < uint32(snap.NumSeries()); row++ {
		in := snap.Info(row)
		pts, err := snap.Get(row, snapshot.MinTime, snapshot.MaxTime)
		if err != nil {
			return nil, fmt.Errorf("read series %q: %w", in.ID, err)
		}
		t.AddSeries(format.SeriesMeta{ID: in.ID, Name: in.Name, Unit: in.Unit, Source: in.Source, Frequency: snap.Frequency(row), Tier: in.Tier})
		if pts.Secs != nil {
			t.AppendSecs(pts.Secs, pts.Values)
		} else {
			t.AppendDays(pts.Days, pts.Values)
		}
	}
	return t, nil
}

// handleRollback is POST /v1/datasets/{name}/rollback?to=V.
func (s *Server) handleRollback(w http.ResponseWriter, r *http.Request) {
	res, err := s.Rollback(r.Context(), r.PathValue("name"), r.URL.Query().Get("to"))
	if err != nil {
		s.failAsOf(w, r, err)
		return
	}
	writeJSON(w, res)
}

// TagRequest is the body of POST /v1/datasets/{name}/tags.
type TagRequest struct {
	Vintage string `json:"vintage"` // a WHEN: time, date, es snapshot id, tag or Iceberg id
	Name    string `json:"name"`
}

// Tag names the vintage WHEN names (lake.Tag: kept through expiry,
// resolvable by name). The vintage it tagged is returned.
func (s *Server) Tag(ctx context.Context, dataset, when, name string) (lake.Vintage, error) {
	a, err := s.asOf()
	if err != nil {
		return lake.Vintage{}, err
	}
	a.Invalidate(dataset)
	v, err := a.Resolve(ctx, dataset, when)
	if err != nil {
		return v, err
	}
	if err := s.opts.Lake.Tag(ctx, dataset, v, name); err != nil {
		return v, lakeErr(err)
	}
	a.Invalidate(dataset)
	v.Tags = append(v.Tags, name)
	s.log.Info("tagged vintage", "dataset", dataset, "snapshot", v.Snapshot, "iceberg_snapshot", v.IcebergSnapshot, "tag", name)
	return v, nil
}

// handleTag is POST /v1/datasets/{name}/tags with a TagRequest.
func (s *Server) handleTag(w http.ResponseWriter, r *http.Request) {
	var req TagRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		httpError(w, http.StatusBadRequest, "body: want {\"vintage\": WHEN, \"name\": TAG}: "+err.Error())
		return
	}
	v, err := s.Tag(r.Context(), r.PathValue("name"), req.Vintage, req.Name)
	if err != nil {
		s.failAsOf(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(v)
}

// ExpireVintages applies the retention (Options.KeepVintages,
// KeepVintageFor) to a dataset's table: lake.Expire keeps the newest
// KeepVintages, those younger than KeepVintageFor, tagged ones and the
// current one. No retention set: nothing to do.
func (s *Server) ExpireVintages(ctx context.Context, dataset string) (lake.ExpireResult, error) {
	if s.opts.Lake == nil {
		return lake.ExpireResult{}, ErrNoLake
	}
	if s.opts.KeepVintages <= 0 && s.opts.KeepVintageFor <= 0 {
		return lake.ExpireResult{}, nil
	}
	keep := s.opts.KeepVintages
	if keep <= 0 {
		keep = 1 // by age only: the current one is kept anyway
	}
	res, err := s.opts.Lake.Expire(ctx, dataset, keep, s.opts.KeepVintageFor)
	if a, aerr := s.asOf(); aerr == nil {
		a.Invalidate(dataset)
	}
	if err != nil {
		return res, lakeErr(err)
	}
	if len(res.Expired) > 0 || res.OrphansFound > 0 {
		s.log.Info("expired vintages", "dataset", dataset, "expired", len(res.Expired), "orphans", res.OrphansFound,
			"keep_vintages", s.opts.KeepVintages, "keep_for", s.opts.KeepVintageFor.String())
	}
	return res, nil
}

// expireAfterPublish runs ExpireVintages for dataset in the background
// after a publish: one pass at a time per dataset, and a publish during a
// pass has one more pass run after it (the publishes of a burst share
// it), so the last publish's vintages are always expired. Each pass is
// bounded by 5 minutes and by the server's context, which Close cancels.
func (s *Server) expireAfterPublish(dataset string) {
	if s.opts.Lake == nil || (s.opts.KeepVintages <= 0 && s.opts.KeepVintageFor <= 0) {
		return
	}
	s.vint.emu.Lock()
	if s.vint.expiring == nil {
		s.vint.expiring = map[string]expiring{}
	}
	if s.vint.expiring[dataset] != notExpiring {
		s.vint.expiring[dataset] = expireAgain
		s.vint.emu.Unlock()
		return
	}
	s.vint.expiring[dataset] = expireRunning
	s.vint.emu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for s.expirePass(dataset) {
		}
	}()
}

// expiring is the state of a dataset's retention passes.
type expiring uint8

const (
	notExpiring   expiring = iota
	expireRunning          // a pass runs
	expireAgain            // a pass runs, and a publish since asks for another
)

// expirePass is one retention pass of expireAfterPublish. It reports
// whether a publish during it asks for another (never once Close has
// cancelled the server's context).
func (s *Server) expirePass(dataset string) (again bool) {
	defer func() {
		s.vint.emu.Lock()
		if again = s.vint.expiring[dataset] == expireAgain && s.ctx.Err() == nil; again {
			s.vint.expiring[dataset] = expireRunning
		} else {
			delete(s.vint.expiring, dataset)
		}
		s.vint.emu.Unlock()
	}()
	// Bounded, and cancelled by Close: Close never waits on a catalog
	// that hangs.
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Minute)
	defer cancel()
	if s.vint.beforeExpire != nil {
		s.vint.beforeExpire(ctx)
	}
	res, err := s.ExpireVintages(ctx, dataset)
	if err != nil {
		s.log.Warn("expire vintages", "dataset", dataset, "err", err)
		return
	}
	if len(res.Expired) > 0 {
		// The log's floor may have risen (logFloor).
		if oldest, ok := s.retainedCovers(dataset); ok {
			s.trimLog(dataset, oldest)
		}
	}
	return
}
