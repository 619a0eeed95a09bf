package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/sync/protocol"
)

// Vintages (protocol version 3, issue 12): the companion asks the server
// which vintage a WHEN names, downloads that vintage's files with the same
// verified, resumable fetch as a snapshot (into a directory the caller
// gives, not into the store), and asks for the revisions of one period.
// A request goes out on the connection of the moment and is answered on
// it; a connection that ends fails its requests with ErrOffline.

// Errors of Vintage and Revisions (errors.Is).
var (
	// ErrOffline: no connection to the server is up (or it ended before
	// the answer came).
	ErrOffline = errors.New("not connected to the server")
	// ErrNoVintages: the server speaks a protocol version without vintages
	// (VersionError says which).
	ErrNoVintages = errors.New("the server does not keep vintages")
)

// VersionError: the server chose protocol Version, which has no vintage
// messages. It is ErrNoVintages.
type VersionError struct{ Version int }

func (e *VersionError) Error() string {
	return fmt.Sprintf("%v (protocol %d)", ErrNoVintages, e.Version)
}

func (e *VersionError) Is(target error) bool { return target == ErrNoVintages }

// RequestError is the server's error answering a vintage or revisions
// request: Code is one of protocol.ErrorUnknownVintage,
// ErrorBeforeFirstVintage, ErrorNoLake, ErrorUnknownDataset,
// ErrorUnknownSeries (or empty), Reason the server's words.
type RequestError struct {
	Code   protocol.Code
	Reason string
}

func (e *RequestError) Error() string {
	if e.Code == "" {
		return "server: " + e.Reason
	}
	return fmt.Sprintf("server: %s: %s", e.Code, e.Reason)
}

// VintageResult is a resolved vintage: its description and manifest;
// Fetched is true when its files were downloaded (and committed through
// the stage the caller gave) by this request.
type VintageResult struct {
	Info     protocol.VintageInfo
	Manifest *format.Manifest
	Fetched  bool
}

// StageFunc says where a resolved vintage's files go: a Stage to download
// them into (the same verified, resumable path as a snapshot's; its
// Commit keeps them where the caller wants, not in the sink), or nil when
// the caller holds the vintage already. It runs on the engine's goroutine
// and must not block.
type StageFunc func(info protocol.VintageInfo, m *format.Manifest) (Stage, error)

// vintageState is the engine's side of the requests: the session that can
// carry them and the requests waiting for an answer.
type vintageState struct {
	mu      sync.Mutex // guards the fields below
	next    uint64     // the last request id given
	cur     *session   // the welcomed session, or nil
	version int        // the protocol version cur negotiated
	heads   map[string]string
	pending map[uint64]*request
}

// request is one vintage or revisions request in flight.
type request struct {
	msg   *protocol.Message
	stage StageFunc
	done  chan struct{}
	once  sync.Once

	// Set before done closes.
	res  VintageResult
	revs []protocol.Revision
	err  error
}

func (r *request) finish(res VintageResult, revs []protocol.Revision, err error) {
	r.once.Do(func() {
		r.res, r.revs, r.err = res, revs, err
		close(r.done)
	})
}

// welcomed makes s the session that carries requests.
func (v *vintageState) welcomed(s *session, version int, heads []protocol.Head) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.cur, v.version = s, version
	v.setHeadsLocked(heads)
}

func (v *vintageState) setHeads(heads []protocol.Head) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.setHeadsLocked(heads)
}

func (v *vintageState) setHeadsLocked(heads []protocol.Head) {
	if v.heads == nil {
		v.heads = map[string]string{}
	}
	for _, h := range heads {
		v.heads[h.Dataset] = h.Snapshot
	}
}

// ended fails the requests of s, whose connection is gone.
func (v *vintageState) ended(s *session) {
	v.mu.Lock()
	if v.cur != s {
		v.mu.Unlock()
		return
	}
	v.cur = nil
	reqs := v.pending
	v.pending = nil
	v.mu.Unlock()
	for _, r := range reqs {
		r.finish(VintageResult{}, nil, fmt.Errorf("%w: the connection ended before the answer", ErrOffline))
	}
}

