package prefetch

import (
	"testing"
	"unsafe"
)

// Range over any range, empty, unaligned or not mapped, returns without a
// fault and changes nothing.
func TestRange(t *testing.T) {
	b := make([]byte, 1000)
	for i := range b {
		b[i] = byte(i)
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	for _, c := range [][2]uintptr{{p, 0}, {p, 1}, {p + 3, 997}, {p + 63, 2}, {0, 4096}, {^uintptr(0) - 1<<20, 1 << 16}} {
		Range(c[0], c[1])
	}
	for i := range b {
		if b[i] != byte(i) {
			t.Fatalf("byte %d changed", i)
		}
	}
}
