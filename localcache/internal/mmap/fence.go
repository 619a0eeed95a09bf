package mmap

import (
	"os"
	"slices"
)

// MaxRegions bounds the regions Isolate splits one mapping into.
const MaxRegions = 1024

// Span is the byte range Bytes[Lo:Hi].
type Span struct{ Lo, Hi int }

// Isolate makes the pages holding each span a region of their own: the
// mapping is split at the page boundary at or below Lo and at or above Hi
// (clamped to the mapping), so that a page fault maps pages of its own
// region only.
//
// Why: Linux (6.18 measured) maps the whole page-cache folio a fault lands
// in, up to 2 MiB, when the folio lies inside the faulting mapping region,
// MADV_RANDOM or not, and files read sequentially or just written are held
// in such large folios. Reading a column then makes the pages of its
// neighbours resident in the process too (clean shared page cache, but
// counted in its RSS). Each region is its own kernel mapping (VMA), which a
// folio mapping cannot cross: a folio that straddles a boundary is mapped
// page by page (at most the kernel's 64 KiB fault-around window). Calls
// accumulate; a page shared by two isolated ranges becomes a region of its
// own. The bytes, the addresses and every read are unchanged; only the
// number of kernel mappings grows (one per region, against Linux's default
// limit of 65,530 per process). A call that would leave the mapping with
// more than MaxRegions regions does nothing (a snapshot cooked with tiny
// record batches): a process out of kernel mappings cannot grow its heap.
// A no-op where not supported (not Linux).
func (m *File) Isolate(spans ...Span) {
	if len(m.Bytes) == 0 || !fenceSupported {
		return
	}
	ps := os.Getpagesize()
	lead := m.lead()
	first := len(m.cuts) == 0 // every region still has the default flags
	cuts := slices.Clone(m.cuts)
	for _, sp := range spans {
		if sp.Hi <= sp.Lo || sp.Hi <= 0 || sp.Lo >= len(m.Bytes) {
			continue
		}
		lo, hi := max(sp.Lo, 0)+lead, min(sp.Hi, len(m.Bytes))+lead
		for _, at := range []int{lo / ps * ps, (hi + ps - 1) / ps * ps} {
			if at > 0 && at < len(m.base) {
				cuts = append(cuts, at)
			}
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	if len(cuts) == len(m.cuts) || len(cuts)+1 > MaxRegions {
		return
	}
	m.cuts = cuts
	// Adjacent regions must differ in their flags or the kernel merges
	// them back into one mapping: alternate a flag with no effect on
	// reads (MADV_DONTDUMP: leave out of core dumps; file-backed shared
	// mappings are not dumped by default anyway).
	from := 0
	for i := 0; i <= len(m.cuts); i++ {
		to := len(m.base)
		if i < len(m.cuts) {
			to = m.cuts[i]
		}
		if odd := i%2 == 1; odd || !first {
			markRegion(m.base[from:to], odd)
		}
		from = to
	}
}

// Regions returns the number of regions Isolate has split the mapping into
// (1 when it has not, or where Isolate is a no-op).
func (m *File) Regions() int { return len(m.cuts) + 1 }

// DropResident unmaps the mapping's pages from the process's page tables,
// keeping the mapping: the next read of a page faults it in again from the
// page cache (or the file). The open uses it to shed the pages its header
// and footer reads mapped (whole large folios) before lookups start. The
// bytes are unchanged. A no-op where not supported.
func (m *File) DropResident() {
	if len(m.base) > 0 && fenceSupported {
		dropResident(m.base)
	}
}
