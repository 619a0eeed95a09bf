package mmap

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

const warmSupported = true

func dupFile(f *os.File) (*os.File, error) {
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return nil, fmt.Errorf("warm %s: %w", f.Name(), err)
	}
	unix.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// warmRange maps n bytes of f from off (a multiple of the page size),
// populates the mapping in huge pages and unmaps it.
func warmRange(f *os.File, off int64, n int) error {
	b, err := unix.Mmap(int(f.Fd()), off, n, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("warm %s at %d: %w", f.Name(), off, err)
	}
	defer unix.Munmap(b)
	// Advice only: where the system disables huge pages the populate still
	// reads the pages, in smaller folios.
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	if err := unix.Madvise(b, unix.MADV_POPULATE_READ); err != nil {
		return fmt.Errorf("warm %s at %d+%d: %w", f.Name(), off, n, err)
	}
	return nil
}
