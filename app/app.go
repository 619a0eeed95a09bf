// Package app is the desktop app's Go side: the struct whose methods the
// Wails window calls (App), the DTOs they return, and the seam to Wails'
// runtime (Runtime).
//
// An App runs a companion (internal/companion: the home's store, the
// localhost bridge for Excel, the sync engine) and answers the frontend's
// views: Status, Sync, Explorer (Search, Info, Series, Formula), Export,
// Excel and Settings. Every bound method returns a DTO and never a Go
// error: failures are sentences in the DTO's Error field (words.go).
//
// Only the files with the desktop build tag import Wails (wails.go), so
// that the package builds and tests without GTK; the root main.go starts
// the window. Lifecycle functions (New, SetRuntime, Close) are not methods,
// because Wails binds every exported method of App.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/energyscope/energyscope/functions"
	"github.com/energyscope/energyscope/functions/bridge"
	"github.com/energyscope/energyscope/functions/xlsx"
	"github.com/energyscope/energyscope/internal/companion"
	"github.com/energyscope/energyscope/internal/wiring"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/sync/client"
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
}

// App is bound to the Wails window: its exported methods are the
// frontend's API (window.go.app.App.*).
type App struct {
	opts     Options
	log      *slog.Logger
	settings string // the settings file
	rt       atomic.Pointer[Runtime]

	mu       sync.RWMutex // guards comp, startErr, cfg
	comp     *companion.Companion
	startErr error              // why comp is nil
	cfg      companion.Settings // the settings comp runs with (Home resolved)

	exportMu  sync.Mutex // one export at a time
	readyOnce sync.Once
	emitMu    sync.Mutex // guards lastSync
	lastSync  time.Time  // when the last sync event was sent
	watch     func()     // cancels the store watch; guarded by mu
	facets    facetCache // per dataset snapshot, for Facets and Browse
}

// New loads the settings and starts the companion in the background
// (methods wait for it). It does not fail: a companion that cannot start
// (the home is in use, say) leaves the app running with the reason in
// Status().Error, so that Settings can fix it.
func New(o Options) *App {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Started.IsZero() {
		o.Started = time.Now()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	a := &App{opts: o, log: o.Logger, settings: o.SettingsFile}
	rt := o.Runtime
	if rt == nil {
		rt = nopRuntime{}
	}
	a.rt.Store(&rt)
	if a.settings == "" {
		if p, err := companion.SettingsPath(); err == nil {
			a.settings = p
		}
	}
	var s companion.Settings
	if a.settings != "" {
		var err error
		if s, err = companion.LoadSettings(a.settings); err != nil {
			a.log.Warn("settings not read; using defaults", "err", err)
			s = companion.Settings{}
		}
	}
	s = a.withFolder(s)
	// The companion (the store, the bridge's certificates, the sync) starts
	// while Wails builds the window and the web view loads the page,
	// instead of before. Every method that reads it takes a.mu, which this
	// goroutine holds until the companion is up (a locked RWMutex may be
	// unlocked by another goroutine).
	a.mu.Lock()
	go func() {
		defer a.mu.Unlock()
		a.startLocked(s)
		a.log.Debug("companion started", "ms", time.Since(o.Started).Milliseconds())
	}()
	return a
}

// SetRuntime attaches the window's runtime (from Wails' OnStartup).
func SetRuntime(a *App, r Runtime) { a.rt.Store(&r) }

// Close stops the companion (from Wails' OnShutdown).
func Close(ctx context.Context, a *App) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stopLocked(ctx)
}

func (a *App) runtime() Runtime { return *a.rt.Load() }

// home is the home directory for settings s: the override, the saved one,
// or the default.
func (a *App) home(s companion.Settings) string {
	switch {
	case a.opts.Home != "":
		return a.opts.Home
	case s.Home != "":
		return s.Home
	}
	return localcache.DefaultHome()
}

