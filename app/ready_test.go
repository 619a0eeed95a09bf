package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/internal/companion"
	"github.com/energyscope/energyscope/localcache"
)

// TestNotReady: while the companion is still starting, the views wait for
// it at most Options.ReadyWait and then answer ErrNotReady in words; once
// the start has finished they answer from it. A Close before the start
// runs keeps it from starting at all.
func TestNotReady(t *testing.T) {
	home := t.TempDir()
	c := newCore(Options{Home: home, SettingsFile: t.TempDir() + "/s.json", Port: -1, ReadyWait: 50 * time.Millisecond})
	a := newApp(c)
	if _, err := c.companion(); !errors.Is(err, ErrNotReady) {
		t.Fatalf("companion before the start: %v, want ErrNotReady", err)
	}
	want := words(ErrNotReady)
	for what, msg := range map[string]string{
		"hello": a.Shell.Hello().Error, "status": a.Status.Status().Error, "sync": a.Sync.SyncProgress().Error,
		"search": a.Explorer.Search("x").Error, "series": a.Explorer.Series("x", "", "", "", "").Error,
		"export": a.Export.Export(ExportRequest{Series: []string{"x"}, Path: "/tmp/x.xlsx"}).Error,
		"excel":  a.Excel.ExcelInfo().Error, "settings": a.Settings.GetSettings().Error,
		"save":     a.Settings.SaveSettings(Settings{Server: "http://127.0.0.1:1"}).Error,
		"datasets": a.Sync.SetDatasets([]string{"x"}).Error,
	} {
		if msg != want {
			t.Errorf("%s before the start: %q, want %q", what, msg, want)
		}
	}
	// Nothing was saved while the start was pending.
	if s, err := companion.LoadSettings(c.settings); err != nil || s.Server != "" {
		t.Fatalf("settings saved before the start: %+v %v", s, err)
	}

	// A start that ends while a method waits: the method answers from it.
	c.opts.ReadyWait = time.Minute
	done := make(chan Status)
	go func() { done <- a.Status.Status() }()
	time.Sleep(20 * time.Millisecond)
	go c.start(c.loadSettings())
	if st := <-done; st.Error != "" || st.Home != home {
		t.Fatalf("status once started: %+v", st)
	}
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Close before the start: the start opens nothing, the home stays free.
	c2 := newCore(Options{Home: home, SettingsFile: t.TempDir() + "/s.json", Port: -1})
	a2 := newApp(c2)
	if err := a2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	c2.start(c2.loadSettings())
	if _, err := c2.companion(); err == nil || errors.Is(err, ErrNotReady) {
		t.Fatalf("companion after Close: %v", err)
	}
	st, err := localcache.Open(home, nil)
	if err != nil {
		t.Fatalf("home held after Close before the start: %v", err)
	}
	st.Close()
	if !strings.Contains(want, "still opening") || want != words(fmt.Errorf("%w after 1s", ErrNotReady)) {
		t.Fatalf("words(ErrNotReady) = %q", want)
	}
}
