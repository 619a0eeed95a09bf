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
	// reads the pages, in smaller folios. MADV_RANDOM makes each fault read
	// its one 2 MiB folio and nothing ahead, so that a lookup's read waits
	// behind at most that one.
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	_ = unix.Madvise(b, unix.MADV_RANDOM)
	if err := unix.Madvise(b, unix.MADV_POPULATE_READ); err != nil {
		return fmt.Errorf("warm %s at %d+%d: %w", f.Name(), off, n, err)
	}
	return nil
}

// ioprioIdle puts the calling thread's reads in the idle I/O class
// (ioprio_set(IOPRIO_WHO_PROCESS, 0, IOPRIO_CLASS_IDLE)): schedulers that
// honour classes (mq-deadline, bfq) serve other reads first. The caller
// must keep the goroutine locked to its thread until the thread ends.
func ioprioIdle() {
	const whoProcess, classIdle, classShift = 1, 3, 13
	_, _, _ = unix.Syscall(unix.SYS_IOPRIO_SET, whoProcess, 0, classIdle<<classShift)
}