// startLocked starts the companion for settings s; a.mu is held.
func (a *App) startLocked(s companion.Settings) {
	s.Home = a.home(s)
	port := s.BridgePort()
	switch {
	case a.opts.Port < 0:
		port = 0
	case a.opts.Port > 0:
		port = a.opts.Port
	}
	a.cfg = s
	c, err := companion.Start(companion.Config{
		Home: s.Home, Port: port, Server: s.Server, Token: s.Token, Datasets: s.Datasets,
		Bandwidth: s.Bandwidth, Name: "desktop", BridgeOptional: true, Logger: a.log,
	})
	if err != nil {
		a.comp, a.startErr = nil, err
		a.log.Error("companion not started", "home", s.Home, "err", err)
		return
	}
	a.comp, a.startErr = c, nil
	c.OnSyncProgress(func(client.Progress) { a.emitSync() })
	a.watch = c.Store().Watch(func(dataset string, ids []string) {
		if len(ids) == 0 {
			a.facets.drop(dataset) // a new snapshot
		}
		a.runtime().EventsEmit(EventStatus)
		// The Explorer follows the series it shows: it redraws when one of
		// them is named here (a snapshot swap names none: every series).
		a.runtime().EventsEmit(EventSeries, SeriesChanged{Dataset: dataset, IDs: append([]string{}, ids...)})
	})
	if br := c.Bridge(); br != nil {
		// A copy of the add-in's manifest on disk, for sideloading (the
		// Windows installer registers this path).
		if err := writeManifest(s.Home, br.Manifest()); err != nil {
			a.log.Warn("add-in manifest not written", "err", err)
		}
	}
}

// stopLocked stops the companion; a.mu is held.
func (a *App) stopLocked(ctx context.Context) error {
	if a.comp == nil {
		return nil
	}
	if a.watch != nil {
		a.watch()
		a.watch = nil
	}
	err := a.comp.Close(ctx)
	a.comp = nil
	return err
}

// companion returns the running companion or why there is none.
func (a *App) companion() (*companion.Companion, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.comp == nil {
		if a.startErr != nil {
			return nil, a.startErr
		}
		return nil, errNotStarted
	}
	return a.comp, nil
}

// store returns the running store.
func (a *App) store() (*localcache.Store, error) {
	c, err := a.companion()
	if err != nil {
		return nil, err
	}
	return c.Store(), nil
}

// emitSync sends the sync progress, at most 10 times a second. It is the
// engine's progress callback, so it must not wait for a.mu: SetDatasets
// and SaveSettings hold a.mu while they stop the engine, which waits for
// its callback to return. The event goes from a goroutine of its own.
func (a *App) emitSync() {
	a.emitMu.Lock()
	if time.Since(a.lastSync) < 100*time.Millisecond {
		a.emitMu.Unlock()
		return
	}
	a.lastSync = time.Now()
	a.emitMu.Unlock()
	go func() { a.runtime().EventsEmit(EventSync, a.SyncProgress()) }()
}

// Hello tells the frontend where it is, with the data of the view it
// opens on (the Status, or the series of --open in the Explorer), so that
// the first view needs no other call before it shows.
func (a *App) Hello() Hello {
	h := Hello{Version: Version, Platform: runtime.GOOS, OpenSeries: a.opts.OpenSeries, Compare: []string{}}
	for _, c := range a.opts.Compare {
		if c = strings.TrimSpace(c); c != "" && len(h.Compare) < MaxCompare-1 {
			h.Compare = append(h.Compare, c)
		}
	}
	a.log.Info("frontend connected", "ms", time.Since(a.opts.Started).Milliseconds())
	a.mu.RLock()
	h.Home = a.cfg.Home
	if a.startErr != nil {
		h.Error = words(a.startErr)
	}
	a.mu.RUnlock()
	if h.Error != "" {
		return h
	}
	if ref := strings.TrimSpace(h.OpenSeries); ref != "" {
		o := &Opened{Info: a.Info(ref)}
		if o.Info.Error == "" {
			full := o.Info.Dataset + ":" + o.Info.ID
			o.Series = a.Series(full, "", "", "", "")
			o.Formula = a.Formula(o.Info.Ref, "", "", GetOptions{})
		}
		h.Open = o
	} else {
		st := a.Status()
		h.Status = &st
	}
	return h
}

// Ready is called by the frontend once it shows data for the first time.
// It records the start-up time (ReadyFile) and returns it in ms.
func (a *App) Ready(view string) int64 {
	ms := time.Since(a.opts.Started).Milliseconds()
	a.readyOnce.Do(func() {
		a.log.Info("first view with data", "view", view, "ms", ms)
		if a.opts.ReadyFile != "" {
			if err := os.WriteFile(a.opts.ReadyFile, fmt.Appendf(nil, "%d %s\n", ms, view), 0o644); err != nil {
				a.log.Warn("ready file", "err", err)
			}
		}
		// Build the datasets' search indexes now that the window shows
		// (about 0.2 s for 175K series), rather than on the first
		// keystroke in the Explorer.
		go func() {
			if st, err := a.store(); err == nil {
				t := time.Now()
				st.Search("e", 1)
				a.log.Debug("search index built", "ms", time.Since(t).Milliseconds())
			}
		}()
	})
	return ms
}

