// Package companion starts what an analyst's machine runs in the
// background: the home's writable store, the localhost bridge that Excel
// talks to, and, when a server is configured, the sync engine that keeps
// the store in step with it. `es companion` and the desktop app (app/)
// both start it, so that they behave the same.
//
// It answers the Excel functions' as-of reads and revisions (vintages.go):
// from the vintages it holds (the store's snapshot, the bounded vintage
// cache under the home), else over the sync connection.
//
// It also keeps the desktop app's settings (server, token, home, bridge
// port, datasets) in the user's configuration directory.
//
// What it is not: it has no user interface and no command line; it does
// not interpret the data (package functions does) and serves no HTTP of
// its own (package bridge does).
package companion

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/energyscope/energyscope/functions"
	"github.com/energyscope/energyscope/functions/bridge"
	"github.com/energyscope/energyscope/internal/wiring"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/sync/client"
)

// Config is what a companion runs with.
type Config struct {
	// Home is the directory of the datasets, the bridge's certificates and
	// bridge.json. Required.
	Home string
	// Port is the bridge's port on 127.0.0.1; 0 picks a free one. The
	// add-in's manifest names the port, so it should stay the same across
	// restarts (bridge.DefaultPort unless configured).
	Port int
	// AllowOrigins are extra browser origins the bridge accepts.
	AllowOrigins []string
	// Poll is how often ES.Live checks for new data without a change feed;
	// zero is the bridge's default.
	Poll time.Duration
	// Server is the central server to sync from, or several replicas of
	// it, comma-separated, tried in order (client.ParseServers: Start and
	// SetSync refuse a list it refuses); empty serves the local data
	// offline. Token authenticates to it.
	Server, Token string
	// Datasets to sync; empty means every dataset of the server.
	Datasets []string
	// Bandwidth limits snapshot downloads in bytes per second; 0 = none.
	Bandwidth int64
	// Name identifies this client in the server's logs; empty is the host
	// name.
	Name string
	// BridgeOptional keeps the companion running on the store alone when
	// the bridge cannot start (its port is taken, say): BridgeErr says
	// why. The desktop app sets it, since browsing the data does not need
	// Excel; `es companion` exists for the bridge and leaves it unset.
	BridgeOptional bool
	// VintageCache bounds the vintages kept for as-of reads (count and
	// bytes); zero fields are localcache.DefaultVintageCacheOptions'.
	VintageCache localcache.VintageCacheOptions
	// Logger receives warnings and errors; nil discards.
	Logger *slog.Logger
}

// Companion is a running companion.
type Companion struct {
	cfg    Config
	log    *slog.Logger
	store  *localcache.Store
	vint   *vintages      // as-of reads and revisions (vintages.go)
	bridge *bridge.Server // nil when the bridge could not start (BridgeOptional)
	brErr  error

	mu        sync.Mutex // guards sync, listeners, closed
	sync      *syncRun   // nil when offline
	listeners []func(client.Progress)
	closed    bool
}

// syncRun is one run of the sync engine.
type syncRun struct {
	engine *client.Engine
	cancel context.CancelFunc
	done   chan struct{}
}

// Start opens the home's store writable (one writer per home), starts the
// bridge on it and, if cfg.Server is set, the sync engine.
func Start(cfg Config) (*Companion, error) {
	if cfg.Home == "" {
		return nil, errors.New("companion: no home directory")
	}
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("companion: port %d: want 0 to 65535", cfg.Port)
	}
	if cfg.Server != "" {
		if _, err := client.ParseServers(cfg.Server); err != nil {
			return nil, fmt.Errorf("companion: %w", err)
		}
	}
	cfg.Datasets = slices.Clone(cfg.Datasets)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := os.MkdirAll(cfg.Home, 0o755); err != nil {
		return nil, err
	}
	// A companion never compacts on its own: it rebuilds the server's
	// snapshots when they are announced (and checks their SHA-256).
	st, err := localcache.Open(cfg.Home, &localcache.Options{Logger: log, CompactRows: -1, CompactBytes: -1})
	if err != nil {
		return nil, err
	}
	vo := cfg.VintageCache
	vo.Logger = log
	vc, err := localcache.OpenVintageCache(cfg.Home, &vo)
	if err != nil {
		st.Close()
		return nil, err
	}
	c := &Companion{cfg: cfg, log: log, store: st}
	c.vint = newVintages(c, vc)
	o := bridge.DefaultOptions(cfg.Home)
	o.Port = cfg.Port
	o.AllowOrigins = cfg.AllowOrigins
	if cfg.Poll > 0 {
		o.PollInterval = cfg.Poll
	}
	o.Status = storeStatus{c}
	o.Logger = log
	o.Changes = wiring.Changes{Store: st}
	srv, err := bridge.Start(c.Source(), o)
	switch {
	case err == nil:
		c.bridge = srv
	case cfg.BridgeOptional:
		c.brErr = err
		log.Warn("bridge not started; Excel cannot reach this companion", "err", err)
	default:
		vc.Close()
		st.Close()
		return nil, err
	}
	if cfg.Server != "" {
		c.mu.Lock()
		c.startSyncLocked()
		c.mu.Unlock()
	}
	return c, nil
}

