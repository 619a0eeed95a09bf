package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/energyscope/energyscope/functions/bridge"
	"github.com/energyscope/energyscope/internal/wiring"
	"github.com/energyscope/energyscope/localcache"
)

// companionConfig is what `es companion` runs with. The sync engine will
// add to it (server, token) without changing how the bridge is started.
type companionConfig struct {
	home         string
	port         int
	allowOrigins []string
	poll         time.Duration
	// server and serverToken select the central server to sync from. Empty
	// server: serve the local data offline.
	server      string
	serverToken string
	datasets    string // comma-separated; empty = every dataset of the server
	bandwidth   int64  // bytes/s for snapshot downloads; 0 = unlimited
}

// companion is a running companion: the writable store and the bridge
// over it (and, once it exists, the sync engine writing into the store).
type companion struct {
	store  *localcache.Store
	bridge *bridge.Server
	sync   *companionSync // nil when offline (no --server)
}

// startCompanion opens the home's store writable (one writer per home) and
// starts the bridge on it.
func startCompanion(cfg companionConfig, progressOut io.Writer, log *slog.Logger) (*companion, error) {
	if err := os.MkdirAll(cfg.home, 0o755); err != nil {
		return nil, err
	}
	// A companion never compacts on its own: it rebuilds the server's
	// snapshots when they are announced (and checks their SHA-256).
	st, err := localcache.Open(cfg.home, &localcache.Options{Logger: log, CompactRows: -1, CompactBytes: -1})
	if err != nil {
		return nil, err
	}
	o := bridge.DefaultOptions(cfg.home)
	o.Port = cfg.port
	o.AllowOrigins = cfg.allowOrigins
	o.PollInterval = cfg.poll
	o.Status = storeStatus{st}
	o.Logger = log
	o.Changes = wiring.Changes{Store: st}
	srv, err := bridge.Start(wiring.Source{Store: st}, o)
	if err != nil {
		st.Close()
		return nil, err
	}
	c := &companion{store: st, bridge: srv}
	if cfg.server != "" {
		c.attachSync(cfg, progressOut, log)
	}
	return c, nil
}

// Close stops the bridge (waiting up to ctx for requests in flight) and
// then closes the store.
func (c *companion) Close(ctx context.Context) error {
	err := c.bridge.Shutdown(ctx)
	c.stopSync()
	return errors.Join(err, c.store.Close())
}

// storeStatus shows the store's datasets on /v1/status and lets the
// bridge's live polling see when anything changed.
type storeStatus struct{ st *localcache.Store }

func (s storeStatus) Datasets() ([]bridge.DatasetStatus, error) {
	ds, err := s.st.Status()
	if err != nil {
		return nil, err
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
	}
	return out, nil
}

func runCompanion(e *env, args []string) error {
	var cfg companionConfig
	var allow multiFlag
	fs := newFlags(e, "companion", &cfg.home)
	fs.IntVar(&cfg.port, "port", bridge.DefaultPort, "bridge port on 127.0.0.1 (0: any free port; the add-in manifest names it)")
	fs.Var(&allow, "allow-origin", "also accept browser requests from this origin, e.g. https://addin.example.com (repeatable)")
	fs.DurationVar(&cfg.poll, "poll", bridge.DefaultPollInterval, "how often ES.Live checks for new data")
	fs.StringVar(&cfg.server, "server", "", "central server URL to sync from (default: serve the local data offline)")
	fs.StringVar(&cfg.serverToken, "token", "", "access token for --server")
	fs.StringVar(&cfg.datasets, "datasets", "", "with --server: datasets to sync, comma-separated (default: all)")
	fs.Int64Var(&cfg.bandwidth, "bandwidth", 0, "with --server: limit snapshot downloads to this many bytes/s (0: no limit)")
	verbose := fs.Bool("v", false, "log requests' errors and certificate renewals to stderr")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if cfg.port < 0 || cfg.port > 65535 {
		return usagef("--port %d: want 0 to 65535", cfg.port)
	}
	if cfg.serverToken != "" && cfg.server == "" {
		return usagef("--token needs --server")
	}
	cfg.allowOrigins = allow
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))

	// Catch the signals before anything starts, so a stop during start-up
	// still shuts down cleanly.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := startCompanion(cfg, e.stderr, log)
	if err != nil {
		return err
	}
	names := c.store.DatasetNames()
	url := c.bridge.URL()
	mode := "offline"
	if cfg.server != "" {
		mode = "syncing from " + cfg.server
	}
	fmt.Fprintf(e.stdout, "EnergyScope companion: serving %d dataset(s) from %s (%s)\n", len(names), cfg.home, mode)
	fmt.Fprintf(e.stdout, "bridge:   %s\n", url)
	fmt.Fprintf(e.stdout, "add-in:   %s/addin/manifest.xml (see docs/excel.md to sideload it)\n", url)
	fmt.Fprintf(e.stdout, "CA:       %s (trust it once: es trust --home %s)\n", c.bridge.Certs().CAPath(), cfg.home)
	fmt.Fprintf(e.stdout, "clients:  %s holds the URL and token\n", filepath.Join(cfg.home, bridge.ConfigFile))
	fmt.Fprintln(e.stdout, "press Ctrl+C to stop")

	select {
	case <-ctx.Done():
	case err := <-c.bridge.Done():
		if err != nil {
			c.Close(context.Background())
			return fmt.Errorf("bridge stopped: %w", err)
		}
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Close(shutdown); err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	fmt.Fprintln(e.stdout, "stopped")
	return nil
}