// Status describes the store, the sync and the bridge.
func (a *App) Status() Status {
	c, err := a.companion()
	a.mu.RLock()
	st := Status{Home: a.cfg.Home, Server: a.cfg.Server, Datasets: []Dataset{}}
	a.mu.RUnlock()
	if err != nil {
		st.Error = words(err)
		st.Bridge.Error = "The bridge is not running."
		return st
	}
	ds, err := c.Store().Status()
	if err != nil {
		st.Error = words(err)
		return st
	}
	prog := map[string]client.DatasetProgress{}
	if eng := c.Engine(); eng != nil {
		p := eng.Progress()
		st.Online, st.Paused = p.Online, p.Paused
		if p.LastError != "" && !p.Online {
			st.LastError = syncWords(p.Err)
		}
		for _, d := range p.Datasets {
			prog[d.Dataset] = d
		}
	}
	for _, d := range ds {
		dd := Dataset{
			Name: d.Name, SnapshotID: d.Manifest.SnapshotID, Epoch: d.Manifest.Epoch, Seq: d.Seq,
			Series: int64(d.Manifest.Series), Rows: d.Manifest.Rows, PendingRows: d.DeltaRows,
			CreatedMS: d.Manifest.Created.UnixMilli(), State: client.StateOffline.String(),
			DiskBytes: diskUse(c.Store().DatasetDir(d.Name)),
		}
		if d.LastSync > 0 {
			dd.LastSyncMS = d.LastSync / 1e6
		}
		if p, ok := prog[d.Name]; ok {
			dd.State, dd.HeadSeq, dd.Lag = p.State.String(), p.HeadSeq, storeLag(p.HeadSeq, d.Seq, p.Lag)
			if !p.LastSync.IsZero() && p.LastSync.UnixMilli() > dd.LastSyncMS {
				dd.LastSyncMS = p.LastSync.UnixMilli()
			}
		}
		st.Series += dd.Series
		st.Rows += dd.Rows
		st.DiskBytes += dd.DiskBytes
		st.Datasets = append(st.Datasets, dd)
	}
	if br := c.Bridge(); br != nil {
		st.Bridge = Bridge{Running: true, URL: br.URL()}
	} else {
		st.Bridge.Error = words(c.BridgeErr())
	}
	return st
}

// storeLag is how far the store at seq is behind the server's head, from the
// store's seq rather than the sync engine's last report: the store is what
// the views read. Without a head (0) the engine's lag stands.
func storeLag(head, seq, engineLag uint64) uint64 {
	if head == 0 {
		return engineLag
	}
	if seq >= head {
		return 0
	}
	return head - seq
}

