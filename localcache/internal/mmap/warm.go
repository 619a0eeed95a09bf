package mmap

import (
	"os"
	"runtime"
	"slices"
)

// hugeSize is the size and alignment of a huge page-cache folio (2 MiB on
// x86-64 and arm64 with 4 KiB pages), the unit a Warmer reads.
const hugeSize = 2 << 20

// A Warmer reads regions of a mapped file into the page cache in huge
// folios, through a mapping of its own (at most warmChunk of it at a time,
// unmapped again), without mapping anything into the File's mapping: a
// later fault of the File's mapping on a 2 MiB folio maps the whole folio
// with one page-directory entry.
//
// Why: Linux (6.18 measured) keeps a file in the folios it was read in. A
// file faulted in through a mapping under MADV_RANDOM is held in 4 KiB
// folios for as long as it stays cached, and a lookup into gigabytes of
// them misses the TLB and walks page tables that miss the caches too: at
// full scale (2.82M series, files evicted first) lookups took 0.96-1.23x
// the resident path's time, and 0.89-1.00x after a Warmer had read them
// in most runs, 1.1-1.45x in some (BENCHMARKS.md "Warming large
// snapshots": why is not known, so the snapshot's warm-up is opt-in). A
// Warmer's mapping asks for huge pages (MADV_HUGEPAGE) and populates
// itself (MADV_POPULATE_READ, Linux 5.14): each fault reads the 2
// MiB-aligned folio around it, where the read path ramps up from small
// folios and never reaches 2 MiB in a region of a few MiB, and
// readahead(2) reads 4 KiB folios. The File's own
// mapping keeps its advice: asking huge pages of it made the first lookup
// after a cold open read 2 MiB a fault, and lookups were slower in some
// runs, for a reason not found (BENCHMARKS.md "Page-cache folios and huge
// pages at full scale").
//
// The Warmer holds its own descriptor of the file (a duplicate), so it may
// outlive the File. A file shorter than a region (truncated since) ends
// Run with an error; it never faults the process.
type Warmer struct {
	f      *os.File
	ranges []Span // file offsets, 2 MiB-aligned (the last clamped to the file's end), sorted, disjoint
}

// Warmer returns a Warmer of the pages under spans (offsets into Bytes),
// widened to whole 2 MiB folios of the file. It returns nil and no error
// where warming is not supported (not Linux) or nothing is to be read.
func (m *File) Warmer(spans ...Span) (*Warmer, error) {
	if len(m.base) == 0 || !warmSupported {
		return nil, nil
	}
	st, err := m.f.Stat()
	if err != nil {
		return nil, err
	}
	lead := int64(m.lead())
	var ranges []Span
	for _, sp := range spans {
		if sp.Hi <= sp.Lo || sp.Hi <= 0 || sp.Lo >= len(m.Bytes) {
			continue
		}
		lo := m.off + lead + int64(max(sp.Lo, 0))
		hi := m.off + lead + int64(min(sp.Hi, len(m.Bytes)))
		lo, hi = lo/hugeSize*hugeSize, min((hi+hugeSize-1)/hugeSize*hugeSize, st.Size())
		ranges = append(ranges, Span{int(lo), int(hi)})
	}
	if len(ranges) == 0 {
		return nil, nil
	}
	slices.SortFunc(ranges, func(a, b Span) int { return a.Lo - b.Lo })
	out := ranges[:1]
	for _, r := range ranges[1:] {
		if last := &out[len(out)-1]; r.Lo <= last.Hi {
			last.Hi = max(last.Hi, r.Hi)
			continue
		}
		out = append(out, r)
	}
	f, err := dupFile(m.f)
	if err != nil {
		return nil, err
	}
	return &Warmer{f: f, ranges: out}, nil
}

// warmChunk bounds one mapping of Run: stop is checked between chunks,
// and the process's RSS holds at most one chunk while it is populated.
const warmChunk = 4 << 20

// Run reads the Warmer's regions into the page cache, a chunk at a time,
// until done, stop is closed (nil error), or a chunk fails. Its reads wait
// behind every other read of the process (the idle I/O class, where the
// scheduler has classes), so it should run on a goroutine of its own: the
// goroutine is locked to its thread, which ends with it.
func (w *Warmer) Run(stop <-chan struct{}) error {
	runtime.LockOSThread() // not unlocked: the thread keeps the idle class and must end
	ioprioIdle()
	for _, r := range w.ranges {
		for lo := r.Lo; lo < r.Hi; lo += warmChunk {
			select {
			case <-stop:
				return nil
			default:
			}
			if err := warmRange(w.f, int64(lo), min(r.Hi-lo, warmChunk)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close closes the Warmer's descriptor (nil: nothing to close).
func (w *Warmer) Close() error {
	if w == nil {
		return nil
	}
	return w.f.Close()
}