// take removes and returns the request an answer names.
func (v *vintageState) take(req uint64) *request {
	v.mu.Lock()
	defer v.mu.Unlock()
	r := v.pending[req]
	delete(v.pending, req)
	return r
}

// HeadSnapshot is the snapshot the server last said is current for
// dataset (its welcome or a heartbeat), and whether it said anything.
func (e *Engine) HeadSnapshot(dataset string) (string, bool) {
	e.vint.mu.Lock()
	defer e.vint.mu.Unlock()
	id, ok := e.vint.heads[dataset]
	return id, ok
}

// do sends m with a fresh request id on the current connection and waits
// for its answer.
func (e *Engine) do(ctx context.Context, m *protocol.Message, stage StageFunc) (*request, error) {
	v := &e.vint
	v.mu.Lock()
	s := v.cur
	switch {
	case s == nil:
		v.mu.Unlock()
		return nil, ErrOffline
	case v.version < protocol.VersionVintages:
		ver := v.version
		v.mu.Unlock()
		return nil, &VersionError{Version: ver}
	}
	v.next++
	m.Req = v.next
	r := &request{msg: m, stage: stage, done: make(chan struct{})}
	if v.pending == nil {
		v.pending = map[uint64]*request{}
	}
	v.pending[m.Req] = r
	v.mu.Unlock()
	if err := s.w.SendWait(websocket.TextMessage, m.Encode(), nil, s.done); err != nil {
		v.take(m.Req)
		return nil, fmt.Errorf("%w: %v", ErrOffline, err)
	}
	select {
	case <-r.done:
		return r, r.err
	case <-ctx.Done():
		v.take(m.Req)
		return nil, ctx.Err()
	}
}

// Vintage asks the server which vintage asof (an RFC 3339 time, a date,
// an es snapshot id, an Iceberg snapshot id or a tag) names in dataset,
// and downloads its files into the stage stage gives (if any), verified
// per 4 MiB chunk and per file by SHA-256 like a snapshot download, then
// commits the stage. Errors: ErrOffline, ErrNoVintages (a *VersionError),
// a *RequestError (the server's answer), ctx's error, or the download's
// failure.
func (e *Engine) Vintage(ctx context.Context, dataset, asof string, stage StageFunc) (VintageResult, error) {
	if err := format.ValidDatasetName(dataset); err != nil {
		return VintageResult{}, err
	}
	if asof == "" || len(asof) > protocol.MaxAsOf {
		return VintageResult{}, fmt.Errorf("asof %q: want 1 to %d bytes", asof, protocol.MaxAsOf)
	}
	r, err := e.do(ctx, &protocol.Message{Type: protocol.TVintage, Dataset: dataset, AsOf: asof}, stage)
	if err != nil {
		return VintageResult{}, err
	}
	return r.res, nil
}

// Revisions asks the server for every value period (a date, or an RFC
// 3339 time for an intraday dataset) of series had across the retained
// vintages of dataset, oldest first. Errors as Vintage's.
func (e *Engine) Revisions(ctx context.Context, dataset, series, period string) ([]protocol.Revision, error) {
	if err := format.ValidDatasetName(dataset); err != nil {
		return nil, err
	}
	if series == "" || len(series) > protocol.MaxAsOf || period == "" || len(period) > protocol.MaxAsOf {
		return nil, fmt.Errorf("series %q, period %q: want 1 to %d bytes each", series, period, protocol.MaxAsOf)
	}
	r, err := e.do(ctx, &protocol.Message{Type: protocol.TRevisions, Dataset: dataset, Series: series, Period: period}, nil)
	if err != nil {
		return nil, err
	}
	return r.revs, nil
}

// vintageDownload is a download of a vintage's files, and the requests
// waiting for it (several WHENs may name one vintage).
type vintageDownload struct {
	info    protocol.VintageInfo
	waiters []*request
}