// diskUse is the size of the files under dir.
func diskUse(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// SyncProgress is the sync engine's progress per dataset.
func (a *App) SyncProgress() Sync {
	c, err := a.companion()
	a.mu.RLock()
	out := Sync{Server: a.cfg.Server, Configured: a.cfg.Server != "", Subscribed: slices.Clone(a.cfg.Datasets), Datasets: []SyncDataset{}}
	a.mu.RUnlock()
	if out.Subscribed == nil {
		out.Subscribed = []string{}
	}
	if err != nil {
		out.Error = words(err)
		return out
	}
	local := map[string]bool{}
	for _, n := range c.Store().DatasetNames() {
		local[n] = true
	}
	seen := map[string]bool{}
	if eng := c.Engine(); eng != nil {
		p := eng.Progress()
		out.Online, out.Paused = p.Online, p.Paused
		if !p.LastSync.IsZero() {
			out.LastSyncMS = p.LastSync.UnixMilli()
		}
		if p.LastError != "" && !p.Online {
			out.LastError = syncWords(p.Err)
		}
		for _, d := range p.Datasets {
			seq, lag := d.Seq, d.Lag
			if local[d.Dataset] {
				// The store's own seq, not the engine's last report of it: the
				// engine's figure could lag the store by seconds.
				if _, _, s, err := c.Store().State(d.Dataset); err == nil {
					seq = max(seq, s)
					lag = storeLag(d.HeadSeq, seq, d.Lag)
				}
			}
			sd := SyncDataset{
				Name: d.Dataset, State: d.State.String(), Local: local[d.Dataset], Seq: seq, HeadSeq: d.HeadSeq, Lag: lag,
				File: d.File, BytesDone: d.BytesDone, BytesTotal: d.BytesTotal, Rate: d.RateBytesPerS, ETASeconds: d.ETA.Seconds(),
			}
			if !d.LastSync.IsZero() {
				sd.LastSyncMS = d.LastSync.UnixMilli()
			}
			seen[d.Dataset] = true
			out.Datasets = append(out.Datasets, sd)
		}
	}
	// Local datasets the engine does not (yet) report.
	for _, n := range c.Store().DatasetNames() {
		if !seen[n] {
			_, _, seq, _ := c.Store().State(n)
			out.Datasets = append(out.Datasets, SyncDataset{Name: n, State: client.StateOffline.String(), Local: true, Seq: seq})
		}
	}
	slices.SortFunc(out.Datasets, func(x, y SyncDataset) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// Pause stops syncing until Resume; the local data keeps serving.
func (a *App) Pause() Sync {
	if c, err := a.companion(); err == nil && c.Engine() != nil {
		c.Engine().Pause()
	}
	return a.SyncProgress()
}

// Resume reconnects after Pause.
func (a *App) Resume() Sync {
	if c, err := a.companion(); err == nil && c.Engine() != nil {
		c.Engine().Resume()
	}
	return a.SyncProgress()
}

// SetDatasets changes the datasets to sync (empty: all of the server's),
// saves them in the settings and restarts the sync. Datasets dropped stay
// on disk and keep serving, but are no longer updated.
func (a *App) SetDatasets(names []string) Sync {
	s, err := a.savedSettings()
	if err != nil {
		return Sync{Error: words(err), Datasets: []SyncDataset{}, Subscribed: []string{}}
	}
	s.Datasets = names
	s = s.Normalize()
	if err := s.Validate(); err != nil {
		out := a.SyncProgress()
		out.Error = words(err)
		return out
	}
	if err := a.save(s); err != nil {
		out := a.SyncProgress()
		out.Error = words(err)
		return out
	}
	a.mu.Lock()
	a.cfg.Datasets = slices.Clone(s.Datasets)
	c := a.comp
	var serr error
	if c != nil {
		serr = c.SetSync(a.cfg.Server, a.cfg.Token, a.cfg.Datasets)
	}
	a.mu.Unlock()
	out := a.SyncProgress()
	if serr != nil {
		out.Error = words(serr)
	}
	return out
}

// Search finds series by id or name across every dataset.
func (a *App) Search(q string) SearchResult {
	out := SearchResult{Query: q, Hits: []SearchHit{}}
	st, err := a.store()
	if err != nil {
		out.Error = words(err)
		return out
	}
	if strings.TrimSpace(q) == "" {
		return out
	}
	start := time.Now()
	hits, err := st.Search(q, SearchLimit+1)
	if err != nil {
		out.Error = words(err)
		return out
	}
	if len(hits) > SearchLimit {
		hits, out.More = hits[:SearchLimit], true
	}
	for _, h := range hits {
		hit := SearchHit{ID: h.ID, Dataset: h.Dataset, Name: h.Name}
		if in, err := st.Info(h.Dataset + ":" + h.ID); err == nil {
			hit.Unit, hit.Frequency, hit.Source = in.Unit, string(in.Frequency), in.Source
		}
		out.Hits = append(out.Hits, hit)
	}
	out.Micros = time.Since(start).Microseconds()
	return out
}

// Info describes one series ("id" or "dataset:id").
func (a *App) Info(id string) Info {
	id = strings.TrimSpace(id)
	out := Info{ID: id, Latest: Float(math.NaN())}
	st, err := a.store()
	if err != nil {
		out.Error = words(err)
		return out
	}
	in, err := st.Info(id)
	if err != nil {
		out.Error = seriesWords(id, err)
		return out
	}
	out = Info{
		ID: in.ID, Dataset: in.Dataset, Name: in.Name, Unit: in.Unit, Source: in.Source,
		Frequency: string(in.Frequency), FreqName: freqName(string(in.Frequency)),
		Count: in.Count, Latest: Float(in.LatestValue), SnapshotID: in.SnapshotID, Seq: in.Seq, Pending: in.Pending,
		UpdatedMS: in.Updated * 1000,
	}
	if in.Count > 0 {
		out.First, out.Last = in.First, in.Last
	}
	out.Ref = in.ID
	if bare, err := st.Info(in.ID); err != nil || bare.Dataset != in.Dataset {
		out.Ref = in.Dataset + ":" + in.ID
	}
	out.Formula = formulaText(out.Ref, "", "", nil)
	return out
}

// getArgs reads dates and options as ES.Get does.
func (a *App) getArgs(from, to string, o GetOptions) (int64, int64, functions.Options, error) {
	now := a.opts.Now()
	f, err := functions.ParseDate(from, now, false)
	if err != nil {
		return 0, 0, functions.Options{}, fmt.Errorf("From: %w", err)
	}
	t, err := functions.ParseDate(to, now, true)
	if err != nil {
		return 0, 0, functions.Options{}, fmt.Errorf("To: %w", err)
	}
	if f > t {
		return 0, 0, functions.Options{}, fmt.Errorf("the start %s is after the end %s", strings.TrimSpace(from), strings.TrimSpace(to))
	}
	opts, err := functions.ParseOptions([]any{optionList(o)})
	if err != nil {
		return 0, 0, functions.Options{}, err
	}
	return f, t, opts, nil
}

// optionList is o as ES.Get's key=value arguments, in a fixed order.
func optionList(o GetOptions) []any {
	var out []any
	add := func(k, v string) {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, k+"="+v)
		}
	}
	add("per", o.Per)
	if strings.TrimSpace(o.Per) != "" && !strings.EqualFold(strings.TrimSpace(o.Agg), "last") {
		add("agg", o.Agg)
	}
	if !strings.EqualFold(strings.TrimSpace(o.Fill), "none") {
		add("fill", o.Fill)
	}
	if o.Desc {
		add("order", "desc")
	}
	if o.Headers {
		add("headers", "y")
	}
	if o.Last > 0 {
		add("last", fmt.Sprint(o.Last))
	}
	return out
}

// Series returns the points of series id in [from, to] (any date form
// ES.Get reads; empty is unbounded), re-sampled to per (D W M Q A, empty
// as stored) with agg, exactly as ES.Get computes them.
func (a *App) Series(id, from, to, per, agg string) Series {
	id = strings.TrimSpace(id)
	out := Series{ID: id, Per: strings.ToUpper(strings.TrimSpace(per)), Agg: strings.ToLower(strings.TrimSpace(agg)), Times: []int64{}, Values: Floats{}}
	st, err := a.store()
	if err != nil {
		out.Error = words(err)
		return out
	}
	if id == "" {
		out.Error = "Choose a series first."
		return out
	}
	in, err := st.Info(id)
	if err != nil {
		out.Error = seriesWords(id, err)
		return out
	}
	out.ID, out.Name, out.Unit, out.Frequency = in.ID, in.Name, in.Unit, string(in.Frequency)
	f, t, opts, err := a.getArgs(from, to, GetOptions{Per: per, Agg: agg})
	if err != nil {
		out.Error = words(err)
		return out
	}
	if opts.Per != 0 {
		out.Frequency = string(opts.Per)
		if out.Agg == "" {
			out.Agg = "last"
		}
	}
	eng := &functions.Engine{Src: wiring.Source{Store: st}, Now: a.opts.Now}
	fr, err := eng.Frame([]string{id}, f, t, opts)
	if errors.Is(err, functions.ErrNoData) {
		out.Note = "No data in this range."
		return out
	} else if err != nil {
		out.Error = seriesWords(id, err)
		return out
	}
	n := len(fr.Dates)
	skip := 0
	if n > MaxPoints {
		skip, out.Truncated = n-MaxPoints, true
		out.Note = fmt.Sprintf("Showing the most recent %d of %d points; narrow the range or choose a coarser frequency.", MaxPoints, n)
	}
	out.Times = make([]int64, 0, n-skip)
	out.Values = make(Floats, 0, n-skip)
	fr.Rows(func(i int, date int64, row []float64) error {
		if i >= skip {
			out.Times = append(out.Times, date)
			out.Values = append(out.Values, row[0])
		}
		return nil
	})
	return out
}

// MaxCompare is the most series the Explorer compares on one chart.
const MaxCompare = 8

// Compare is series refs ("id" or "dataset:id", at most MaxCompare) over the
// same dates and options, aligned on the union of their dates as ES.Get
// aligns them: one column of values per series, nulls where a series has no
// point. The chart draws the first unit on the left axis and the second on
// the right; Units lists them in that order.
func (a *App) Compare(refs []string, from, to, per, agg string) Comparison {
	out := Comparison{Times: []int64{}, Series: []Compared{}, Units: []string{}}
	st, err := a.store()
	if err != nil {
		out.Error = words(err)
		return out
	}
	var ids []string
	seen := map[string]bool{}
	for _, r := range refs {
		if r = strings.TrimSpace(r); r != "" && !seen[r] {
			seen[r] = true
			ids = append(ids, r)
		}
	}
	switch {
	case len(ids) == 0:
		out.Error = "Choose a series first."
		return out
	case len(ids) > MaxCompare:
		out.Error = fmt.Sprintf("%d series: the chart compares at most %d.", len(ids), MaxCompare)
		return out
	}
	f, t, opts, err := a.getArgs(from, to, GetOptions{Per: per, Agg: agg})
	if err != nil {
		out.Error = words(err)
		return out
	}
	for _, id := range ids {
		in, err := st.Info(id)
		if err != nil {
			out.Error = seriesWords(id, err)
			return out
		}
		c := Compared{Ref: id, ID: in.ID, Dataset: in.Dataset, Name: in.Name, Unit: in.Unit, Values: Floats{}}
		if !slices.Contains(out.Units, in.Unit) {
			out.Units = append(out.Units, in.Unit)
		}
		c.Axis = min(slices.Index(out.Units, in.Unit), 1)
		out.Series = append(out.Series, c)
	}
	eng := &functions.Engine{Src: wiring.Source{Store: st}, Now: a.opts.Now}
	fr, err := eng.Frame(ids, f, t, opts)
	if errors.Is(err, functions.ErrNoData) {
		out.Note = "No data in this range."
		return out
	} else if err != nil {
		out.Error = words(err)
		return out
	}
	n := len(fr.Dates)
	skip := 0
	if n > MaxPoints {
		skip, out.Truncated = n-MaxPoints, true
		out.Note = fmt.Sprintf("Showing the most recent %d of %d dates; narrow the range or choose a coarser frequency.", MaxPoints, n)
	}
	fr.Rows(func(i int, date int64, row []float64) error {
		if i >= skip {
			out.Times = append(out.Times, date)
			for j, v := range row {
				out.Series[j].Values = append(out.Series[j].Values, v)
			}
		}
		return nil
	})
	if len(out.Units) > 2 {
		out.Note = strings.TrimSpace(out.Note + " More than two units: the third and later share the right-hand axis.")
	}
	return out
}

// OpenFolder shows the folder holding path (a file just exported) in the
// system's file manager.
func (a *App) OpenFolder(path string) Path {
	path = strings.TrimSpace(path)
	if path == "" {
		return Path{Error: "No file to show."}
	}
	dir := path
	if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
		dir = filepath.Dir(path)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return Path{Path: dir, Error: fmt.Sprintf("The folder %s is not there any more.", dir)}
	}
	open := a.opts.OpenPath
	if open == nil {
		open = openPath
	}
	if err := open(dir); err != nil {
		return Path{Path: dir, Error: "Could not open the folder: " + words(err)}
	}
	return Path{Path: dir}
}

