//go:build desktop

package app

import (
	"context"

	wruntime "github.com/wailsapp/wails/v2/pkg/runtime"
)

// WailsRuntime is the Runtime of the window whose context Wails passed to
// OnStartup.
func WailsRuntime(ctx context.Context) Runtime { return wailsRuntime{ctx} }

type wailsRuntime struct{ ctx context.Context }

func (w wailsRuntime) EventsEmit(name string, data ...any) {
	wruntime.EventsEmit(w.ctx, name, data...)
}

func (w wailsRuntime) ClipboardSetText(text string) error {
	return wruntime.ClipboardSetText(w.ctx, text)
}

func (w wailsRuntime) SaveFileDialog(title, dir, name string) (string, error) {
	return wruntime.SaveFileDialog(w.ctx, wruntime.SaveDialogOptions{
		Title: title, DefaultDirectory: dir, DefaultFilename: name,
		Filters: []wruntime.FileFilter{{DisplayName: "Excel workbook (*.xlsx)", Pattern: "*.xlsx"}},
	})
}

func (w wailsRuntime) OpenDirectoryDialog(title, dir string) (string, error) {
	return wruntime.OpenDirectoryDialog(w.ctx, wruntime.OpenDialogOptions{
		Title: title, DefaultDirectory: dir, CanCreateDirectories: true,
	})
}
