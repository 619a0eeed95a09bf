package mmap

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

const copySupported = true

// reopen opens the file behind f again, as a new open file description
// (/proc/self/fd), so that the copy's random-access advice and read
// position are its own: a duplicate descriptor would share them with f.
// It falls back to a duplicate where /proc is not mounted.
func reopen(f *os.File) (*os.File, error) {
	g, err := os.Open("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		if g, err = dupFile(f); err != nil {
			return nil, err
		}
	}
	// Each read of Run then reads what it asks and nothing ahead: on a
	// cold file a lookup's fault waits behind one copyChunk, not behind a
	// read-ahead window (8 MiB on the development machine's disk).
	_ = unix.Fadvise(int(g.Fd()), 0, 0, unix.FADV_RANDOM)
	return g, nil
}

// allocHuge maps n bytes of private anonymous memory, plus what it takes
// to start them on a 2 MiB boundary, and asks for huge pages on them. It
// returns the whole mapping and the n aligned bytes.
func allocHuge(n int) (mem, b []byte, err error) {
	size := (n + hugeSize - 1) / hugeSize * hugeSize
	mem, err = unix.Mmap(-1, 0, size+hugeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil, fmt.Errorf("copy: map %d bytes: %w", size+hugeSize, err)
	}
	lead := 0
	if r := int(uintptrOf(mem) % hugeSize); r != 0 {
		lead = hugeSize - r
	}
	// Advice only: where huge pages are off, the copy is in 4 KiB pages.
	_ = unix.Madvise(mem[lead:lead+size], unix.MADV_HUGEPAGE)
	return mem, mem[lead : lead+n : lead+n], nil
}

func protectRead(mem []byte) error {
	if err := unix.Mprotect(mem, unix.PROT_READ); err != nil {
		return fmt.Errorf("copy: protect: %w", err)
	}
	return nil
}

func freeAnon(mem []byte) error { return unix.Munmap(mem) }
