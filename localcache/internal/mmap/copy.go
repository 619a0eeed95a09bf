package mmap

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
)

// A Copy is a private, read-only copy of a File's bytes in anonymous
// memory that asks for 2 MiB pages (MADV_HUGEPAGE), filled in the
// background by Run. It exists for one reason: a table read at random by
// every lookup (index.hash at full scale, 185 MiB) costs more through a
// file mapping whose page cache holds it in 4 KiB folios, and the page
// cache keeps the folios a file was first read in: after a reboot, a
// mapping under MADV_RANDOM faults it back page by page, and it stays in
// small folios while cached (Linux 6.18 on ext4; MADV_COLLAPSE refuses
// file folios without CONFIG_READ_ONLY_THP_FOR_FS). Anonymous memory gets
// its huge pages whatever the page cache holds (BENCHMARKS.md "index.hash
// copied into huge pages").
//
// Run reads the file with pread, never through the File's mapping, so the
// mapping's RSS and advice are untouched. The Copy holds its own
// descriptor of the file, so it may outlive the File.
type Copy struct {
	f     *os.File // its own open file description (reopen)
	name  string   // the file's name, for errors
	off   int64    // file offset of the copied bytes
	mem   []byte   // the whole anonymous mapping (2 MiB-aligned inside)
	bytes []byte   // n bytes of mem, 2 MiB-aligned
}

// copyChunk is what one read of Run asks for: small enough that a lookup's
// fault on a cold file waits behind at most one such read in flight. At
// full scale (185 MiB, files evicted) the first lookup after open took
// 0.22-1.13 ms (median 0.41) with 64 KiB reads, 0.51-3.2 ms (median 0.74)
// with 256 KiB, 0.28-0.82 ms without a copy. A cached file still copies
// in 0.2-0.3 s.
const copyChunk = 64 << 10

// ErrCopyShort is wrapped by Run's error when the file ends before the
// copied bytes do (a file truncated since it was mapped).
var ErrCopyShort = errors.New("file ends before the mapped bytes")

// Copy allocates an anonymous copy of the File's Bytes, to be filled by
// Run. It returns nil and no error where that is not supported (not
// Linux) or the File is empty.
func (m *File) Copy() (*Copy, error) {
	if len(m.Bytes) == 0 || !copySupported {
		return nil, nil
	}
	f, err := reopen(m.f)
	if err != nil {
		return nil, err
	}
	mem, b, err := allocHuge(len(m.Bytes))
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Copy{f: f, name: m.f.Name(), off: m.off + int64(m.lead()), mem: mem, bytes: b}, nil
}

// Run fills the copy from the file, a chunk at a time, in the idle I/O
// class (where the scheduler has classes), until done (nil), stop is
// closed (ErrStopped), or a read fails. On success the copy is made
// read-only, so a stray write faults rather than changing what lookups
// read. It locks its goroutine to a thread that ends with it, so it
// should run on a goroutine of its own.
func (c *Copy) Run(stop <-chan struct{}) error {
	runtime.LockOSThread() // not unlocked: the thread keeps the idle class and must end
	ioprioIdle()
	n := len(c.bytes)
	for lo := 0; lo < n; lo += copyChunk {
		select {
		case <-stop:
			return ErrStopped
		default:
		}
		hi := min(lo+copyChunk, n)
		k, err := c.f.ReadAt(c.bytes[lo:hi], c.off+int64(lo))
		if k == hi-lo {
			continue
		}
		if err == nil || errors.Is(err, io.EOF) {
			err = ErrCopyShort
		}
		return fmt.Errorf("copy %s at file offset %d: %w", c.name, c.off+int64(lo+k), err)
	}
	return protectRead(c.mem)
}

// ErrStopped is Run's error when stop was closed before the copy ended.
var ErrStopped = errors.New("copy stopped")

// Bytes are the copied bytes: valid after Run returned nil, until Free.
func (c *Copy) Bytes() []byte { return c.bytes }

// Free closes the copy's descriptor and unmaps its memory. The caller
// must know no reader uses Bytes any more, and that Run has returned.
func (c *Copy) Free() error {
	if c == nil {
		return nil
	}
	err := c.f.Close()
	if c.mem != nil {
		if uerr := freeAnon(c.mem); err == nil {
			err = uerr
		}
	}
	c.mem, c.bytes = nil, nil
	return err
}
