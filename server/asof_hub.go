package server

// The server's side of the sync protocol's version 3 (hub.Vintages):
// vintage and revisions requests and the fetch of a vintage's files,
// answered from the as-of reads of asof.go.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
	"github.com/energyscope/energyscope/server/hub"
	"github.com/energyscope/energyscope/server/lake"
	"github.com/energyscope/energyscope/sync/protocol"
)

var _ hub.Vintages = (*Server)(nil)

// requestError gives err the protocol code of a vintage or revisions
// request's failure.
func requestError(err error) error {
	code := protocol.Code("")
	switch {
	case errors.Is(err, ErrNoLake), errors.Is(err, ErrLakeUnavailable):
		code = protocol.ErrorNoLake
	case errors.Is(err, lake.ErrBeforeFirstVintage):
		code = protocol.ErrorBeforeFirstVintage
	case errors.Is(err, lake.ErrUnknownVintage), errors.Is(err, ErrBadWhen), errors.Is(err, lake.ErrNoServingIndex):
		code = protocol.ErrorUnknownVintage
	case errors.Is(err, lake.ErrNoDataset):
		code = protocol.ErrorUnknownDataset
	case errors.Is(err, localcache.ErrNotFound):
		code = protocol.ErrorUnknownSeries
	}
	return &hub.RequestError{Code: code, Err: err}
}

// VintageInfo is v as the protocol carries it.
func VintageInfo(v lake.Vintage) protocol.VintageInfo {
	return protocol.VintageInfo{Snapshot: v.Snapshot, IcebergSnapshot: v.IcebergSnapshot, CommittedAt: v.CommittedAt,
		CoversSeq: v.CoversSeq, Rows: v.Rows, Tags: v.Tags}
}

// Vintage implements hub.Vintages: the vintage asof names and its
// manifest (the vintage is opened, so that the fetches that follow find
// it mapped).
func (s *Server) Vintage(ctx context.Context, dataset, asof string) (protocol.VintageInfo, *format.Manifest, error) {
	a, err := s.asOf()
	if err != nil {
		return protocol.VintageInfo{}, nil, requestError(err)
	}
	v, err := a.Resolve(ctx, dataset, asof)
	if err != nil {
		return protocol.VintageInfo{}, nil, requestError(err)
	}
	snap, err := a.Acquire(ctx, dataset, v)
	if err != nil {
		return protocol.VintageInfo{}, nil, requestError(err)
	}
	defer snap.Unref()
	m := *snap.Manifest
	return VintageInfo(v), &m, nil
}

// Revisions implements hub.Vintages.
func (s *Server) Revisions(ctx context.Context, dataset, series, period string) ([]protocol.Revision, error) {
	a, err := s.asOf()
	if err != nil {
		return nil, requestError(err)
	}
	p, err := ParsePeriod(period)
	if err != nil {
		return nil, requestError(err)
	}
	revs, err := a.Revisions(ctx, dataset, series, p)
	if err != nil {
		return nil, requestError(err)
	}
	out := make([]protocol.Revision, len(revs))
	for i, r := range revs {
		out[i] = protocol.Revision{Vintage: VintageInfo(r.Vintage), Value: r.Value, Present: r.Present}
	}
	return out, nil
}

// OpenVintageFile implements hub.Vintages: the file whose SHA-256 is sha
// of the vintage whose es id is snapshotID, read from its mapping (held
// until Close) under a fault guard.
func (s *Server) OpenVintageFile(ctx context.Context, dataset, snapshotID, sha string) (hub.ReadAtCloser, error) {
	a, err := s.asOf()
	if err != nil {
		return nil, err
	}
	v, err := a.Resolve(ctx, dataset, snapshotID)
	if err != nil {
		return nil, err
	}
	if v.Snapshot != snapshotID {
		return nil, fmt.Errorf("%w: %s is not an es snapshot id", lake.ErrUnknownVintage, snapshotID)
	}
	snap, err := a.Acquire(ctx, dataset, v)
	if err != nil {
		return nil, err
	}
	for _, f := range snap.Manifest.Files {
		if f.SHA256 != sha {
			continue
		}
		r, _, err := snap.OpenFile(f.Name)
		if err != nil {
			snap.Unref()
			return nil, err
		}
		return &vintageFile{r: r, snap: snap}, nil
	}
	snap.Unref()
	return nil, fmt.Errorf("vintage %s of %s has no file with SHA-256 %s: %w", snapshotID, dataset, sha, os.ErrNotExist)
}

// vintageFile is one file of an opened vintage; Close lets go of it.
type vintageFile struct {
	r    io.ReaderAt
	snap *snapshot.Snapshot
	once sync.Once
}

func (f *vintageFile) ReadAt(p []byte, off int64) (n int, err error) {
	defer guardFault(debug.SetPanicOnFault(true), &err, nil)
	return f.r.ReadAt(p, off)
}

func (f *vintageFile) Close() error {
	f.once.Do(f.snap.Unref)
	return nil
}
