//go:build desktop

// Command energyscope is the EnergyScope desktop app: a window over the
// companion (the local store, the Excel bridge, the sync engine). Build it
// with the tags Wails needs, as ARCHITECTURE.md says:
//
//	go build -tags desktop,production,webkit2_41 -o bin/energyscope .   # Linux
//	GOOS=windows go build -tags desktop,production -ldflags -H=windowsgui -o bin/energyscope.exe .
//
// Flags: --home DIR (default $ES_HOME, then the saved settings, then the
// user's data directory), --port N (the bridge's port; default from the
// settings), --open SERIES (show it in the Explorer at start), --compare
// A,B (draw those beside it). The
// environment variable ES_READY_FILE names a file that receives the time
// from start to the first view with data (the smoke test reads it).
package main

import (
	"context"
	"embed"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/wailsapp/wails/v2"
	"github.com/wailsapp/wails/v2/pkg/options"
	"github.com/wailsapp/wails/v2/pkg/options/assetserver"
	"github.com/wailsapp/wails/v2/pkg/options/linux"
	"github.com/wailsapp/wails/v2/pkg/options/mac"
	"github.com/wailsapp/wails/v2/pkg/options/windows"

	"github.com/energyscope/energyscope/app"
)

//go:embed all:frontend/dist
var assets embed.FS

// appIcon is the window's icon on Linux. On Windows the exe's icon, manifest
// and version resource come from rsrc_windows_amd64.syso (the Makefile's
// dist target says how it is made).
//
//go:embed build/appicon.png
var appIcon []byte

// splitList is a comma-separated list without its empty items.
func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

func main() {
	started := time.Now()
	fl := flag.NewFlagSet("energyscope", flag.ContinueOnError)
	home := fl.String("home", os.Getenv("ES_HOME"), "data folder (env ES_HOME; default: the saved settings, else the user's data directory)")
	port := fl.Int("port", 0, "bridge port on 127.0.0.1 (default: the saved settings, else 17825; -1: any free port)")
	open := fl.String("open", "", "series to show in the Explorer at start")
	compare := fl.String("compare", "", "series to compare with --open on its chart, comma-separated (at most 7)")
	verbose := fl.Bool("v", false, "log to stderr")
	if err := fl.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	dist, err := fs.Sub(assets, "frontend/dist")
	if err != nil {
		fmt.Fprintln(os.Stderr, "energyscope:", err)
		os.Exit(1)
	}

	a := app.New(app.Options{
		Home: *home, Port: *port, Logger: log, OpenSeries: *open, Compare: splitList(*compare),
		ReadyFile: os.Getenv("ES_READY_FILE"), Started: started,
	})
	err = wails.Run(&options.App{
		Title:            "EnergyScope",
		Width:            1280,
		Height:           820,
		MinWidth:         900,
		MinHeight:        600,
		BackgroundColour: options.NewRGB(0x16, 0x1a, 0x22),
		AssetServer:      &assetserver.Options{Assets: dist},
		OnStartup: func(ctx context.Context) {
			log.Debug("window starting", "ms", time.Since(started).Milliseconds())
			a.SetRuntime(app.WailsRuntime(ctx))
		},
		OnDomReady: func(context.Context) { log.Debug("page loaded", "ms", time.Since(started).Milliseconds()) },
		OnShutdown: func(context.Context) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := a.Close(ctx); err != nil {
				log.Error("shut down", "err", err)
			}
		},
		// One struct per view: window.go.app.<View>.<Method> in the page.
		Bind:    a.Bind(),
		Linux:   &linux.Options{ProgramName: "energyscope", Icon: appIcon, WebviewGpuPolicy: linux.WebviewGpuPolicyNever},
		Windows: &windows.Options{Theme: windows.SystemDefault},
		Mac:     &mac.Options{Appearance: mac.DefaultAppearance},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "energyscope:", err)
		os.Exit(1)
	}
}
