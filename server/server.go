// Package server is the central server: it ingests rows and source files,
// assigns sequence numbers, keeps datasets in the same localcache.Store the
// desktop uses, compacts and publishes snapshots by policy, keeps the delta
// history back to its oldest retained snapshot, and streams snapshots and
// deltas to companions through server/hub. It also serves lookups.
//
// Durability: an ingest is acknowledged only after the store's write-ahead
// log and the history log are fsynced; sequence numbers continue from the
// store after a restart.
package server

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
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server/cook"
	"github.com/energyscope/energyscope/server/hub"
	"github.com/energyscope/energyscope/sync/protocol"
)

// Options for New.
type Options struct {
	Home   string
	Logger *slog.Logger
	// Tokens authenticates requests; nil or empty disables auth (only
	// for loopback development: es serve refuses it unless told).
	Tokens *Tokens
	// Compaction policy: compact a dataset when its delta holds this
	// many rows or bytes (defaults 1M rows, 64 MiB), and daily at
	// CompactAt ("HH:MM" UTC, empty = never).
	CompactRows  int
	CompactBytes int64
	CompactAt    string
	// Keep snapshots per dataset (>= 2; the delta history reaches back to
	// the oldest). Default 2.
	Keep int
	// Hub options (queue sizes, ping interval).
	Hub hub.Options
}

// Server is the central server.
type Server struct {
	opts  Options
	store *localcache.Store
	hub   *hub.Hub
	log   *slog.Logger
	m     *metrics

	mu sync.Mutex // guards ds
	ds map[string]*dataset

	stop chan struct{}
	wg   sync.WaitGroup
}

// dataset is the server-side state of one dataset beyond the store.
type dataset struct {
	name string
	// mu serializes ingest (seq assignment, apply, history, publish),
	// compaction bookkeeping and replacement of this dataset.
	mu sync.Mutex
	// hist holds every record since the oldest retained snapshot: with
	// seq > histFrom, contiguous. Guarded by hmu (readers: the hub).
	hmu      sync.RWMutex
	hist     []delta.Record
	histFrom uint64
	histLog  *delta.WAL
	// files maps sha256 -> path for the retained snapshots; guarded by hmu.
	files      map[string]string
	compacting bool // guarded by mu
}

// HistoryDir is where the server keeps the delta history in its home.
const HistoryDir = "server-history"

// New opens the server's home.
func New(o Options) (*Server, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Keep < 2 {
		o.Keep = 2
	}
	if o.CompactRows == 0 {
		o.CompactRows = 1_000_000
	}
	if o.CompactBytes == 0 {
		o.CompactBytes = 64 << 20
	}
	if o.Hub.Logger == nil {
		o.Hub.Logger = o.Logger
	}
	st, err := localcache.Open(o.Home, &localcache.Options{Logger: o.Logger, CompactRows: -1, CompactBytes: -1, Keep: o.Keep})
	if err != nil {
		return nil, err
	}
	s := &Server{opts: o, store: st, log: o.Logger, ds: map[string]*dataset{}, stop: make(chan struct{})}
	s.m = newMetrics(s)
	o.Hub.OnAck = func(client, ds string, seq uint64) { s.m.acks.Inc() }
	s.hub = hub.New(s, o.Hub)
	for _, name := range st.DatasetNames() {
		if _, err := s.openDataset(name); err != nil {
			st.Close()
			return nil, err
		}
	}
	s.wg.Add(1)
	go s.background()
	return s, nil
}

// Store is the server's store (lookups).
func (s *Server) Store() *localcache.Store { return s.store }

// Hub is the websocket hub.
func (s *Server) Hub() *hub.Hub { return s.hub }

func (s *Server) openDataset(name string) (*dataset, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.ds[name]; d != nil {
		return d, nil
	}
	d := &dataset{name: name}
	w, recs, err := delta.OpenWAL(filepath.Join(s.opts.Home, HistoryDir, name), false, 0, s.log)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: history: %w", name, err)
	}
	d.histLog = w
	head, err := s.store.LastSeq(name)
	if err != nil {
		return nil, err
	}
	d.hist = usableHistory(recs, head)
	d.histFrom = head - uint64(len(d.hist))
	s.refreshFilesLocked(d)
	s.ds[name] = d
	return d, nil
}

// usableHistory returns the records of the history log the server can
// serve catch-ups from: the contiguous run that ends at the store's head.
// A crash between the history append and the store's apply leaves a record
// in the history that the store does not have (an orphan above the head);
// the next ingest reuses its seq and appends the real record after it. So,
// scanning backwards, the last record written with a seq is the one the
// store holds, and orphans (above the head, or earlier writes of a seq
// already taken) are skipped.
func usableHistory(recs []delta.Record, head uint64) []delta.Record {
	want := head
	i := len(recs)
	for j := len(recs) - 1; j >= 0 && want > 0; j-- {
		seq := recs[j].Seq
		if seq > want {
			continue // an orphan, or an earlier write of a seq already taken
		}
		if seq < want {
			break // a gap
		}
		i--
		recs[i] = recs[j]
		want--
	}
	return recs[i:]
}

