package main

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/energyscope/energyscope/sync/client"
)

// companionSync is the sync engine of a companion started with --server.
type companionSync struct {
	engine *client.Engine
	cancel context.CancelFunc
	done   <-chan struct{}
}

// attachSync starts the sync engine writing into the companion's store.
func (c *companion) attachSync(cfg companionConfig, progress io.Writer, log *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	var datasets []string
	if cfg.datasets != "" {
		datasets = strings.Split(cfg.datasets, ",")
	}
	eng, done := startSync(ctx, c.store, syncConfig{server: cfg.server, token: cfg.serverToken, datasets: datasets, bandwidth: cfg.bandwidth, name: "companion", log: log})
	if progress != nil {
		progressDisplay(progress, eng)
	}
	c.sync = &companionSync{engine: eng, cancel: cancel, done: done}
}

// stopSync stops the engine and waits for it (before the store closes).
func (c *companion) stopSync() {
	if c.sync != nil {
		c.sync.cancel()
		<-c.sync.done
	}
}
