//go:build linux

package mmap

import "golang.org/x/sys/unix"

const fenceSupported = true

func markRegion(b []byte, odd bool) {
	advice := unix.MADV_DODUMP
	if odd {
		advice = unix.MADV_DONTDUMP
	}
	_ = unix.Madvise(b, advice)
}

// dropResident zaps the page table entries of a read-only shared file
// mapping (MADV_DONTNEED): for such a mapping the contents come back from
// the file on the next access.
func dropResident(b []byte) { _ = unix.Madvise(b, unix.MADV_DONTNEED) }
