// Package mmap maps whole files read-only. It is the only place that holds
// the platform's mapping syscalls (mmap_unix.go, mmap_windows.go).
//
// The bytes of a File are valid until Close; using them afterwards faults.
// Callers that hand out views of the bytes must keep the File open for as
// long as any view lives (localcache/snapshot does this with a reference
// count).
package mmap

import (
	"fmt"
	"os"
)

// File is a read-only mapping of a whole file.
type File struct {
	Bytes []byte
	f     *os.File
	h     uintptr // platform handle kept for unmapping (Windows)
}

// Open maps path read-only. A zero-length file maps to an empty slice.
// Random access advice (MADV_RANDOM on Unix) is applied so that a lookup
// faults in one page, not the kernel's read-ahead window.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	size := st.Size()
	if size == 0 {
		return &File{Bytes: []byte{}, f: f}, nil
	}
	if int64(int(size)) != size {
		f.Close()
		return nil, fmt.Errorf("mmap %s: file too large (%d bytes)", path, size)
	}
	m := &File{f: f}
	if err := m.mapFile(int(size)); err != nil {
		f.Close()
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return m, nil
}

// Close unmaps the file and closes it. Bytes must not be used afterwards.
func (m *File) Close() error {
	var err error
	if len(m.Bytes) > 0 {
		err = m.unmap()
	}
	m.Bytes = nil
	if cerr := m.f.Close(); err == nil {
		err = cerr
	}
	return err
}
