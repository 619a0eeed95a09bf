package snapshot

import (
	"sync"

	"github.com/energyscope/energyscope/localcache/internal/mmap"
)

// hugeIndexBytes is the size of index.hash from which a snapshot opened
// with Options.HugeIndex serves its lookups from a copy of it in 2 MiB
// pages. Full scale (2.82M series) has 185 MiB of it, pet scale (175K)
// 11 MiB. A variable for tests.
var hugeIndexBytes = 64 << 20

// indexCopy is the state of the copy of index.hash (Options.HugeIndex).
type indexCopy struct {
	done chan struct{} // closed when the copy has ended (err set)
	stop chan struct{} // closed by release, under mu: the mappings are going
	err  error

	mu   sync.Mutex
	live *mmap.Copy // the copy lookups read, freed by release
}

// released reports whether release has run; ic.mu is held.
func (ic *indexCopy) released() bool {
	select {
	case <-ic.stop:
		return true
	default:
		return false
	}
}

// copyIndex starts the copy of index.hash (hf) into anonymous memory in
// 2 MiB pages, when it is hugeIndexBytes or more: lookups read the mapping
// until the copy is complete and checked against index.hash's checksums,
// then the copy (one pointer swapped; a lookup in flight finishes on the
// mapping, which stays). The mapping's pages that lookups faulted in
// meanwhile are then dropped from the process, so the copy does not count
// twice in its RSS.
//
// Why: every lookup reads a line of the directory and one of the records
// at random over index.hash. Over a page cache holding it in 4 KiB folios
// (after a reboot, when lookups faulted it back page by page) the full-scale
// lookup took 1.16-1.37x the resident path; with index.hash alone in 2 MiB
// folios, 0.91-1.00x (BENCHMARKS.md "Where the full-scale lookup loses"). A
// copy has its huge pages whatever the page cache holds: after an evict,
// 0.77-1.18x the resident path (median 0.99x) against 0.92-1.28x (median
// 1.11x) over the mapping (BENCHMARKS.md "index.hash copied into huge
// pages"). Its cost: the bytes of index.hash in anonymous memory from the
// moment it completes (instead of as lookups touch them), and a read of
// the file in the background after open (64 KiB a read, idle I/O class).
//
// A failed or refused copy (a file damaged or truncated since open) leaves
// lookups on the mapping; WaitIndexCopy reports why.
func (s *Snapshot) copyIndex(hf *mmap.File) {
	hot := s.hot.Load()
	if hf == nil || hot.Built || len(hf.Bytes) < hugeIndexBytes {
		return
	}
	ic := &indexCopy{done: make(chan struct{}), stop: make(chan struct{})}
	s.icopy = ic
	c, err := hf.Copy()
	if err != nil || c == nil {
		ic.err = err
		close(ic.done)
		return
	}
	hb := hf.Bytes
	go func() {
		defer close(ic.done)
		err := c.Run(ic.stop)
		u := hot
		if err == nil {
			u, err = hot.Over(hb, c.Bytes())
		}
		ic.mu.Lock()
		defer ic.mu.Unlock()
		if err != nil || ic.released() {
			ic.err = err
			c.Free()
			return
		}
		ic.live = c
		s.hot.Store(u)
		hf.DropResident()
	}()
}

// release is the snapshot release's part: it stops a copy in progress
// and frees a completed one. After it the copy's goroutine touches no
// mapping.
func (ic *indexCopy) release() {
	if ic == nil {
		return
	}
	ic.mu.Lock()
	close(ic.stop)
	c := ic.live
	ic.live = nil
	ic.mu.Unlock()
	c.Free()
}

// WaitIndexCopy waits for the copy of index.hash (Options.HugeIndex) to
// end and returns its error: nil when it completed, or when there is none
// (a small index.hash, the option off, a system without the support).
// The error is informational: lookups then read the mapping.
func (s *Snapshot) WaitIndexCopy() error {
	if s.icopy == nil {
		return nil
	}
	<-s.icopy.done
	return s.icopy.err
}

// IndexCopy is where a snapshot's lookups read index.hash from.
type IndexCopy int8

const (
	IndexMapped  IndexCopy = iota // its mapping: no copy (small, not asked for, refused or unsupported)
	IndexCopying                  // its mapping, while the copy is made
	IndexCopied                   // the copy in 2 MiB pages
)

func (c IndexCopy) String() string {
	switch c {
	case IndexCopying:
		return "copying"
	case IndexCopied:
		return "copied"
	}
	return "mapped"
}

// IndexCopy reports where lookups read index.hash from now.
func (s *Snapshot) IndexCopy() IndexCopy {
	ic := s.icopy
	if ic == nil {
		return IndexMapped
	}
	select {
	case <-ic.done:
	default:
		return IndexCopying
	}
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.live != nil {
		return IndexCopied
	}
	return IndexMapped
}
