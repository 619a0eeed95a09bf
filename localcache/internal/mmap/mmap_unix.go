//go:build unix

package mmap

import "golang.org/x/sys/unix"

func (m *File) mapFile(offset int64, size int) error {
	b, err := unix.Mmap(int(m.f.Fd()), offset, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	// Lookups touch a few pages at random; the default read-ahead turns a
	// cold open into hundreds of milliseconds of I/O (measured: 354 ms ->
	// 15 ms at 13.8M rows).
	_ = unix.Madvise(b, unix.MADV_RANDOM)
	m.base = b
	return nil
}

// Sequential advises the kernel that the mapping will be read front to back
// (verification, transfer).
func (m *File) Sequential() {
	if len(m.base) > 0 {
		_ = unix.Madvise(m.base, unix.MADV_SEQUENTIAL)
	}
}

func (m *File) unmap() error { return unix.Munmap(m.base) }
