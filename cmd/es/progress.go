package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"
)

// progress draws a one-line bar on a terminal and nothing otherwise.
type progress struct {
	w      io.Writer
	label  string
	total  int64
	start  time.Time
	last   time.Time
	active bool
}

func newProgress(w io.Writer, label string, total int64) *progress {
	p := &progress{w: w, label: label, total: total, start: time.Now()}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) && total > 0 {
		p.active = true
	}
	return p
}

func (p *progress) set(done int64) {
	if !p.active {
		return
	}
	now := time.Now()
	if now.Sub(p.last) < 100*time.Millisecond || now.Sub(p.start) < 500*time.Millisecond {
		return
	}
	p.last = now
	frac := float64(done) / float64(p.total)
	if frac > 1 {
		frac = 1
	}
	const width = 30
	n := int(frac * width)
	eta := ""
	if frac > 0 {
		el := now.Sub(p.start)
		eta = (time.Duration(float64(el)/frac) - el).Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "\r%-5s [%s%s] %3.0f%% eta %s   ", p.label, strings.Repeat("=", n), strings.Repeat(" ", width-n), 100*frac, eta)
}

func (p *progress) finish() {
	if p.active && !p.last.IsZero() {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
