// Package localcache is the serving store: the datasets of a home
// directory, each served from its current memory-mapped snapshot.
//
// A home holds datasets/<name>/ (see localcache/format for what is inside).
// Series ids are unique across the datasets of a home: a lookup without a
// dataset finds the series in whichever dataset has it; "dataset:series"
// names the dataset explicitly.
//
// Each dataset publishes its read state through an atomic pointer. A reader
// takes a reference on the state it loaded (TryRef); replacing the state
// never waits for readers, and the old snapshot is unmapped when its last
// reader lets go. Results that alias a mapping (Result.Points) are valid
// until Result.Release; everything else is copied.
//
// The store does not know about HTTP, Excel, sync or Wails; those wire it
// up through small interfaces they declare themselves.
package localcache

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// Sentinel errors.
var (
	// ErrNotFound: no dataset of the home has the series.
	ErrNotFound = format.ErrNotFound
	// ErrNoDataset: the named dataset does not exist.
	ErrNoDataset = errors.New("dataset not found")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store closed")
)

// DatasetsDir is the directory of a home that holds the datasets.
const DatasetsDir = "datasets"

// Options for Open. A nil *Options means defaults.
type Options struct {
	// Logger receives warnings (swept temp files, skipped datasets). Nil
	// discards.
	Logger *slog.Logger
	// ReadOnly opens without sweeping or writing anything, for processes
	// that read a home another process maintains.
	ReadOnly bool
}

func (o *Options) withDefaults() Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return out
}

// Store serves the datasets of one home directory.
type Store struct {
	home string
	opts Options

	mu       sync.RWMutex // guards datasets, names, closed
	datasets map[string]*Dataset
	names    []string // sorted keys of datasets
	closed   bool
}

// Dataset is one dataset of a store.
type Dataset struct {
	name string
	dir  string
	cur  atomic.Pointer[snapshot.Snapshot] // the snapshot in service; holds one reference
}

// Name is the dataset's name.
func (d *Dataset) Name() string { return d.name }

// Dir is the dataset's directory.
func (d *Dataset) Dir() string { return d.dir }

// acquire returns the current snapshot with a reference taken.
func (d *Dataset) acquire() (*snapshot.Snapshot, error) {
	for {
		s := d.cur.Load()
		if s == nil {
			return nil, ErrClosed
		}
		if s.TryRef() {
			return s, nil
		}
		// Swapped and released between Load and TryRef: load again.
	}
}

// swap installs s as the snapshot in service and drops the store's
// reference to the previous one.
func (d *Dataset) swap(s *snapshot.Snapshot) {
	if old := d.cur.Swap(s); old != nil {
		old.Unref()
	}
}

