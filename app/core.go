package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/energyscope/energyscope/internal/companion"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/sync/client"
)

// ErrNotReady is why a method answers before the companion is up: it did
// not finish starting within Options.ReadyWait.
var ErrNotReady = errors.New("the data store is still opening")

// core is what the views share: the companion, the settings it runs with
// and the window's runtime. Every view embeds it; it has no exported
// methods, so binding a view binds only the view's own.
type core struct {
	opts     Options
	log      *slog.Logger
	settings string // the settings file
	rt       atomic.Pointer[Runtime]

	// ready is closed once the first start has finished, with comp or
	// startErr set; methods that read them wait for it (wait).
	ready chan struct{}

	mu       sync.RWMutex // guards comp, startErr, cfg, watch, closed
	comp     *companion.Companion
	startErr error              // why comp is nil
	cfg      companion.Settings // the settings comp runs with (Home resolved)
	watch    func()             // cancels the store watch
	closed   bool               // Close was called: start no more

	emitMu   sync.Mutex // guards lastSync
	lastSync time.Time  // when the last sync event was sent
	facets   facetCache // per dataset snapshot, for Facets and Browse
}

// newCore is a core with o's defaults filled in and its ready channel
// open.
func newCore(o Options) *core {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Started.IsZero() {
		o.Started = time.Now()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ReadyWait <= 0 {
		o.ReadyWait = DefaultReadyWait
	}
	c := &core{opts: o, log: o.Logger, settings: o.SettingsFile, ready: make(chan struct{})}
	rt := o.Runtime
	if rt == nil {
		rt = nopRuntime{}
	}
	c.rt.Store(&rt)
	if c.settings == "" {
		if p, err := companion.SettingsPath(); err == nil {
			c.settings = p
		}
	}
	return c
}

// loadSettings reads the settings the companion starts with; unreadable
// ones are the defaults.
func (c *core) loadSettings() companion.Settings {
	var s companion.Settings
	if c.settings != "" {
		var err error
		if s, err = companion.LoadSettings(c.settings); err != nil {
			c.log.Warn("settings not read; using defaults", "err", err)
			s = companion.Settings{}
		}
	}
	return c.withFolder(s)
}

// start starts the companion for s and then closes c.ready (New runs it in
// a goroutine of its own). It holds c.mu while it starts, so a Close that
// comes meanwhile waits and then stops what started; after a Close it
// starts nothing.
func (c *core) start(s companion.Settings) {
	c.mu.Lock()
	if !c.closed {
		c.startLocked(s)
	}
	c.mu.Unlock()
	close(c.ready)
	c.log.Debug("companion started", "ms", time.Since(c.opts.Started).Milliseconds())
	// A view that answered ErrNotReady shows its data now.
	c.runtime().EventsEmit(EventStatus)
}

// wait waits for the first start to finish, at most Options.ReadyWait.
func (c *core) wait() error {
	select {
	case <-c.ready:
		return nil
	default:
	}
	t := time.NewTimer(c.opts.ReadyWait)
	defer t.Stop()
	select {
	case <-c.ready:
		return nil
	case <-t.C:
		return fmt.Errorf("%w after %s", ErrNotReady, c.opts.ReadyWait)
	}
}

// close stops the companion and keeps it from starting again.
func (c *core) close(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return c.stopLocked(ctx)
}

func (c *core) runtime() Runtime { return *c.rt.Load() }

// home is the home directory for settings s: the override, the saved one,
// or the default.
func (c *core) home(s companion.Settings) string {
	switch {
	case c.opts.Home != "":
		return c.opts.Home
	case s.Home != "":
		return s.Home
	}
	return localcache.DefaultHome()
}

// startLocked starts the companion for settings s; c.mu is held.
func (c *core) startLocked(s companion.Settings) {
	s.Home = c.home(s)
	port := s.BridgePort()
	switch {
	case c.opts.Port < 0:
		port = 0
	case c.opts.Port > 0:
		port = c.opts.Port
	}
	c.cfg = s
	comp, err := companion.Start(companion.Config{
		Home: s.Home, Port: port, Server: s.Server, Token: s.Token, Datasets: s.Datasets,
		Bandwidth: s.Bandwidth, Name: "desktop", BridgeOptional: true, Logger: c.log,
	})
	if err != nil {
		c.comp, c.startErr = nil, err
		c.log.Error("companion not started", "home", s.Home, "err", err)
		return
	}
	c.comp, c.startErr = comp, nil
	comp.OnSyncProgress(func(client.Progress) { c.emitSync() })
	c.watch = comp.Store().Watch(func(dataset string, ids []string) {
		if len(ids) == 0 {
			c.facets.drop(dataset) // a new snapshot
		}
		c.runtime().EventsEmit(EventStatus)
		// The Explorer follows the series it shows: it redraws when one of
		// them is named here (a snapshot swap names none: every series).
		c.runtime().EventsEmit(EventSeries, SeriesChanged{Dataset: dataset, IDs: append([]string{}, ids...)})
	})
	if br := comp.Bridge(); br != nil {
		// A copy of the add-in's manifest on disk, for sideloading (the
		// Windows installer registers this path).
		if err := writeManifest(s.Home, br.Manifest()); err != nil {
			c.log.Warn("add-in manifest not written", "err", err)
		}
	}
}

// stopLocked stops the companion; c.mu is held.
func (c *core) stopLocked(ctx context.Context) error {
	if c.comp == nil {
		return nil
	}
	if c.watch != nil {
		c.watch()
		c.watch = nil
	}
	err := c.comp.Close(ctx)
	c.comp = nil
	return err
}

// config is the settings the companion runs with (or tries to); the
// caller has waited for the first start.
func (c *core) config() companion.Settings {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.cfg
}

// startError is why the companion did not start: ErrNotReady when it is
// still starting after Options.ReadyWait, its start's error, or nil.
func (c *core) startError() error {
	if err := c.wait(); err != nil {
		return err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.startErr
}

// companion returns the running companion or why there is none.
func (c *core) companion() (*companion.Companion, error) {
	if err := c.wait(); err != nil {
		return nil, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.comp == nil {
		if c.startErr != nil {
			return nil, c.startErr
		}
		return nil, errNotStarted
	}
	return c.comp, nil
}

// store returns the running store.
func (c *core) store() (*localcache.Store, error) {
	comp, err := c.companion()
	if err != nil {
		return nil, err
	}
	return comp.Store(), nil
}

// emitSync sends the sync progress, at most 10 times a second. It is the
// engine's progress callback, so it must not wait for c.mu: SetDatasets
// and SaveSettings hold c.mu while they stop the engine, which waits for
// its callback to return. The event goes from a goroutine of its own.
func (c *core) emitSync() {
	c.emitMu.Lock()
	if time.Since(c.lastSync) < 100*time.Millisecond {
		c.emitMu.Unlock()
		return
	}
	c.lastSync = time.Now()
	c.emitMu.Unlock()
	go func() { c.runtime().EventsEmit(EventSync, c.syncProgress()) }()
}