// Formula is the =ES.Get(...) text that gives series id in Excel with
// these dates and options, checked by evaluating it as the bridge would.
func (a *App) Formula(id, from, to string, o GetOptions) Formula {
	return a.formula([]string{id}, from, to, o)
}

// CompareFormula is the one =ES.Get(...) that gives the series of a
// comparison side by side, their ids as one comma-separated text.
func (a *App) CompareFormula(refs []string, from, to string, o GetOptions) Formula {
	return a.formula(refs, from, to, o)
}

// formula writes and checks =ES.Get for ids (one, or several joined by
// commas, as ES.Get reads a list).
func (a *App) formula(ids []string, from, to string, o GetOptions) Formula {
	var list []string
	for _, id := range ids {
		id = strings.TrimSpace(id)
		if id == "" {
			continue
		}
		if strings.ContainsAny(id, ",;\"") || len(id) > 255 {
			return Formula{Error: fmt.Sprintf("The id %q cannot be typed into a formula as text; type it into a cell and give ES.Get that cell.", id)}
		}
		list = append(list, id)
	}
	if len(list) == 0 {
		return Formula{Error: "Choose a series first."}
	}
	id := strings.Join(list, ",")
	if len(id) > 255 {
		return Formula{Error: "The ids are longer together than a formula's text may be (255 characters); type them into cells and give ES.Get that range."}
	}
	if _, _, _, err := a.getArgs(from, to, o); err != nil {
		return Formula{Error: words(err)}
	}
	st, err := a.store()
	if err != nil {
		return Formula{Error: words(err)}
	}
	out := Formula{Text: formulaText(id, from, to, optionList(o))}
	args := []any{id, nilIfEmpty(from), nilIfEmpty(to)}
	args = append(args, optionList(o)...)
	eng := &functions.Engine{Src: wiring.Source{Store: st}, Now: a.opts.Now}
	res := eng.Call("ES.Get", args)
	if res.Err != nil {
		out.Error = strings.TrimSuffix(res.Err.Message, ".") + "."
		return out
	}
	out.Rows = len(res.Value)
	if out.Rows > 0 {
		out.Cols = len(res.Value[0])
	}
	return out
}

