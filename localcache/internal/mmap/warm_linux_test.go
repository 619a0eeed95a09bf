package mmap

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// cachedPages reports, for each page of path, whether the page cache holds
// it (mincore over a mapping of its own, which maps nothing in).
func cachedPages(t *testing.T, path string) []bool {
	t.Helper()
	m, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ps := os.Getpagesize()
	vec := make([]byte, (len(m.base)+ps-1)/ps)
	if len(vec) > 0 {
		if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(m.base))), uintptr(len(m.base)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
			t.Fatal(e)
		}
	}
	out := make([]bool, len(vec))
	for i, v := range vec {
		out[i] = v&1 == 1
	}
	return out
}

// evict drops path's clean pages from the page cache.
func evict(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type == unix.TMPFS_MAGIC {
		t.Skipf("%s is on tmpfs, whose pages cannot be evicted: the test needs a disk-backed TMPDIR", path)
	}
	// Dirty pages are not dropped: write them back first.
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	for i, c := range cachedPages(t, path) {
		if c {
			t.Fatalf("page %d still cached after FADV_DONTNEED", i)
		}
	}
}

// warmBytes is the number of bytes of the file w's Run reads (at most).
func warmBytes(w *Warmer) int {
	n := 0
	for _, r := range w.ranges {
		n += r.Hi - r.Lo
	}
	return n
}

// evictedWarmer evicts path from the page cache, maps it and returns a
// Warmer of spans of it; both are closed when the test ends.
func evictedWarmer(t *testing.T, path string, spans ...Span) (*File, *Warmer) {
	t.Helper()
	evict(t, path)
	m, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	w, err := m.Warmer(spans...)
	if err != nil || w == nil {
		t.Fatalf("Warmer: %v, %v", w, err)
	}
	t.Cleanup(func() { w.Close() })
	return m, w
}

// TestWarmerReadsWholeFolios: a Warmer reads the 2 MiB-aligned folios
// under its spans into the page cache, none before them, maps nothing into
// the File's mapping, and works after the File is closed.
func TestWarmerReadsWholeFolios(t *testing.T) {
	const size = 12 << 20
	path := writeBig(t, size)
	evict(t, path)
	m, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	// Offsets into Bytes; the second span overlaps the first's folios.
	w, err := m.Warmer(Span{4<<20 + 5, 6 << 20}, Span{5 << 20, 7<<20 + 1}, Span{-3, 0}, Span{size, size + 9})
	if err != nil || w == nil {
		t.Fatalf("Warmer: %v, %v", w, err)
	}
	if got, want := warmBytes(w), 4<<20; got != want {
		t.Errorf("the Warmer reads %d bytes, want %d ([4 MiB, 8 MiB): the spans widened to 2 MiB and merged)", got, want)
	}
	m.Close() // the Warmer holds its own descriptor
	if err := w.Run(nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ps := os.Getpagesize()
	cached := cachedPages(t, path)
	for p := (4 << 20) / ps; p < (8<<20)/ps; p++ {
		if !cached[p] {
			t.Fatalf("page %d (offset %d) not cached after Run", p, p*ps)
		}
	}
	for p := range (4 << 20) / ps {
		if cached[p] {
			t.Fatalf("page %d (offset %d), before every span's folio, cached", p, p*ps)
		}
	}

	// The File's own mapping gets no resident page from a Warmer.
	m2, w2 := evictedWarmer(t, path, Span{0, size})
	if err := w2.Run(nil); err != nil {
		t.Fatal(err)
	}
	if _, rss := mappedRSS(t, path); len(rss) != 1 || rss[0] != 0 {
		t.Errorf("after Run, the File's mapping has %v KiB resident, want [0]", rss)
	}
	if last := size - 1; m2.Bytes[last] != byte(last%(1<<20)) {
		t.Fatal("last byte wrong after warming")
	}
}

// TestWarmerStopsAndFails: a closed stop channel reads nothing; a file
// truncated under the Warmer ends Run with an error, not a fault.
func TestWarmerStopsAndFails(t *testing.T) {
	const size = 8 << 20
	path := writeBig(t, size)
	_, w := evictedWarmer(t, path, Span{0, size})
	stop := make(chan struct{})
	close(stop)
	if err := w.Run(stop); err != nil {
		t.Fatalf("stopped Run: %v", err)
	}
	for i, c := range cachedPages(t, path) {
		if c {
			t.Fatalf("page %d cached by a stopped Run", i)
		}
	}
	if err := os.Truncate(path, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := w.Run(nil); err == nil {
		t.Fatal("Run over a truncated file: no error")
	} else {
		t.Logf("truncated: %v", err)
	}
}

// TestWarmerOfRange: a region mapping's spans are offsets into the region;
// the Warmer reads the file's folios under them.
func TestWarmerOfRange(t *testing.T) {
	const size = 8 << 20
	path := writeBig(t, size)
	evict(t, path)
	m, err := OpenRange(path, 3<<20+100, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// Region bytes [1 MiB - 100, 1 MiB + 1) are file bytes [4 MiB, 4 MiB + 101).
	w, err := m.Warmer(Span{1<<20 - 100, 1<<20 + 1})
	if err != nil || w == nil {
		t.Fatalf("Warmer: %v, %v", w, err)
	}
	defer w.Close()
	if got, want := warmBytes(w), 2<<20; got != want {
		t.Fatalf("the Warmer reads %d bytes, want %d (the file's folio [4 MiB, 6 MiB))", got, want)
	}
	if err := w.Run(nil); err != nil {
		t.Fatal(err)
	}
	ps := os.Getpagesize()
	for p, c := range cachedPages(t, path) {
		if in := p*ps >= 4<<20 && p*ps < 6<<20; in && !c || !in && p*ps < 4<<20 && c {
			t.Fatalf("page %d (offset %d): cached %v", p, p*ps, c)
		}
	}
}