// Config returns the configuration the companion runs with (with the
// sync settings last given to SetSync).
func (c *Companion) Config() Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	cfg := c.cfg
	cfg.Datasets = slices.Clone(cfg.Datasets)
	return cfg
}

// Store is the home's store. It stays open until Close.
func (c *Companion) Store() *localcache.Store { return c.store }

// Source is what the bridge's functions read: the store, and the
// vintages (as-of reads and revisions, a functions.VintageSource).
func (c *Companion) Source() functions.Source {
	return source{Source: wiring.Source{Store: c.store}, v: c.vint}
}

// Bridge is the running bridge, or nil if it could not start (BridgeErr).
func (c *Companion) Bridge() *bridge.Server { return c.bridge }

// BridgeErr is why the bridge did not start (with Config.BridgeOptional).
func (c *Companion) BridgeErr() error { return c.brErr }

// Engine is the sync engine, or nil when the companion is offline. It
// changes when SetSync is called.
func (c *Companion) Engine() *client.Engine {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sync == nil {
		return nil
	}
	return c.sync.engine
}

// OnSyncProgress registers fn for the progress of the sync engine, this
// one and every one SetSync starts later. fn is called from the engine's
// goroutine and must not block.
func (c *Companion) OnSyncProgress(fn func(client.Progress)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listeners = append(c.listeners, fn)
	if c.sync != nil {
		c.sync.engine.OnProgress(fn)
	}
}

// SetSync changes the server (or comma-separated list of servers, which
// it refuses, changing nothing, when client.ParseServers does), token
// and datasets to sync: the running
// engine (if any) is stopped and, if server is not empty, a new one is
// started from what the store holds. The store keeps serving throughout.
func (c *Companion) SetSync(server, token string, datasets []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return localcache.ErrClosed
	}
	if server != "" {
		if _, err := client.ParseServers(server); err != nil {
			return err
		}
	}
	c.stopSyncLocked()
	c.cfg.Server, c.cfg.Token, c.cfg.Datasets = server, token, slices.Clone(datasets)
	if server != "" {
		c.startSyncLocked()
	}
	return nil
}

// startSyncLocked starts the engine from c.cfg; c.mu is held.
func (c *Companion) startSyncLocked() {
	name := c.cfg.Name
	if name == "" {
		name, _ = os.Hostname()
		name = "companion " + name
	}
	eng := client.New(wiring.Sink{Store: c.store}, client.Options{
		Server: c.cfg.Server, Token: c.cfg.Token, Datasets: c.cfg.Datasets,
		BandwidthLimit: c.cfg.Bandwidth, Name: name, Logger: c.log,
	})
	for _, fn := range c.listeners {
		eng.OnProgress(fn)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &syncRun{engine: eng, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		eng.Run(ctx)
	}()
	c.sync = r
}

// stopSyncLocked stops the engine and waits for it; c.mu is held.
func (c *Companion) stopSyncLocked() {
	if c.sync != nil {
		c.sync.cancel()
		<-c.sync.done
		c.sync = nil
	}
}

// Close stops the bridge (waiting up to ctx for requests in flight) and
// the sync engine, then closes the store.
func (c *Companion) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.stopSyncLocked()
	c.mu.Unlock()
	var err error
	if c.bridge != nil {
		err = c.bridge.Shutdown(ctx)
	}
	return errors.Join(err, c.vint.cache.Close(), c.store.Close())
}

// storeStatus shows the store's datasets on the bridge's /v1/status, with
// the sync engine's view of them when it runs, and lets the bridge's live
// polling see when anything changed.
type storeStatus struct{ c *Companion }

func (s storeStatus) Datasets() ([]bridge.DatasetStatus, error) {
	ds, err := s.c.store.Status()
	if err != nil {
		return nil, err
	}
	var prog *client.Progress
	if eng := s.c.Engine(); eng != nil {
		p := eng.Progress()
		prog = &p
	}
	out := make([]bridge.DatasetStatus, len(ds))
	for i, d := range ds {
		out[i] = bridge.DatasetStatus{
			Name: d.Name, SnapshotID: d.Manifest.SnapshotID, Epoch: d.Manifest.Epoch, Seq: d.Seq,
			Series: int64(d.Manifest.Series), Rows: d.Manifest.Rows, PendingRows: d.DeltaRows,
			SnapshotCreated: d.Manifest.Created,
		}
		if d.LastSync > 0 {
			out[i].LastSync = time.Unix(0, d.LastSync).UTC()
		}
		if prog != nil {
			online := prog.Online
			out[i].Server, out[i].Connected, out[i].Error = prog.Server, &online, prog.LastError
			for _, p := range prog.Datasets {
				if p.Dataset == d.Name && p.Failure != nil {
					out[i].Error = p.Failure.Error() // this dataset's own apply fails
				}
			}
		}
		if d.Err != nil {
			out[i].Error = d.Err.Error() // damaged: it does not serve until healed
		}
	}
	return out, nil
}
