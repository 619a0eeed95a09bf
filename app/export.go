package app

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/energyscope/energyscope/functions/xlsx"
	"github.com/energyscope/energyscope/internal/wiring"
)

// ExportView is bound for the Export view: where to save, the workbook
// export with its progress (EventExport), and showing the file's folder.
type ExportView struct {
	*core
	exportMu sync.Mutex // one export at a time
}

// OpenFolder shows the folder holding path (a file just exported) in the
// system's file manager.
func (v *ExportView) OpenFolder(path string) Path {
	path = strings.TrimSpace(path)
	if path == "" {
		return Path{Error: "No file to show."}
	}
	dir := path
	if !dirExists(path) {
		dir = filepath.Dir(path)
	}
	if !dirExists(dir) {
		return Path{Path: dir, Error: fmt.Sprintf("The folder %s is not there any more.", dir)}
	}
	open := v.opts.OpenPath
	if open == nil {
		open = openPath
	}
	if err := open(dir); err != nil {
		return Path{Path: dir, Error: "Could not open the folder: " + words(err)}
	}
	return Path{Path: dir}
}

// ExportSuggestion is a file name to offer for an export of these series.
func (v *ExportView) ExportSuggestion(series []string) Path {
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
func (v *ExportView) ChooseExportFile(suggested string) Path {
	dir, name := filepath.Split(suggested)
	p, err := v.runtime().SaveFileDialog("Export to Excel", dir, name)
	if err != nil {
		return Path{Error: words(err)}
	}
	if p != "" && !strings.EqualFold(filepath.Ext(p), ".xlsx") {
		p += ".xlsx"
	}
	return Path{Path: p}
}

// Export writes a workbook (functions/xlsx), sending EventExport as it
// goes. One export runs at a time.
func (v *ExportView) Export(req ExportRequest) ExportResult {
	if !v.exportMu.TryLock() {
		return ExportResult{Error: "An export is already running; wait for it to finish."}
	}
	defer v.exportMu.Unlock()
	st, err := v.store()
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
		Formulas: req.Formulas, Now: v.opts.Now,
		Provenance: func(id string) (string, uint64) {
			in, err := st.Info(id)
			if err != nil {
				return "", 0
			}
			return in.SnapshotID, in.Seq
		},
	}
	rt := v.runtime()
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