func nilIfEmpty(s string) any {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return strings.TrimSpace(s)
}

// formulaText writes =ES.Get("id", from, to, "opt", ...) the way the
// workbook export writes its formulas: dates as typed (relative ones stay
// relative), trailing empty arguments left out.
func formulaText(id, from, to string, opts []any) string {
	var b strings.Builder
	b.WriteString("=ES.Get(" + quote(id))
	from, to = strings.TrimSpace(from), strings.TrimSpace(to)
	switch {
	case to != "":
		b.WriteString(",")
		if from != "" {
			b.WriteString(quote(from))
		}
		b.WriteString("," + quote(to))
	case from != "":
		b.WriteString("," + quote(from))
	}
	for _, o := range opts {
		b.WriteString("," + quote(o.(string)))
	}
	b.WriteString(")")
	return b.String()
}

// quote writes s as an Excel text literal.
func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func freqName(f string) string {
	switch f {
	case "H":
		return "hourly"
	case "D":
		return "daily"
	case "W":
		return "weekly"
	case "M":
		return "monthly"
	case "Q":
		return "quarterly"
	case "A":
		return "annual"
	}
	return f
}

// ExportSuggestion is a file name to offer for an export of these series.
func (a *App) ExportSuggestion(series []string) Path {
	name := "energyscope-export.xlsx"
	if len(series) == 1 {
		name = safeName(series[0]) + ".xlsx"
	}
	dir, _ := os.UserHomeDir()
	if d := filepath.Join(dir, "Documents"); dirExists(d) {
		dir = d
	}
	return Path{Path: filepath.Join(dir, name)}
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || strings.ContainsRune(`<>:"/\|?*`, r) {
			return '_'
		}
		return r
	}, s)
}