// refreshFilesLocked indexes the files of the retained snapshots by SHA-256.
func (s *Server) refreshFilesLocked(d *dataset) {
	files := map[string]string{}
	root := filepath.Join(s.store.DatasetDir(d.name), format.SnapshotsDir)
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), format.TempPrefix) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		m, err := format.ReadManifest(dir)
		if err != nil {
			continue
		}
		for _, f := range m.Files {
			files[f.SHA256] = filepath.Join(dir, f.Name)
		}
	}
	d.hmu.Lock()
	d.files = files
	d.hmu.Unlock()
}

func (s *Server) dataset(name string) (*dataset, error) {
	s.mu.Lock()
	d := s.ds[name]
	s.mu.Unlock()
	if d == nil {
		return nil, fmt.Errorf("%w: %q", localcache.ErrNoDataset, name)
	}
	return d, nil
}

// Heads implements hub.Source.
func (s *Server) Heads() []protocol.Head {
	st, err := s.store.Status()
	if err != nil {
		return nil
	}
	out := make([]protocol.Head, 0, len(st))
	for _, d := range st {
		out = append(out, headOf(d))
	}
	return out
}

func headOf(d localcache.DatasetStatus) protocol.Head {
	var size int64
	for _, f := range d.Manifest.Files {
		size += f.Size
	}
	return protocol.Head{Dataset: d.Name, Epoch: d.Manifest.Epoch, Snapshot: d.Manifest.SnapshotID, Seq: d.Seq, Bytes: size}
}

// Head implements hub.Source.
func (s *Server) Head(name string) (protocol.Head, *format.Manifest, bool) {
	st, err := s.store.Status()
	if err != nil {
		return protocol.Head{}, nil, false
	}
	for _, d := range st {
		if d.Name == name {
			m := d.Manifest
			return headOf(d), &m, true
		}
	}
	return protocol.Head{}, nil, false
}

// Since implements hub.Source.
func (s *Server) Since(name string, after uint64) ([]protocol.Record, bool) {
	d, err := s.dataset(name)
	if err != nil {
		return nil, false
	}
	d.hmu.RLock()
	defer d.hmu.RUnlock()
	if after < d.histFrom {
		return nil, false
	}
	i := sort.Search(len(d.hist), func(i int) bool { return d.hist[i].Seq > after })
	return slices.Clone(d.hist[i:]), true
}

// OpenFile implements hub.Source.
func (s *Server) OpenFile(name, sha string) (*os.File, error) {
	d, err := s.dataset(name)
	if err != nil {
		return nil, err
	}
	d.hmu.RLock()
	p, ok := d.files[sha]
	d.hmu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("no retained snapshot file with sha256 %s in %s", sha, name)
	}
	return os.Open(p)
}

// Ingest assigns sequence numbers to records, makes them durable (store
// WAL and history), applies them and fans them out. It returns the seq
// range assigned.
func (s *Server) Ingest(name string, recs []delta.Record) (first, last uint64, err error) {
	if len(recs) == 0 {
		return 0, 0, errors.New("no rows")
	}
	d, err := s.dataset(name)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	d.mu.Lock()
	head, err := s.store.LastSeq(name)
	if err != nil {
		d.mu.Unlock()
		return 0, 0, err
	}
	for i := range recs {
		recs[i].Seq = head + uint64(i) + 1
	}
	if err := delta.Validate(recs); err != nil {
		d.mu.Unlock()
		return 0, 0, err
	}
	// History first: a record in the history but not in the store is
	// harmless (its seq is reassigned after a crash only if the store did
	// not get it, and usableHistory skips it at open).
	if err := d.histLog.Append(recs); err != nil {
		d.mu.Unlock()
		return 0, 0, fmt.Errorf("history: %w", err)
	}
	if _, err := s.store.Apply(name, recs); err != nil {
		d.mu.Unlock()
		return 0, 0, err
	}
	d.hmu.Lock()
	d.hist = append(d.hist, recs...)
	d.hmu.Unlock()
	s.hub.Publish(name, recs)
	d.mu.Unlock()

	s.m.ingestRows.Add(float64(len(recs)))
	s.m.ingestSeconds.Observe(time.Since(start).Seconds())
	s.maybeCompact(name)
	return recs[0].Seq, recs[len(recs)-1].Seq, nil
}

func (s *Server) maybeCompact(name string) {
	st, err := s.store.Status()
	if err != nil {
		return
	}
	for _, d := range st {
		if d.Name != name {
			continue
		}
		if (s.opts.CompactRows > 0 && d.DeltaRows >= s.opts.CompactRows) || (s.opts.CompactBytes > 0 && int64(d.DeltaRows)*40 >= s.opts.CompactBytes) {
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				if _, err := s.Compact(name); err != nil {
					s.log.Error("compaction failed", "dataset", name, "err", err)
				}
			}()
		}
	}
}

