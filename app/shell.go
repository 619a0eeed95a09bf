package app

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Shell is bound for the window's frame (frontend/src/main.ts): the first
// call, which brings the first view's data, and the report that a view
// shows data.
type Shell struct {
	*core
	status    *StatusView
	explorer  *ExplorerView
	readyOnce sync.Once
}

// Hello tells the frontend where it is, with the data of the view it
// opens on (the Status, or the series of --open in the Explorer), so that
// the first view needs no other call before it shows.
func (v *Shell) Hello() Hello {
	h := Hello{Version: Version, Platform: runtime.GOOS, OpenSeries: v.opts.OpenSeries, Compare: []string{}}
	for _, c := range v.opts.Compare {
		if c = strings.TrimSpace(c); c != "" && len(h.Compare) < MaxCompare-1 {
			h.Compare = append(h.Compare, c)
		}
	}
	v.log.Info("frontend connected", "ms", time.Since(v.opts.Started).Milliseconds())
	err := v.startError()
	h.Home = v.config().Home
	if err != nil {
		h.Error = words(err)
		return h
	}
	if ref := strings.TrimSpace(h.OpenSeries); ref != "" {
		o := &Opened{Info: v.explorer.Info(ref)}
		if o.Info.Error == "" {
			full := o.Info.Dataset + ":" + o.Info.ID
			o.Series = v.explorer.Series(full, "", "", "", "")
			o.Formula = v.explorer.Formula(o.Info.Ref, "", "", GetOptions{})
		}
		h.Open = o
	} else {
		st := v.status.Status()
		h.Status = &st
	}
	return h
}

// Ready is called by the frontend once it shows data for the first time.
// It records the start-up time (ReadyFile) and returns it in ms.
func (v *Shell) Ready(view string) int64 {
	ms := time.Since(v.opts.Started).Milliseconds()
	v.readyOnce.Do(func() {
		v.log.Info("first view with data", "view", view, "ms", ms)
		if v.opts.ReadyFile != "" {
			if err := os.WriteFile(v.opts.ReadyFile, fmt.Appendf(nil, "%d %s\n", ms, view), 0o644); err != nil {
				v.log.Warn("ready file", "err", err)
			}
		}
		// Build the datasets' search indexes now that the window shows
		// (about 0.2 s for 175K series), rather than on the first
		// keystroke in the Explorer.
		go func() {
			if st, err := v.store(); err == nil {
				t := time.Now()
				st.Search("e", 1)
				v.log.Debug("search index built", "ms", time.Since(t).Milliseconds())
			}
		}()
	})
	return ms
}
