package client

import (
	"slices"
	"strings"
	"time"
)

// Progress is what a UI shows.
type Progress struct {
	// Server is the server in use (or being tried), one of Servers: the
	// list Options.Server names, in order.
	Server    string
	Servers   []string
	Online    bool
	Paused    bool
	LastError string
	// Err is the error LastError shows (nil when online), for
	// errors.Is: ErrProtocolVersion, protocol.ErrChecksum, ...
	Err error
	// Failovers counts the moves to the next server of Servers after a
	// failed or lost connection (Metrics.Failovers).
	Failovers int64
	LastSync  time.Time // last time a delta or snapshot was applied, or the client was confirmed current
	Datasets  []DatasetProgress
}

// DatasetProgress is one dataset's sync state.
type DatasetProgress struct {
	Dataset  string
	State    State
	Epoch    uint64
	Snapshot string
	Seq      uint64
	HeadSeq  uint64
	Lag      uint64 // HeadSeq - Seq
	// Download progress (State == StateDownloading).
	File          string
	FileDone      int64
	FileTotal     int64
	BytesDone     int64 // all files of the snapshot
	BytesTotal    int64
	RateBytesPerS float64
	ETA           time.Duration
	LastSync      time.Time
	// Failure is set while the dataset's local apply fails
	// (State == StateApplyFailing).
	Failure        *ApplyError
	downloadStart  time.Time
	downloadOffset int64
}

// setLag sets Lag from HeadSeq and Seq (0 when Seq is at or past the head).
func (d *DatasetProgress) setLag() {
	d.Lag = 0
	if d.HeadSeq > d.Seq {
		d.Lag = d.HeadSeq - d.Seq
	}
}

// OnProgress registers fn to be called (from the engine's goroutine) on
// every progress change. fn must not block.
func (e *Engine) OnProgress(fn func(Progress)) {
	e.mu.Lock()
	e.listen = append(e.listen, fn)
	e.mu.Unlock()
}

// Progress returns the current state.
func (e *Engine) Progress() Progress {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.progressLocked()
}

func (e *Engine) progressLocked() Progress {
	p := e.prog
	p.Servers = slices.Clone(p.Servers)
	p.Failovers = e.Stats.Failovers.Load()
	p.Paused = e.paused.Load()
	p.Datasets = nil
	for _, d := range e.dsProg {
		p.Datasets = append(p.Datasets, *d)
	}
	slices.SortFunc(p.Datasets, func(a, b DatasetProgress) int { return strings.Compare(a.Dataset, b.Dataset) })
	return p
}

// update mutates progress under the lock and notifies listeners.
func (e *Engine) update(f func(p *Progress, ds func(string) *DatasetProgress)) {
	e.mu.Lock()
	f(&e.prog, func(name string) *DatasetProgress {
		d := e.dsProg[name]
		if d == nil {
			d = &DatasetProgress{Dataset: name}
			e.dsProg[name] = d
		}
		return d
	})
	p := e.progressLocked()
	ls := slices.Clone(e.listen)
	e.mu.Unlock()
	for _, fn := range ls {
		fn(p)
	}
}

func (s *session) progressBytes(d *download) {
	_, off, _ := d.st.Pos()
	s.e.update(func(_ *Progress, dsf func(string) *DatasetProgress) {
		p := dsf(d.man.Dataset)
		p.FileDone = off
		p.BytesDone = d.base + off
		if el := time.Since(p.downloadStart).Seconds(); el > 0 {
			p.RateBytesPerS = float64(p.BytesDone-p.downloadOffset) / el
			if p.RateBytesPerS > 0 {
				p.ETA = time.Duration(float64(p.BytesTotal-p.BytesDone) / p.RateBytesPerS * float64(time.Second))
			}
		}
	})
}
