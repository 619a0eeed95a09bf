// Package wiring adapts the serving store to the interfaces its consumers
// declare: Source is functions.Source, Sink is the sync client's
// client.Sink, Changes is the bridge's bridge.ChangeFeed. app/, cmd/es and
// internal/companion share these adapters (and tests of the client, the
// bridge and xlsx use them to run over a real store). It exists because
// localcache must not import its consumers and they must not import
// localcache (see ARCHITECTURE.md's import arrows), so no library package
// imports wiring.
package wiring

import (
	"errors"
	"fmt"
	"time"

	"github.com/energyscope/energyscope/functions"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	_ "github.com/energyscope/energyscope/localcache/format/tailwrite" // format.Write can write a cold tier (tail.parquet)
	"github.com/energyscope/energyscope/sync/client"
)

// Source serves the Excel functions from a store.
type Source struct{ Store *localcache.Store }

var _ functions.Source = Source{}

func notFound(err error) error {
	if errors.Is(err, localcache.ErrNotFound) {
		return fmt.Errorf("%w: %v", functions.ErrNotFound, err)
	}
	return err
}

// Info implements functions.Source.
func (s Source) Info(id string) (functions.SeriesInfo, error) {
	in, err := s.Store.Info(id)
	if err != nil {
		return functions.SeriesInfo{}, notFound(err)
	}
	return functions.SeriesInfo{
		ID: in.ID, Dataset: in.Dataset, Name: in.Name, Unit: in.Unit, Source: in.Source,
		Frequency: string(in.Frequency), First: in.First, Last: in.Last, Count: in.Count,
		LatestValue: in.LatestValue, Updated: time.Unix(in.Updated, 0).UTC(),
	}, nil
}

// Get implements functions.Source.
func (s Source) Get(id string, from, to int64) ([]int64, []float64, error) {
	p, v, err := s.Store.Copy(id, from, to)
	return p, v, notFound(err)
}

// Search implements functions.Source.
func (s Source) Search(query string, limit int) ([]functions.SeriesInfo, error) {
	hits, err := s.Store.Search(query, limit)
	if err != nil {
		return nil, err
	}
	out := make([]functions.SeriesInfo, len(hits))
	for i, h := range hits {
		out[i] = functions.SeriesInfo{ID: h.ID, Dataset: h.Dataset, Name: h.Name}
	}
	return out, nil
}

// Sink lets the sync engine write into a store. The store's Pending and
// Truncate are the sink's as they are; the methods below adapt the rest.
type Sink struct{ *localcache.Store }

var _ client.Sink = Sink{}

// State implements client.Sink.
func (s Sink) State(dataset string) (uint64, string, uint64, bool) {
	ep, id, seq, err := s.Store.State(dataset)
	return ep, id, seq, err == nil
}

// CompactThrough implements client.Sink: the store's
// CompactThroughVersion.
func (s Sink) CompactThrough(dataset string, seq uint64, version int) (*format.Manifest, error) {
	return s.Store.CompactThroughVersion(dataset, seq, version)
}

// Apply implements client.Sink.
func (s Sink) Apply(dataset string, recs []format.Record) error {
	_, err := s.Store.Apply(dataset, recs)
	return err
}

// Stage implements client.Sink.
func (s Sink) Stage(dataset string, m *format.Manifest) (client.Stage, error) {
	st, err := s.Store.Stage(dataset, m)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// Damaged implements client.Sink: only a dataset the store holds and
// reports damaged counts.
func (s Sink) Damaged(dataset string) error {
	if err := s.Store.Damaged(dataset); errors.Is(err, localcache.ErrDamaged) {
		return err
	}
	return nil
}

// Changes is the store's change notification as the bridge's ChangeFeed.
type Changes struct{ Store *localcache.Store }

// Subscribe implements bridge.ChangeFeed.
func (c Changes) Subscribe(fn func(dataset string, ids []string)) (cancel func()) {
	return c.Store.Watch(fn)
}
