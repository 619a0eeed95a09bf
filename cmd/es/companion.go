package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/energyscope/energyscope/functions/bridge"
	"github.com/energyscope/energyscope/internal/companion"
	"github.com/energyscope/energyscope/internal/fileutil"
	"github.com/energyscope/energyscope/sync/client"
)

// runCompanion is `es companion`: internal/companion, the engine the
// desktop app runs too (the home's writable store, the bridge for Excel,
// required here since the command exists for it, and with --server the
// sync engine), in the foreground until Ctrl+C.
func runCompanion(e *env, args []string) error {
	// Name stays "companion": the server's logs name the client by it.
	cfg := companion.Config{Name: "companion"}
	var allow multiFlag
	var datasets string
	fs := newFlags(e, "companion", &cfg.Home)
	fs.IntVar(&cfg.Port, "port", bridge.DefaultPort, "bridge port on 127.0.0.1 (0: any free port; the add-in manifest names it)")
	fs.Var(&allow, "allow-origin", "also accept browser requests from this origin, e.g. https://addin.example.com (repeatable)")
	fs.DurationVar(&cfg.Poll, "poll", bridge.DefaultPollInterval, "how often ES.Live checks for new data")
	fs.StringVar(&cfg.Server, "server", "", "central server URL to sync from, or several replicas comma-separated (URL1,URL2,...: tried in order, failing over to the next) (default: serve the local data offline)")
	fs.StringVar(&cfg.Token, "token", "", "access token for --server")
	fs.StringVar(&datasets, "datasets", "", "with --server: datasets to sync, comma-separated (default: all)")
	fs.Int64Var(&cfg.Bandwidth, "bandwidth", 0, "with --server: limit snapshot downloads to this many bytes/s (0: no limit)")
	metricsFile := fs.String("sync-metrics", "", "with --server: keep the sync engine's metrics (JSON of client.Metrics, each completed download's accounting) in this file")
	verbose := fs.Bool("v", false, "log requests' errors and certificate renewals to stderr")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if cfg.Port < 0 || cfg.Port > 65535 {
		return usagef("--port %d: want 0 to 65535", cfg.Port)
	}
	if cfg.Token != "" && cfg.Server == "" {
		return usagef("--token needs --server")
	}
	if cfg.Server != "" {
		servers, err := client.ParseServers(cfg.Server)
		if err != nil {
			return usagef("--server: %v", err)
		}
		cfg.Server = strings.Join(servers, ",")
	}
	cfg.AllowOrigins = allow
	if datasets != "" {
		cfg.Datasets = strings.Split(datasets, ",")
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))

	// Catch the signals before anything starts, so a stop during start-up
	// still shuts down cleanly.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := companion.Start(cfg)
	if err != nil {
		return err
	}
	if eng := c.Engine(); eng != nil {
		progressDisplay(e.stderr, eng)
		if *metricsFile != "" {
			go writeSyncMetrics(ctx, eng, *metricsFile, cfg.Logger)
		}
	}
	br := c.Bridge()
	names := c.Store().DatasetNames()
	url := br.URL()
	mode := "offline"
	if cfg.Server != "" {
		mode = "syncing from " + cfg.Server
	}
	fmt.Fprintf(e.stdout, "EnergyScope companion: serving %d dataset(s) from %s (%s)\n", len(names), cfg.Home, mode)
	fmt.Fprintf(e.stdout, "bridge:   %s\n", url)
	fmt.Fprintf(e.stdout, "add-in:   %s/addin/manifest.xml (see docs/excel.md to sideload it)\n", url)
	fmt.Fprintf(e.stdout, "CA:       %s (trust it once: es trust --home %s)\n", br.Certs().CAPath(), cfg.Home)
	fmt.Fprintf(e.stdout, "clients:  %s holds the URL and token\n", filepath.Join(cfg.Home, bridge.ConfigFile))
	fmt.Fprintln(e.stdout, "press Ctrl+C to stop")

	select {
	case <-ctx.Done():
	case err := <-br.Done():
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

// writeSyncMetrics keeps eng's Metrics in path (published by rename, so a
// reader never sees half of it): at start and within 50 ms of a change.
// Tests and benchmarks read figures there, never from the log.
func writeSyncMetrics(ctx context.Context, eng *client.Engine, path string, log *slog.Logger) {
	var written []byte
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		b, err := json.Marshal(eng.Metrics())
		if err == nil && !bytes.Equal(b, written) {
			if err = fileutil.WriteFile(path, append(b, '\n'), 0o644); err == nil {
				written = b
			}
		}
		if err != nil {
			log.Warn("--sync-metrics", "file", path, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
