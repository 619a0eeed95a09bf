package mmap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// TestCopyMatchesTheRegion: a Copy of a region at an unaligned offset
// holds its bytes, starts on a 2 MiB boundary, is in huge pages where the
// system gives them for the asking, and is read-only once complete.
func TestCopyMatchesTheRegion(t *testing.T) {
	path := writeCounted(t, 6<<20)
	m, err := OpenRange(path, 100_003, 4<<20+12_345)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c, err := m.Copy()
	if err != nil || c == nil {
		t.Fatalf("Copy = %v, %v", c, err)
	}
	defer c.Free()
	if err := c.Run(nil); err != nil {
		t.Fatal(err)
	}
	b := c.Bytes()
	if !bytes.Equal(b, m.Bytes) {
		t.Fatal("the copy differs from the mapping")
	}
	if uintptrOf(b)%hugeSize != 0 {
		t.Fatalf("copy at %#x, not 2 MiB-aligned", uintptrOf(b))
	}
	if thp, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); !strings.Contains(string(thp), "[never]") {
		if kib := anonHugeKiB(t, uintptrOf(b)); kib < 2048 {
			t.Fatalf("copy has %d KiB in huge pages (transparent huge pages: %s)", kib, strings.TrimSpace(string(thp)))
		}
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("a write to the completed copy did not fault")
			}
		}()
		b[0]++
	}()
}

// writeCounted writes a file of size bytes in which each 4-byte word
// holds its own index, so that no two regions of it are alike.
func writeCounted(t *testing.T, size int) string {
	t.Helper()
	b := make([]byte, size)
	for i := 0; i+4 <= size; i += 4 {
		binary.LittleEndian.PutUint32(b[i:], uint32(i/4))
	}
	path := filepath.Join(t.TempDir(), "counted")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// anonHugeKiB is AnonHugePages of the mapping of this process that holds
// address addr (/proc/self/smaps).
func anonHugeKiB(t *testing.T, addr uintptr) int {
	t.Helper()
	s, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	in := false
	for _, line := range strings.Split(string(s), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(f[0], "-"); ok && !strings.HasSuffix(f[0], ":") {
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && uint64(addr) >= l && uint64(addr) < h
			continue
		}
		if in && f[0] == "AnonHugePages:" {
			kib, _ := strconv.Atoi(f[1])
			return kib
		}
	}
	t.Fatalf("no mapping holds %#x", addr)
	return 0
}

// TestCopyOfATruncatedFile: a file cut short after it was mapped ends Run
// with ErrCopyShort (the copy never reads through the mapping, so nothing
// faults).
func TestCopyOfATruncatedFile(t *testing.T) {
	path := writeBig(t, 3<<20)
	c := openCopy(t, path)
	if err := os.Truncate(path, 1<<20+7); err != nil {
		t.Fatal(err)
	}
	if err := c.Run(nil); !errors.Is(err, ErrCopyShort) {
		t.Fatalf("Run = %v, want ErrCopyShort", err)
	}
}

// TestCopyStops: Run returns ErrStopped when stop is closed.
func TestCopyStops(t *testing.T) {
	c := openCopy(t, writeBig(t, 1<<20))
	stop := make(chan struct{})
	close(stop)
	if err := c.Run(stop); !errors.Is(err, ErrStopped) {
		t.Fatalf("Run = %v, want ErrStopped", err)
	}
}

// openCopy maps path and makes a Copy of it, both released when the test
// ends.
func openCopy(t *testing.T, path string) *Copy {
	t.Helper()
	m, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	c, err := m.Copy()
	if err != nil || c == nil {
		t.Fatalf("Copy = %v, %v", c, err)
	}
	t.Cleanup(func() { c.Free() })
	return c
}
