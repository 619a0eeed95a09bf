package mmap

import (
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

var pageSize = uintptr(os.Getpagesize())

// WillNeed asks the kernel to start reading the pages under b (a window of
// a mapping) into the page cache, and returns without waiting: a reader
// that is about to fault on several pages it already knows of has them
// read at once rather than one fault after the other. Errors are ignored
// (it is advice).
//
// The page-aligned start is computed as an address, not as a pointer: b
// may be Go memory in tests, and a pointer before its allocation is what
// checkptr (-race) rejects.
func WillNeed(b []byte) {
	if len(b) == 0 {
		return
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	start := p &^ (pageSize - 1)
	_, _, _ = unix.Syscall(unix.SYS_MADVISE, start, p+uintptr(len(b))-start, unix.MADV_WILLNEED)
	runtime.KeepAlive(b)
}