func vintageKey(id string) string { return "vintage/" + id } // no dataset name has a '/'

// onRequestAnswer handles a vintage, revisions or error message that
// answers request m.Req (session goroutine).
func (s *session) onRequestAnswer(m *protocol.Message) {
	r := s.e.vint.take(m.Req)
	if r == nil {
		return // its caller gave up (or a stale id): nothing waits for it
	}
	switch {
	case m.Type == protocol.TError:
		r.finish(VintageResult{}, nil, &RequestError{Code: m.Code, Reason: m.Reason})
	case m.Type == protocol.TRevisions && r.msg.Type == protocol.TRevisions:
		r.finish(VintageResult{}, m.Revisions, nil)
	case m.Type == protocol.TVintage && r.msg.Type == protocol.TVintage && m.Vintage != nil && m.Manifest != nil &&
		m.Dataset == r.msg.Dataset && m.Manifest.Dataset == m.Dataset:
		s.startVintage(r, *m.Vintage, m.Manifest)
	default:
		r.finish(VintageResult{}, nil, fmt.Errorf("server answered %s request %d with %s", r.msg.Type, m.Req, m.Type))
	}
}

// startVintage asks the caller where the vintage goes and downloads it
// there.
func (s *session) startVintage(r *request, info protocol.VintageInfo, man *format.Manifest) {
	res := VintageResult{Info: info, Manifest: man}
	key := vintageKey(man.SnapshotID)
	if d := s.dl[key]; d != nil {
		d.vintage.waiters = append(d.vintage.waiters, r) // another WHEN named it: one download
		return
	}
	var st Stage
	if r.stage != nil {
		var err error
		if st, err = r.stage(info, man); err != nil {
			r.finish(res, nil, err)
			return
		}
	}
	if st == nil {
		r.finish(res, nil, nil)
		return
	}
	d := &download{man: man, st: st, acct: &dlAcct{start: time.Now(), sessions: 1},
		vintage: &vintageDownload{info: info, waiters: []*request{r}}}
	s.dl[key] = d
	s.e.log.Info("downloading vintage", "dataset", man.Dataset, "snapshot", man.SnapshotID)
	if err := s.nextFile(d, d.st.Verify); err != nil {
		s.failVintage(key, d, err)
	}
}

// finishVintage commits a vintage whose files are all verified (through
// the caller's stage) and answers the requests waiting for it.
func (s *session) finishVintage(d *download) error {
	key := vintageKey(d.man.SnapshotID)
	delete(s.dl, key)
	s.progressed()
	if _, err := d.st.Commit(); err != nil {
		s.failVintage(key, d, err)
		return nil
	}
	s.e.log.Info("downloaded vintage", "dataset", d.man.Dataset, "snapshot", d.man.SnapshotID)
	res := VintageResult{Info: d.vintage.info, Manifest: d.man, Fetched: true}
	for _, r := range d.vintage.waiters {
		r.finish(res, nil, nil)
	}
	return nil
}

// failVintage ends a vintage download: its waiters get err; the
// connection goes on (a vintage is never what the client serves live).
// What the stage verified stays for a later request to resume from.
func (s *session) failVintage(key string, d *download, err error) {
	d.st.Close()
	delete(s.dl, key)
	s.progressed()
	s.e.log.Warn("vintage download failed", "snapshot", d.man.SnapshotID, "err", err)
	for _, r := range d.vintage.waiters {
		r.finish(VintageResult{}, nil, fmt.Errorf("download vintage %s: %w", d.man.SnapshotID, err))
	}
}

// vintageFetchFailed handles a fetch error of a vintage's file: it ends
// that download only, and reports whether the error was one.
func (s *session) vintageFetchFailed(m *protocol.Message) bool {
	for key, d := range s.dl {
		if fi, _, ok := d.current(); ok && d.vintage != nil && fi.SHA256 == m.SHA256 && d.man.Dataset == m.Dataset {
			s.failVintage(key, d, &RequestError{Code: m.Code, Reason: m.Reason})
			return true
		}
	}
	return false
}
