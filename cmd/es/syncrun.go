package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/energyscope/energyscope/internal/wiring"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/sync/client"
)

// syncConfig is what es companion and the demo pass to startSync.
type syncConfig struct {
	server, token string
	datasets      []string
	bandwidth     int64
	name          string
	log           *slog.Logger
}

// startSync runs the sync engine in the background until ctx ends. The
// returned channel closes when it has stopped.
func startSync(ctx context.Context, st *localcache.Store, c syncConfig) (*client.Engine, <-chan struct{}) {
	eng := client.New(wiring.Sink{Store: st}, client.Options{
		Server: c.server, Token: c.token, Datasets: c.datasets, BandwidthLimit: c.bandwidth, Name: c.name, Logger: c.log,
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		eng.Run(ctx)
	}()
	return eng, done
}

// progressDisplay redraws one line per dataset on a terminal (at most 5
// times a second) and prints nothing otherwise.
func progressDisplay(w io.Writer, eng *client.Engine) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return
	}
	var mu sync.Mutex
	var last time.Time
	lines := 0
	eng.OnProgress(func(p client.Progress) {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) < 200*time.Millisecond {
			return
		}
		last = time.Now()
		var b strings.Builder
		if lines > 0 {
			fmt.Fprintf(&b, "\033[%dA", lines)
		}
		state := "online"
		if !p.Online {
			state = "offline"
		}
		if p.Paused {
			state = "paused"
		}
		fmt.Fprintf(&b, "\033[K%s %s\n", p.Server, state)
		for _, d := range p.Datasets {
			fmt.Fprintf(&b, "\033[K  %-12s %-12s seq %d lag %d", d.Dataset, d.State.String(), d.Seq, d.Lag)
			if d.State == client.StateDownloading && d.BytesTotal > 0 {
				fmt.Fprintf(&b, "  %s/%s %.1f MB/s eta %s", humanBytes(d.BytesDone), humanBytes(d.BytesTotal), d.RateBytesPerS/1e6, d.ETA.Round(time.Second))
			}
			b.WriteString("\n")
		}
		lines = 1 + len(p.Datasets)
		io.WriteString(w, b.String())
	})
}
