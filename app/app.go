// Package app is the desktop app's Go side: the structs whose methods the
// Wails window calls, one per view, the DTOs they return, and the seam to
// Wails' runtime (Runtime).
//
// An App runs a companion (internal/companion: the home's store, the
// localhost bridge for Excel, the sync engine) in a core that every view
// shares, and binds one struct per view of the frontend: Shell (the first
// call and the first view with data), StatusView, SyncView, ExplorerView
// (search, browse, series, compare, formulas), ExportView, ExcelView and
// SettingsView; the frontend calls window.go.app.<View>.<Method>
// (frontend/src/api.ts). Every bound method returns a DTO and never a Go
// error: failures are sentences in the DTO's Error field (words.go).
//
// The companion starts in the background while the window builds: the
// core's ready channel is closed once the first start has finished (or
// failed), and every method that needs the companion waits for it, at most
// Options.ReadyWait, after which it answers ErrNotReady in words.
//
// Only the files with the desktop build tag import Wails (wails.go), so
// that the package builds and tests without GTK; the root main.go starts
// the window and binds App.Bind(). App itself is not bound: its methods
// (Bind, SetRuntime, Close) are the lifecycle, and Wails binds every
// exported method of what it is given.
package app

import (
	"context"
	"log/slog"
	"time"
)

// Limits of what one call returns.
const (
	// SearchLimit is how many hits Search returns.
	SearchLimit = 50
	// MaxPoints bounds the points Series returns (the most recent ones):
	// the chart and the table stay responsive.
	MaxPoints = 500_000
)

// Events sent to the frontend.
const (
	EventSync   = "sync:progress"   // data: Sync
	EventExport = "export:progress" // data: ExportProgress
	EventStatus = "status:changed"  // no data: the store's datasets changed
	EventSeries = "series:changed"  // data: SeriesChanged, the series a delta touched
)

// Version is the app's version, shown in the window.
var Version = "dev"

// Options configure New.
type Options struct {
	// Home overrides the settings' home (--home, ES_HOME).
	Home string
	// SettingsFile is where settings are read and saved; empty is
	// companion.SettingsPath().
	SettingsFile string
	// Port overrides the settings' bridge port when not zero; negative
	// means any free port (tests).
	Port int
	// Logger receives the app's log; nil discards.
	Logger *slog.Logger
	// Runtime until SetRuntime; nil is a runtime without a window.
	Runtime Runtime
	// OpenSeries is a series the Explorer shows at start (--open).
	OpenSeries string
	// Compare are series the Explorer draws beside OpenSeries at start
	// (--compare), at most MaxCompare-1.
	Compare []string
	// ReadyFile, if set, receives the milliseconds from Started to the
	// frontend's first view with data (Ready), for the smoke test.
	ReadyFile string
	// Started is when the process started; zero is New's time.
	Started time.Time
	// Now is the clock of relative dates ("-1Y", "today"); nil is time.Now.
	Now func() time.Time
	// OpenPath shows a folder in the file manager (OpenFolder); nil is the
	// platform's (xdg-open, explorer, open).
	OpenPath func(dir string) error
	// ReadyWait bounds how long a bound method waits for the companion to
	// finish starting before it answers ErrNotReady in words; zero is
	// DefaultReadyWait.
	ReadyWait time.Duration
}

// DefaultReadyWait is how long a bound method waits for the companion to
// start (Options.ReadyWait). Opening a home takes milliseconds to a few
// seconds (the store maps its snapshots and replays its WAL); the bound is
// there so that a start that hangs shows as a sentence, not as a view that
// never fills.
const DefaultReadyWait = 30 * time.Second

// App is the desktop app: one shared core (the companion, the settings,
// the runtime) and the views bound to the window over it. Go callers
// (main.go, tests) reach a view's methods through its field.
type App struct {
	core *core

	Shell    *Shell
	Status   *StatusView
	Sync     *SyncView
	Explorer *ExplorerView
	Export   *ExportView
	Excel    *ExcelView
	Settings *SettingsView
}

// New loads the settings and starts the companion in the background
// (methods wait for it, Options.ReadyWait at most). It does not fail: a
// companion that cannot start (the home is in use, say) leaves the app
// running with the reason in Status().Error, so that Settings can fix it.
func New(o Options) *App {
	c := newCore(o)
	s := c.loadSettings()
	// The companion (the store, the bridge's certificates, the sync) starts
	// while Wails builds the window and the web view loads the page,
	// instead of before; c.ready is closed when it is up or has failed.
	go c.start(s)
	return newApp(c)
}

// newApp builds the views over c.
func newApp(c *core) *App {
	a := &App{
		core:     c,
		Status:   &StatusView{c},
		Sync:     &SyncView{c},
		Explorer: &ExplorerView{c},
		Export:   &ExportView{core: c},
		Excel:    &ExcelView{c},
		Settings: &SettingsView{c},
	}
	a.Shell = &Shell{core: c, status: a.Status, explorer: a.Explorer}
	return a
}

// Bind is what the window binds (Wails' options.App.Bind): one struct per
// view, each named in JavaScript by its type (window.go.app.StatusView).
func (a *App) Bind() []any {
	return []any{a.Shell, a.Status, a.Sync, a.Explorer, a.Export, a.Excel, a.Settings}
}

// SetRuntime attaches the window's runtime (from Wails' OnStartup).
func (a *App) SetRuntime(r Runtime) { a.core.rt.Store(&r) }

// Close stops the companion (from Wails' OnShutdown). It waits for a
// companion that is starting, then stops it; one not started yet never starts.
func (a *App) Close(ctx context.Context) error { return a.core.close(ctx) }