func dirExists(d string) bool {
	fi, err := os.Stat(d)
	return err == nil && fi.IsDir()
}

// ChooseExportFile asks where to save a workbook, starting from suggested.
func (a *App) ChooseExportFile(suggested string) Path {
	dir, name := filepath.Split(suggested)
	p, err := a.runtime().SaveFileDialog("Export to Excel", dir, name)
	if err != nil {
		return Path{Error: words(err)}
	}
	if p != "" && !strings.EqualFold(filepath.Ext(p), ".xlsx") {
		p += ".xlsx"
	}
	return Path{Path: p}
}

// ChooseFolder asks for a folder (the home, in Settings).
func (a *App) ChooseFolder(start string) Path {
	p, err := a.runtime().OpenDirectoryDialog("Choose the data folder", start)
	if err != nil {
		return Path{Error: words(err)}
	}
	return Path{Path: p}
}

// Export writes a workbook (functions/xlsx), sending EventExport as it
// goes. One export runs at a time.
func (a *App) Export(req ExportRequest) ExportResult {
	if !a.exportMu.TryLock() {
		return ExportResult{Error: "An export is already running; wait for it to finish."}
	}
	defer a.exportMu.Unlock()
	st, err := a.store()
	if err != nil {
		return ExportResult{Error: words(err)}
	}
	path := strings.TrimSpace(req.Path)
	if path == "" {
		return ExportResult{Error: "Choose where to save the workbook."}
	}
	if !filepath.IsAbs(path) {
		return ExportResult{Error: fmt.Sprintf("%q is not a full path; choose the file with Browse.", path)}
	}
	xr := xlsx.Request{
		Series: req.Series, From: req.From, To: req.To, Per: req.Per, Agg: req.Agg, Fill: req.Fill,
		Formulas: req.Formulas, Now: a.opts.Now,
		Provenance: func(id string) (string, uint64) {
			in, err := st.Info(id)
			if err != nil {
				return "", 0
			}
			return in.SnapshotID, in.Seq
		},
	}
	rt := a.runtime()
	var last time.Time
	start := time.Now()
	sum, err := xlsx.ExportFile(path, wiring.Source{Store: st}, xr, func(done, total int) {
		if done == total || time.Since(last) >= 50*time.Millisecond {
			last = time.Now()
			rt.EventsEmit(EventExport, ExportProgress{Done: done, Total: total})
		}
	})
	if err != nil {
		return ExportResult{Error: words(err)}
	}
	return ExportResult{Path: sum.Path, Series: sum.Series, Rows: sum.Rows, Cells: sum.Cells, Bytes: sum.Bytes, Millis: time.Since(start).Milliseconds()}
}

