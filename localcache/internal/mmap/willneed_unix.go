//go:build unix

package mmap

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

var pageSize = uintptr(os.Getpagesize())

// WillNeed asks the kernel to start reading the pages under b (a window of
// a mapping) into the page cache, and returns without waiting: a reader
// that is about to fault on several pages it already knows of has them
// read at once rather than one fault after the other. Errors are ignored
// (it is advice).
func WillNeed(b []byte) {
	if len(b) == 0 {
		return
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	back := uintptr(p) & (pageSize - 1)
	_ = unix.Madvise(unsafe.Slice((*byte)(unsafe.Add(p, -int(back))), uintptr(len(b))+back), unix.MADV_WILLNEED)
}
