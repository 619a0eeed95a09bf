// Package mmap maps whole files, or regions of them, read-only. It is the only place that holds
// the platform's mapping syscalls (mmap_unix.go, mmap_windows.go).
//
// The bytes of a File are valid until Close; using them afterwards faults.
// Callers that hand out views of the bytes must keep the File open for as
// long as any view lives (localcache/snapshot does this with a reference
// count).
package mmap

import (
	"errors"
	"fmt"
	"math"
	"os"
	"unsafe"
)

// File is a read-only mapping of a whole file or of a region of one.
type File struct {
	Bytes []byte
	base  []byte // the whole mapping (Bytes is a window of it)
	f     *os.File
	off   int64   // the file offset base maps from
	h     uintptr // platform handle kept for unmapping (Windows)
	cuts  []int   // Isolate's region boundaries, offsets into base, sorted
}

// Granularity is the alignment of a mapping's start in the file: 64 KiB,
// Windows' allocation granularity and a multiple of every page size.
// OpenRange maps from the Granularity boundary at or below the region and
// hands out the region only.
const Granularity = 1 << 16

// Open maps path read-only. A zero-length file maps to an empty slice.
// Random access advice (MADV_RANDOM on Unix) is applied so that a lookup
// faults in one page, not the kernel's read-ahead window.
func Open(path string) (*File, error) {
	f, size, err := openSized(path)
	if err != nil {
		return nil, err
	}
	if size == 0 {
		return &File{Bytes: []byte{}, f: f}, nil
	}
	m, err := mapSpan(f, path, 0, size, "file", size)
	if err != nil {
		return nil, err
	}
	m.Bytes = m.base
	return m, nil
}

// openSized opens path read-only and returns it with its size.
func openSized(path string) (*os.File, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// mapSpan maps span bytes of f from start (a multiple of Granularity). On
// error f is closed; a span that does not fit an int is refused as "what
// too large (n bytes)".
func mapSpan(f *os.File, path string, start, span int64, what string, n int64) (*File, error) {
	if int64(int(span)) != span {
		f.Close()
		return nil, fmt.Errorf("mmap %s: %s too large (%d bytes)", path, what, n)
	}
	m := &File{f: f, off: start}
	if err := m.mapFile(start, int(span)); err != nil {
		f.Close()
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return m, nil
}

// ErrShort is wrapped by OpenRange's error when the file ends before the
// region does (a truncated file: mapping it would fault on access).
var ErrShort = errors.New("file ends before the region")

// OpenRange maps length bytes of path from offset, read-only. The file must
// hold the whole region when it is opened (else the error wraps ErrShort).
// A zero length maps nothing.
func OpenRange(path string, offset, length int64) (*File, error) {
	if offset < 0 || length < 0 || offset > math.MaxInt64-length {
		return nil, fmt.Errorf("mmap %s: bad region %d+%d", path, offset, length)
	}
	f, size, err := openSized(path)
	if err != nil {
		return nil, err
	}
	if offset+length > size {
		f.Close()
		return nil, fmt.Errorf("mmap %s: region %d+%d, size %d: %w", path, offset, length, size, ErrShort)
	}
	if length == 0 {
		return &File{Bytes: []byte{}, f: f}, nil
	}
	start := offset - offset%Granularity
	m, err := mapSpan(f, path, start, offset+length-start, "region", length)
	if err != nil {
		return nil, err
	}
	m.Bytes = m.base[offset-start : offset-start+length : offset-start+length]
	return m, nil
}

// lead is where Bytes starts in the whole mapping (base): a region's
// offset past the Granularity boundary below it, 0 for a whole file.
func (m *File) lead() int { return int(uintptrOf(m.Bytes) - uintptrOf(m.base)) }

// uintptrOf is the address of b's first byte.
func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// Close unmaps the file and closes it. Bytes must not be used afterwards.
func (m *File) Close() error {
	var err error
	if len(m.base) > 0 {
		err = m.unmap()
	}
	m.Bytes, m.base = nil, nil
	if cerr := m.f.Close(); err == nil {
		err = cerr
	}
	return err
}