// GetSettings returns the saved settings.
func (a *App) GetSettings() Settings {
	s, err := a.savedSettings()
	out := a.settingsDTO(s)
	if err != nil {
		out.Error = words(err)
	}
	return out
}

func (a *App) settingsDTO(s companion.Settings) Settings {
	a.mu.RLock()
	active := a.cfg.Home
	a.mu.RUnlock()
	ds := slices.Clone(s.Datasets)
	if ds == nil {
		ds = []string{}
	}
	return Settings{
		Server: s.Server, Token: s.Token, Home: s.Home, Port: s.Port, Datasets: ds, Bandwidth: s.Bandwidth,
		File: a.settings, DefaultHome: localcache.DefaultHome(), DefaultPort: bridge.DefaultPort,
		ActiveHome: active, HomeFixed: a.opts.Home != "",
	}
}

func (a *App) savedSettings() (companion.Settings, error) {
	if a.settings == "" {
		return companion.Settings{}, errors.New("no settings folder on this computer")
	}
	s, err := companion.LoadSettings(a.settings)
	if err != nil {
		return s, err
	}
	return a.withFolder(s), nil
}

// withFolder completes the user's settings s with those of the data folder
// they open (companion.FolderSettingsPath): the server, the token and the
// datasets belong to the folder, so that --home other never syncs into a
// folder from another's server by surprise. A user settings file from before
// folder settings still holds them: they stay in effect for the folder it
// names (or the default one) until the next save moves them there, and never
// apply to a folder given by --home or ES_HOME.
func (a *App) withFolder(s companion.Settings) companion.Settings {
	path := companion.FolderSettingsPath(a.home(s))
	f, err := companion.LoadSettings(path)
	if err != nil {
		a.log.Warn("folder settings not read; working offline", "file", path, "err", err)
		return s.WithFolder(companion.Settings{})
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) && a.opts.Home == "" {
		return s // the user file's own, if any
	}
	return s.WithFolder(f)
}

// save writes the folder's part of s into the data folder s opens, then the
// user's part into the user's settings file.
func (a *App) save(s companion.Settings) error {
	if a.settings == "" {
		return errors.New("no settings folder on this computer")
	}
	user, folder := s.Split()
	if err := companion.SaveSettings(companion.FolderSettingsPath(a.home(s)), folder); err != nil {
		return err
	}
	return companion.SaveSettings(a.settings, user)
}

// SaveSettings validates and saves the settings and applies them: a new
// server, token or dataset list restarts the sync; a new home, port or
// bandwidth restarts the companion.
func (a *App) SaveSettings(in Settings) Settings {
	s := companion.Settings{Server: in.Server, Token: in.Token, Home: in.Home, Port: in.Port, Datasets: in.Datasets, Bandwidth: in.Bandwidth}.Normalize()
	if err := s.Validate(); err != nil {
		out := a.settingsDTO(s)
		out.Error = words(err)
		return out
	}
	if err := a.save(s); err != nil {
		out := a.settingsDTO(s)
		out.Error = words(err)
		return out
	}
	a.mu.Lock()
	old := a.cfg
	home := a.home(s)
	msg := "Saved."
	switch {
	case a.comp == nil || home != old.Home || s.BridgePort() != old.BridgePort() || s.Bandwidth != old.Bandwidth:
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		a.stopLocked(ctx)
		cancel()
		a.startLocked(s)
		msg = "Saved; restarted with the new settings."
	case s.Server != old.Server || s.Token != old.Token || !slices.Equal(s.Datasets, old.Datasets):
		a.cfg.Server, a.cfg.Token, a.cfg.Datasets = s.Server, s.Token, slices.Clone(s.Datasets)
		a.comp.SetSync(s.Server, s.Token, s.Datasets)
		msg = "Saved; sync restarted."
		if s.Server == "" {
			msg = "Saved; working offline."
		}
	}
	startErr := a.startErr
	a.mu.Unlock()
	if s.Home != "" && a.opts.Home != "" && s.Home != a.opts.Home {
		msg += " The data folder given at start (--home or ES_HOME) stays in use until the app is started without it."
	}
	out := a.settingsDTO(s)
	out.Message = msg
	if startErr != nil {
		out.Error = words(startErr)
	}
	a.runtime().EventsEmit(EventStatus)
	return out
}

// writeManifest keeps <home>/addin/manifest.xml equal to the bridge's.
func writeManifest(home string, b []byte) error {
	p := manifestPath(home)
	if old, err := os.ReadFile(p); err == nil && string(old) == string(b) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, b, 0o644)
}

func manifestPath(home string) string { return filepath.Join(home, "addin", "manifest.xml") }