// Open opens every dataset under home/datasets. A home without datasets is
// an empty store, not an error; a dataset whose snapshot is corrupt makes
// Open fail with the corruption error (it is never served half-checked).
func Open(home string, opts *Options) (*Store, error) {
	s := &Store{home: home, opts: opts.withDefaults(), datasets: map[string]*Dataset{}}
	if err := s.Refresh(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Home is the store's home directory.
func (s *Store) Home() string { return s.home }

// DatasetDir is where dataset name lives (whether or not it exists).
func (s *Store) DatasetDir(name string) string {
	return filepath.Join(s.home, DatasetsDir, name)
}

// Refresh picks up datasets created and snapshots published (CURRENT
// moved) since Open, by this or another process. A dataset whose new
// snapshot fails to open keeps serving its old one; the error is returned.
func (s *Store) Refresh() error {
	root := filepath.Join(s.home, DatasetsDir)
	ents, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if !e.IsDir() || format.ValidDatasetName(e.Name()) != nil {
			continue
		}
		if err := s.refreshDataset(e.Name()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Store) refreshDataset(name string) error {
	dir := s.DatasetDir(name)
	id, err := format.ReadCurrent(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil // being created
	} else if err != nil {
		return fmt.Errorf("dataset %s: %w", name, err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	d := s.datasets[name]
	s.mu.Unlock()
	if d != nil {
		if cur := d.cur.Load(); cur != nil && cur.ID() == id {
			return nil
		}
	}
	if !s.opts.ReadOnly {
		if n, err := format.SweepTemp(dir); err != nil {
			s.opts.Logger.Warn("sweep temporary snapshots", "dataset", name, "err", err)
		} else if n > 0 {
			s.opts.Logger.Warn("removed unfinished snapshots left by a crash", "dataset", name, "count", n)
		}
	}
	snap, err := snapshot.Open(filepath.Join(dir, format.SnapshotsDir, id))
	if err != nil {
		return fmt.Errorf("dataset %s: %w", name, err)
	}
	if snap.Manifest.Dataset != name {
		snap.Close()
		return fmt.Errorf("dataset %s: snapshot %s belongs to dataset %q", name, id, snap.Manifest.Dataset)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		snap.Close()
		return ErrClosed
	}
	if d = s.datasets[name]; d == nil {
		d = &Dataset{name: name, dir: dir}
		s.datasets[name] = d
		s.names = append(s.names, name)
		sort.Strings(s.names)
	}
	d.swap(snap)
	return nil
}

// Close stops serving. Readers holding results keep their mappings until
// they Release them.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	for _, d := range s.datasets {
		d.swap(nil)
	}
	return nil
}

// DatasetNames lists the datasets, sorted.
func (s *Store) DatasetNames() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.names)
}

// Dataset returns the named dataset.
func (s *Store) Dataset(name string) (*Dataset, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	d := s.datasets[name]
	if d == nil {
		return nil, fmt.Errorf("%w: %q", ErrNoDataset, name)
	}
	return d, nil
}

func (s *Store) datasetList() ([]*Dataset, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	out := make([]*Dataset, len(s.names))
	for i, n := range s.names {
		out[i] = s.datasets[n]
	}
	return out, nil
}

// locate finds the dataset and index row of a series reference ("id" or
// "dataset:id") and returns the snapshot with a reference held.
func (s *Store) locate(ref string) (*Dataset, *snapshot.Snapshot, uint32, error) {
	if i := strings.IndexByte(ref, ':'); i > 0 {
		if d, err := s.Dataset(ref[:i]); err == nil {
			snap, err := d.acquire()
			if err != nil {
				return nil, nil, 0, err
			}
			if row, ok := snap.Lookup(ref[i+1:]); ok {
				return d, snap, row, nil
			}
			snap.Unref()
			return nil, nil, 0, fmt.Errorf("%w: %q in dataset %s", ErrNotFound, ref[i+1:], d.name)
		}
	}
	ds, err := s.datasetList()
	if err != nil {
		return nil, nil, 0, err
	}
	for _, d := range ds {
		snap, err := d.acquire()
		if err != nil {
			continue
		}
		if row, ok := snap.Lookup(ref); ok {
			return d, snap, row, nil
		}
		snap.Unref()
	}
	return nil, nil, 0, fmt.Errorf("%w: %q", ErrNotFound, ref)
}

// Result is the answer to Get. Points may alias a mapping: they are valid
// until Release, which must be called exactly once.
type Result struct {
	Dataset string
	Points  snapshot.Points
	snap    *snapshot.Snapshot
}

// Release lets go of the snapshot reference the points came from.
func (r *Result) Release() {
	if r.snap != nil {
		r.snap.Unref()
		r.snap = nil
	}
}

// Get returns the points of series ref with from <= period <= to (unix
// seconds UTC, bucket starts; use snapshot.MinTime/MaxTime for open ends).
func (s *Store) Get(ref string, from, to int64) (Result, error) {
	d, snap, row, err := s.locate(ref)
	if err != nil {
		return Result{}, err
	}
	pts, err := snap.Get(row, from, to)
	if err != nil {
		snap.Unref()
		return Result{}, fmt.Errorf("get %s: %w", ref, err)
	}
	return Result{Dataset: d.name, Points: pts, snap: snap}, nil
}

// Copy returns copies of the points of series ref in [from, to] as unix
// seconds and values: for callers that keep the data.
func (s *Store) Copy(ref string, from, to int64) (periods []int64, values []float64, err error) {
	r, err := s.Get(ref, from, to)
	if err != nil {
		return nil, nil, err
	}
	defer r.Release()
	n := r.Points.Len()
	periods = make([]int64, n)
	for i := range periods {
		periods[i] = r.Points.Unix(i)
	}
	return periods, slices.Clone(r.Points.Values), nil
}

// Info describes a series: every field of its index row, plus where it is
// served from.
type Info struct {
	snapshot.Info
	Dataset    string
	SnapshotID string
	Epoch      uint64
	Seq        uint64
	Updated    int64 // unix seconds the snapshot was created
}

// Info returns the series' metadata.
func (s *Store) Info(ref string) (Info, error) {
	d, snap, row, err := s.locate(ref)
	if err != nil {
		return Info{}, err
	}
	defer snap.Unref()
	m := snap.Manifest
	return Info{Info: snap.Info(row), Dataset: d.name, SnapshotID: m.SnapshotID, Epoch: m.Epoch, Seq: m.CoversThroughSeq, Updated: m.Created.Unix()}, nil
}

// Latest returns the last period (unix seconds) and value of a series.
func (s *Store) Latest(ref string) (period int64, value float64, err error) {
	info, err := s.Info(ref)
	if err != nil {
		return 0, 0, err
	}
	if info.Count == 0 {
		return 0, 0, fmt.Errorf("series %q has no data", ref)
	}
	return info.Last, info.LatestValue, nil
}

// SearchHit is one result of Search.
type SearchHit struct {
	Dataset string
	ID      string
	Name    string
	Score   int
}

// Search finds series by id or name across datasets (see
// snapshot.Snapshot.Search for the ranking).
func (s *Store) Search(query string, limit int) ([]SearchHit, error) {
	ds, err := s.datasetList()
	if err != nil {
		return nil, err
	}
	var hits []SearchHit
	for _, d := range ds {
		snap, err := d.acquire()
		if err != nil {
			continue
		}
		for _, m := range snap.Search(query, limit) {
			hits = append(hits, SearchHit{Dataset: d.name, ID: m.ID, Name: m.Name, Score: m.Score})
		}
		snap.Unref()
	}
	sort.SliceStable(hits, func(a, b int) bool {
		if hits[a].Score != hits[b].Score {
			return hits[a].Score > hits[b].Score
		}
		if len(hits[a].ID) != len(hits[b].ID) {
			return len(hits[a].ID) < len(hits[b].ID)
		}
		return hits[a].ID < hits[b].ID
	})
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits, nil
}

// DatasetStatus describes a dataset for listings.
type DatasetStatus struct {
	Name     string
	Manifest format.Manifest
	Dir      string // the snapshot directory in service
}

// Status lists the datasets and their snapshots in service.
func (s *Store) Status() ([]DatasetStatus, error) {
	ds, err := s.datasetList()
	if err != nil {
		return nil, err
	}
	out := make([]DatasetStatus, 0, len(ds))
	for _, d := range ds {
		snap, err := d.acquire()
		if err != nil {
			continue
		}
		out = append(out, DatasetStatus{Name: d.name, Manifest: *snap.Manifest, Dir: snap.Dir})
		snap.Unref()
	}
	return out, nil
}
