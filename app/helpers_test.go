package app_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/energyscope/energyscope/app"
	"github.com/energyscope/energyscope/internal/testhome"
)

// event is one EventsEmit.
type event struct {
	Name string
	Data []any
}

// recRuntime records what the app asks of the Wails runtime.
type recRuntime struct {
	mu       sync.Mutex
	events   []event
	clip     []string
	savePath string // SaveFileDialog's answer
	notify   func(event)
}

func (r *recRuntime) EventsEmit(name string, data ...any) {
	r.mu.Lock()
	e := event{name, data}
	r.events = append(r.events, e)
	fn := r.notify
	r.mu.Unlock()
	if fn != nil {
		fn(e)
	}
}

func (r *recRuntime) ClipboardSetText(text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clip = append(r.clip, text)
	return nil
}

func (r *recRuntime) SaveFileDialog(title, dir, name string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.savePath, nil
}

func (r *recRuntime) OpenDirectoryDialog(title, dir string) (string, error) { return "", nil }

func (r *recRuntime) named(name string) []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []event
	for _, e := range r.events {
		if e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// views is an App with every bound view embedded, so that a test calls
// a.Status() as the frontend calls window.go.app.StatusView.Status().
type views struct {
	App *app.App
	*app.Shell
	*app.StatusView
	*app.SyncView
	*app.ExplorerView
	*app.ExportView
	*app.ExcelView
	*app.SettingsView
}

func viewsOf(a *app.App) views {
	return views{a, a.Shell, a.Status, a.Sync, a.Explorer, a.Export, a.Excel, a.Settings}
}

// testApp is an App over a home of the cooked samples, with its own
// settings file, a free bridge port and a recording runtime.
type testApp struct {
	views
	home, settings string
	rt             *recRuntime

	openMu sync.Mutex
	opened []string // folders OpenFolder showed
}

func (ta *testApp) openedDirs() []string {
	ta.openMu.Lock()
	defer ta.openMu.Unlock()
	return append([]string{}, ta.opened...)
}

// fixedNow is "today" for relative dates in the tests.
var fixedNow = time.Date(2024, 6, 15, 12, 0, 0, 0, time.UTC)

func newTestApp(t testing.TB) *testApp {
	t.Helper()
	home := t.TempDir()
	testhome.CookSamples(t, home)
	return openTestApp(t, home)
}

func openTestApp(t testing.TB, home string) *testApp {
	t.Helper()
	settings := filepath.Join(t.TempDir(), "EnergyScope", "settings.json")
	rt := &recRuntime{}
	ta := &testApp{home: home, settings: settings, rt: rt}
	a := app.New(app.Options{Home: home, SettingsFile: settings, Port: -1, Runtime: rt, Now: func() time.Time { return fixedNow },
		OpenPath: func(dir string) error {
			ta.openMu.Lock()
			ta.opened = append(ta.opened, dir)
			ta.openMu.Unlock()
			return nil
		}})
	ta.views = viewsOf(a)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return ta
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