// Compact folds the dataset's delta into a new snapshot, trims the history
// to the oldest retained snapshot and announces the snapshot to
// subscribers.
func (s *Server) Compact(name string) (*format.Manifest, error) {
	d, err := s.dataset(name)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	if d.compacting {
		d.mu.Unlock()
		return nil, nil
	}
	d.compacting = true
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.compacting = false
		d.mu.Unlock()
	}()
	before, _, _ := s.Head(name)
	start := time.Now()
	m, err := s.store.Compact(name)
	if err != nil {
		return nil, err
	}
	if m.SnapshotID == before.Snapshot {
		return m, nil
	}
	s.m.compactions.Inc()
	s.m.compactSeconds.Observe(time.Since(start).Seconds())
	s.refreshFilesLocked(d)
	s.trimHistory(d)
	s.hub.Announce(name, m, "compacted")
	s.log.Info("published snapshot", "dataset", name, "snapshot", m.SnapshotID, "covers", m.CoversThroughSeq, "rows", m.Rows)
	return m, nil
}

// trimHistory keeps records above the oldest retained snapshot's covers.
func (s *Server) trimHistory(d *dataset) {
	oldest := ^uint64(0)
	root := filepath.Join(s.store.DatasetDir(d.name), format.SnapshotsDir)
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), format.TempPrefix) {
			continue
		}
		if m, err := format.ReadManifest(filepath.Join(root, e.Name())); err == nil {
			oldest = min(oldest, m.CoversThroughSeq)
		}
	}
	if oldest == ^uint64(0) {
		return
	}
	d.hmu.Lock()
	if oldest > d.histFrom {
		i := sort.Search(len(d.hist), func(i int) bool { return d.hist[i].Seq > oldest })
		d.hist = slices.Clone(d.hist[i:])
		d.histFrom = oldest
	}
	d.hmu.Unlock()
	d.mu.Lock()
	if err := d.histLog.Rotate(s.lastSeqOr(d.name) + 1); err == nil {
		d.histLog.DropThrough(oldest)
	}
	d.mu.Unlock()
}

func (s *Server) lastSeqOr(name string) uint64 {
	seq, _ := s.store.LastSeq(name)
	return seq
}

// Replace cooks source files into a new epoch of a dataset (creating it if
// needed) and announces it: subscribers re-download. Sequence numbers keep
// increasing across epochs.
func (s *Server) Replace(name string, files []string, o cook.InputOptions) (*format.Manifest, error) {
	if err := format.ValidDatasetName(name); err != nil {
		return nil, err
	}
	b := cook.NewBuilder()
	for _, f := range files {
		if _, err := b.AddFile(f, o); err != nil {
			return nil, err
		}
	}
	d, _ := s.dataset(name)
	if d != nil {
		d.mu.Lock()
		defer d.mu.Unlock()
	}
	epoch, covers := uint64(1), uint64(0)
	if head, _, ok := s.Head(name); ok {
		epoch, covers = head.Epoch+1, head.Seq
	}
	tmp, err := os.MkdirTemp(s.opts.Home, ".upload-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	m, _, err := format.Write(filepath.Join(tmp, "snap"), b.Table(), format.WriteOptions{Dataset: name, Epoch: epoch, CoversThroughSeq: covers})
	if err != nil {
		return nil, err
	}
	if _, err := s.store.Install(name, filepath.Join(tmp, "snap")); err != nil {
		return nil, err
	}
	if d == nil {
		if d, err = s.openDataset(name); err != nil {
			return nil, err
		}
	} else {
		d.hmu.Lock()
		d.hist, d.histFrom = nil, covers
		d.hmu.Unlock()
		s.refreshFilesLocked(d)
	}
	s.hub.Announce(name, m, "replaced")
	s.log.Info("replaced dataset", "dataset", name, "epoch", epoch, "snapshot", m.SnapshotID, "rows", m.Rows)
	return m, nil
}

// background runs the heartbeat and the time-of-day compaction.
func (s *Server) background() {
	defer s.wg.Done()
	hb := time.NewTicker(5 * time.Second)
	defer hb.Stop()
	lastDay := ""
	for {
		select {
		case <-s.stop:
			return
		case <-hb.C:
			s.hub.Heartbeat()
			if at := s.opts.CompactAt; at != "" {
				now := time.Now().UTC()
				if now.Format("15:04") >= at && lastDay != now.Format("2006-01-02") {
					lastDay = now.Format("2006-01-02")
					for _, n := range s.store.DatasetNames() {
						if _, err := s.Compact(n); err != nil {
							s.log.Error("scheduled compaction failed", "dataset", n, "err", err)
						}
					}
				}
			}
		}
	}
}

// Close stops the server's background work, disconnects clients and
// closes the store.
func (s *Server) Close() error {
	close(s.stop)
	s.hub.Close()
	s.wg.Wait()
	s.mu.Lock()
	for _, d := range s.ds {
		d.histLog.Close()
	}
	s.mu.Unlock()
	return s.store.Close()
}
