//go:build linux

package mmap

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// mappedRSS returns, for each mapping (VMA) of path in this process in
// address order, its start address and resident KiB (from /proc/self/smaps).
func mappedRSS(t *testing.T, path string) (starts []uint64, rss []int) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") && strings.Contains(f[0], "-") {
			in = len(f) >= 6 && f[len(f)-1] == path
			if in {
				lo, _, _ := strings.Cut(f[0], "-")
				a, _ := strconv.ParseUint(lo, 16, 64)
				starts = append(starts, a)
				rss = append(rss, 0)
			}
			continue
		}
		if in && f[0] == "Rss:" {
			rss[len(rss)-1], _ = strconv.Atoi(f[1])
		}
	}
	return starts, rss
}

// writeBig writes size bytes in 1 MiB writes, the way the snapshot writer
// does (which leaves large folios in the page cache on ext4/xfs).
func writeBig(t *testing.T, size int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f")
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	for range size >> 20 {
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFenceSplitsMapping(t *testing.T) {
	const size = 8 << 20
	path := writeBig(t, size)
	m, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ps := os.Getpagesize()
	// Starts round down and ends up to pages; boundaries at the ends of
	// the mapping, repeats and empty ranges add nothing; calls accumulate.
	m.Isolate(Span{3<<20 + 100, 3<<20 + 105}, Span{-5, 0}, Span{size, size + 7})
	if starts, _ := mappedRSS(t, path); m.Regions() != 3 || len(starts) != 3 {
		t.Fatalf("after one span: Regions() = %d, %d kernel mappings; want 3 and 3", m.Regions(), len(starts))
	}
	m.Isolate(Span{3<<20 + 5, 3<<20 + ps}, Span{6 << 20, size + 7}, Span{4 << 20, 4 << 20})
	if got := m.Regions(); got != 4 {
		t.Fatalf("Regions() = %d, want 4", got)
	}
	starts, _ := mappedRSS(t, path)
	if len(starts) != 4 {
		t.Fatalf("%d kernel mappings of the file, want 4 (the regions)", len(starts))
	}
	// Read one byte inside the one-page region [3 MiB, 3 MiB + page): only
	// that region gets resident pages, and no more than its page.
	if b := m.Bytes[3<<20+10]; b != byte(10) {
		t.Fatalf("byte = %d, want 10 (the file's contents)", b)
	}
	_, rss := mappedRSS(t, path)
	for i, kb := range rss {
		if i != 1 && kb != 0 {
			t.Errorf("region %d: %d KiB resident after reading only region 1: %v", i, kb, rss)
		}
	}
	if rss[1] != ps>>10 {
		t.Errorf("region 1 (one page): %d KiB resident, want %d", rss[1], ps>>10)
	}
	// Every byte reads as written across the regions.
	for i := 0; i < size; i += 4093 {
		if m.Bytes[i] != byte(i%(1<<20)) {
			t.Fatalf("byte %d = %d, want %d", i, m.Bytes[i], byte(i%(1<<20)))
		}
	}
	m.DropResident()
	_, rss = mappedRSS(t, path)
	for i, kb := range rss {
		if kb != 0 {
			t.Errorf("region %d: %d KiB resident after DropResident", i, kb)
		}
	}
	if last := size - 1; m.Bytes[last] != byte(last%(1<<20)) {
		t.Fatal("last byte wrong after DropResident")
	}
}

func TestFenceRange(t *testing.T) {
	// A region mapping (OpenRange) starts at the Granularity boundary below
	// the region: cuts are offsets into Bytes all the same.
	path := writeBig(t, 4<<20)
	m, err := OpenRange(path, 100_000, 3<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.Isolate(Span{1 << 20, 1 << 30})
	starts, _ := mappedRSS(t, path)
	if len(starts) != 2 {
		t.Fatalf("%d kernel mappings, want 2", len(starts))
	}
	want := uint64(uintptrOf(m.Bytes[1<<20:])) / uint64(os.Getpagesize()) * uint64(os.Getpagesize())
	if starts[1] != want {
		t.Fatalf("second region starts at %#x, want %#x (the page of Bytes[1 MiB])", starts[1], want)
	}
	if off := 100_000 + 1<<20; m.Bytes[1<<20] != byte(off%(1<<20)) {
		t.Fatalf("byte = %d, want %d", m.Bytes[1<<20], byte(off%(1<<20)))
	}
}

func TestIsolateBoundsRegions(t *testing.T) {
	const size = 8 << 20
	path := writeBig(t, size)
	m, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ps := os.Getpagesize()
	// One span every third page: more than MaxRegions regions. Nothing is
	// split (a process out of kernel mappings cannot grow its heap).
	var spans []Span
	for at := ps; at+ps < size; at += 3 * ps {
		spans = append(spans, Span{at, at + ps})
	}
	if 2*len(spans) < MaxRegions {
		t.Fatalf("only %d spans", len(spans))
	}
	m.Isolate(spans...)
	if starts, _ := mappedRSS(t, path); m.Regions() != 1 || len(starts) != 1 {
		t.Fatalf("Regions() = %d, %d kernel mappings after %d spans; want 1 and 1", m.Regions(), len(starts), len(spans))
	}
	// Within the bound it splits.
	m.Isolate(spans[:100]...)
	if starts, _ := mappedRSS(t, path); m.Regions() != 201 || len(starts) != 201 {
		t.Fatalf("Regions() = %d, %d kernel mappings after 100 spans; want 201 and 201", m.Regions(), len(starts))
	}
	if last := size - 1; m.Bytes[last] != byte(last%(1<<20)) {
		t.Fatal("last byte wrong")
	}
}
