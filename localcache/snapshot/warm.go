package snapshot

import (
	"errors"

	"github.com/energyscope/energyscope/localcache/internal/mmap"
)

// warmSnapshotBytes is the size of what lookups read (index.hash and the
// points) from which a snapshot opened with Options.Warm has the page
// cache warmed. At full scale (1.7 GiB, files evicted first) the warm-up
// read them in 1.1-1.6 s, where reading every series through the mapping
// took 4.4-5.8 s, and the first lookup after a cold open waits behind it
// (2.4-2.9 ms against 0.25-0.41). Lookups then took 0.90-1.07 µs in 21 of
// 28 runs and 1.15-1.52 in 7, against 1.0-1.3 without it (BENCHMARKS.md
// "Warming large snapshots"). At pet scale (0.17 GiB) 2 MiB folios made no
// difference to lookups. A variable for tests.
var warmSnapshotBytes = 512 << 20

// warm (Options.Warm) starts the background read of index.hash and of the
// points of data.arrow into the page cache in 2 MiB folios (mmap.Warmer),
// when they add up to warmSnapshotBytes or more. Lookups do not wait for it: a
// lookup before it reaches their pages faults them in as before. It stops
// when the snapshot is released.
func (s *Snapshot) warm(hf, df *mmap.File, points []mmap.Span) {
	if hf == nil || df == nil || len(points) == 0 {
		return
	}
	read := len(hf.Bytes)
	for _, sp := range points {
		read += sp.Hi - sp.Lo
	}
	if read < warmSnapshotBytes {
		return
	}
	hw, err := hf.Warmer(mmap.Span{Lo: 0, Hi: len(hf.Bytes)})
	if err != nil {
		s.warmDone(err)
		return
	}
	dw, err := df.Warmer(points...)
	if err != nil {
		hw.Close()
		s.warmDone(err)
		return
	}
	if hw == nil && dw == nil { // not supported here
		return
	}
	s.warmed, s.stopWarm = make(chan struct{}), make(chan struct{})
	go func() {
		// One warm-up at a time in the process: several would only share
		// the disk, and each takes an OS thread while it runs.
		select {
		case warmTurn <- struct{}{}:
			defer func() { <-warmTurn }()
		case <-s.stopWarm:
			hw.Close()
			dw.Close()
			close(s.warmed)
			return
		}
		var errs []error
		for _, w := range []*mmap.Warmer{hw, dw} {
			if w == nil {
				continue
			}
			if err := w.Run(s.stopWarm); err != nil {
				errs = append(errs, err)
			}
			w.Close()
		}
		s.warmErr = errors.Join(errs...)
		close(s.warmed)
	}()
}

// warmTurn is held by the warm-up that runs.
var warmTurn = make(chan struct{}, 1)

// warmDone records a warm-up that ended before it started.
func (s *Snapshot) warmDone(err error) {
	s.warmed, s.warmErr = make(chan struct{}), err
	close(s.warmed)
}

// WaitWarm waits for the page-cache warm-up of a large snapshot to end
// (it ends early when the snapshot is released), and returns its error:
// nil when there was none, or when the snapshot is too small to be warmed.
// The error is informational; lookups never depend on the warm-up.
func (s *Snapshot) WaitWarm() error {
	if s.warmed == nil {
		return nil
	}
	<-s.warmed
	return s.warmErr
}

// Warming reports whether the snapshot is large enough to be warmed (its
// warm-up may have ended).
func (s *Snapshot) Warming() bool { return s.warmed != nil }
