package format

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/energyscope/energyscope/internal/fileutil"
	"github.com/energyscope/energyscope/localcache/internal/mmap"
)

// A sink is where Write puts a snapshot's files: a directory (one file
// each, the default) or a Container (one file holding them all).
type sink interface {
	// writeFile has body write file name through a buffer and returns
	// its FileInfo (chunk hashes of the bytes written).
	writeFile(name string, body func(io.Writer) error) (FileInfo, error)
	// writeBytes writes file name whole.
	writeBytes(name string, b []byte) error
	// mapFile maps file name, written before, read-only.
	mapFile(name string) (*mmap.File, error)
	// finish makes what was written durable where the sink promises it.
	finish() error
}

// dirSink writes each file into dir, fsynced, then fsyncs dir.
type dirSink string

func (d dirSink) writeFile(name string, body func(io.Writer) error) (FileInfo, error) {
	return writeHashed(filepath.Join(string(d), name), body)
}

func (d dirSink) writeBytes(name string, b []byte) error {
	return WriteFileSync(filepath.Join(string(d), name), b)
}

func (d dirSink) mapFile(name string) (*mmap.File, error) {
	return mmap.Open(filepath.Join(string(d), name))
}

func (d dirSink) finish() error { return SyncDir(string(d)) }

// ContainerAlign is the alignment of every file in a Container: a page,
// so that each can be memory-mapped in place (snapshot.Region).
const ContainerAlign = 4096

// A Container is one file that receives a snapshot's files (WriteInto,
// WriteSortedInto) in place of a snapshot directory: each file starts at
// a multiple of ContainerAlign, the gaps are zero bytes. The file begins
// with the header its creator gave and is left open for the creator to
// append what it needs after the files (the lake appends a Puffin
// footer: FORMAT.md, "The lake"). The writer starts the writeback of
// each large file in the background once it is placed (syncAhead) but
// promises nothing: the creator calls Durable once the container is
// complete, before anything refers to it.
type Container struct {
	f       *os.File
	path    string
	end     int64
	placed  []Placed
	used    bool
	syncing chan error // a background fsync started by syncAhead
	syncErr error      // the first error of a background fsync
}

// Placed is one file of a Container: its name in a snapshot directory
// and where its bytes lie.
type Placed struct {
	Name   string
	Offset int64
	Length int64
}

// CreateContainer creates the container file path (it must not exist)
// and writes header at its start.
func CreateContainer(path string, header []byte) (*Container, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	c := &Container{f: f, path: path}
	if err := c.write(header); err != nil {
		c.Remove()
		return nil, err
	}
	return c, nil
}

// Path is the container's file.
func (c *Container) Path() string { return c.path }

// Size is the number of bytes written so far.
func (c *Container) Size() int64 { return c.end }

// Files lists the snapshot files written into the container, in the order
// they were written (ascending offsets).
func (c *Container) Files() []Placed { return append([]Placed(nil), c.placed...) }

// File returns where file name lies, or false.
func (c *Container) File(name string) (Placed, bool) {
	for _, p := range c.placed {
		if p.Name == name {
			return p, true
		}
	}
	return Placed{}, false
}

// Append writes b at the end of the container (no alignment) and returns
// its offset: the creator's trailer after the snapshot's files.
func (c *Container) Append(b []byte) (int64, error) {
	off := c.end
	return off, c.write(b)
}

// syncAheadMin is the file size from which the writer starts the
// container's writeback in the background once the file is placed (a
// test lowers it).
var syncAheadMin int64 = 16 << 20

// syncAhead starts an fsync of what the container holds so far on
// another goroutine, unless one is still running: the disk writes the
// bulk (data.arrow) while the writer goes on with the other files, and
// the creator's Durable has little left to flush.
func (c *Container) syncAhead() {
	if c.syncing != nil {
		select {
		case err := <-c.syncing:
			c.syncing = nil
			if err != nil {
				c.syncErr = cmp.Or(c.syncErr, err)
				return
			}
		default:
			return
		}
	}
	ch := make(chan error, 1)
	c.syncing = ch
	f, dir := c.f, filepath.Dir(c.path)
	go func() { ch <- fileutil.SyncOpen(f, dir) }()
}

// waitSync waits for a background fsync, if one was started.
func (c *Container) waitSync() {
	if c.syncing != nil {
		c.syncErr = cmp.Or(c.syncErr, <-c.syncing)
		c.syncing = nil
	}
}

// Durable fsyncs the container file and its directory. An error of a
// background fsync is reported here (a failed writeback is reported to
// one fsync only: a later one may succeed without the data).
func (c *Container) Durable() error {
	c.waitSync()
	if c.syncErr != nil {
		return c.syncErr
	}
	return fileutil.SyncOpen(c.f, filepath.Dir(c.path))
}

// Rename moves the container file to newpath (fileutil.Rename: same
// filesystem; newpath must not exist on Windows); Durable then fsyncs
// newpath's directory.
func (c *Container) Rename(newpath string) error {
	if err := fileutil.Rename(c.path, newpath); err != nil {
		return err
	}
	c.path = newpath
	return nil
}

// Close closes the container file (it stays on disk).
func (c *Container) Close() error {
	c.waitSync()
	return c.f.Close()
}

// Remove closes and deletes the container file.
func (c *Container) Remove() error {
	c.waitSync()
	c.f.Close()
	return os.Remove(c.path)
}

// SHA256 is the hex SHA-256 of file name's bytes in the container (read
// back: for the small files, such as the manifest, whose sum the
// manifest does not list).
func (c *Container) SHA256(name string) (string, error) {
	p, ok := c.File(name)
	if !ok {
		return "", fmt.Errorf("container %s: no %s", c.path, name)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(c.f, p.Offset, p.Length)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (c *Container) write(b []byte) error {
	n, err := c.f.Write(b)
	c.end += int64(n)
	return err
}

// align pads the container with zero bytes up to the next ContainerAlign.
func (c *Container) align() error {
	pad := (ContainerAlign - c.end%ContainerAlign) % ContainerAlign
	if pad == 0 {
		return nil
	}
	return c.write(make([]byte, pad))
}

// containerSink writes the snapshot's files into a Container.
type containerSink struct{ c *Container }

// counter counts the bytes written to the container's file through it.
type counter struct{ c *Container }

func (w counter) Write(p []byte) (int, error) {
	n, err := w.c.f.Write(p)
	w.c.end += int64(n)
	return n, err
}

func (s containerSink) place(name string, write func() error) error {
	if _, ok := s.c.File(name); ok {
		return fmt.Errorf("container %s: %s written twice", s.c.path, name)
	}
	if err := s.c.align(); err != nil {
		return err
	}
	off := s.c.end
	if err := write(); err != nil {
		return err
	}
	s.c.placed = append(s.c.placed, Placed{Name: name, Offset: off, Length: s.c.end - off})
	if s.c.end-off >= syncAheadMin {
		s.c.syncAhead()
	}
	return nil
}

func (s containerSink) writeFile(name string, body func(io.Writer) error) (fi FileInfo, err error) {
	err = s.place(name, func() error {
		h := newChunkHasher()
		bw := bufio1M(hashingWriter{w: counter{s.c}, h: h})
		if err := body(bw); err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		fi = h.info(name)
		return nil
	})
	return fi, err
}

func (s containerSink) writeBytes(name string, b []byte) error {
	return s.place(name, func() error { return s.c.write(b) })
}

func (s containerSink) mapFile(name string) (*mmap.File, error) {
	p, ok := s.c.File(name)
	if !ok {
		return nil, fmt.Errorf("container %s: no %s", s.c.path, name)
	}
	return mmap.OpenRange(s.c.path, p.Offset, p.Length)
}

// finish: the container's creator syncs it once complete.
func (s containerSink) finish() error { return nil }

// errContainerUsed: a Container receives one snapshot.
var errContainerUsed = errors.New("container already holds a snapshot")

// WriteInto is Write into the container c instead of a directory: the
// same files, byte for byte, placed as Container says. c must be fresh
// (nothing written after its header). Nothing is fsynced (Container).
// On error the container is left as it is, for its creator to remove.
func WriteInto(c *Container, t *Table, o WriteOptions) (*Manifest, WriteStats, error) {
	if err := ValidDatasetName(o.Dataset); err != nil {
		return nil, WriteStats{}, err
	}
	if err := t.validate(); err != nil {
		return nil, WriteStats{}, err
	}
	if c.used {
		return nil, WriteStats{}, errContainerUsed
	}
	c.used = true
	defaults(&o)
	cc := cookRows(t, o.Progress)
	return writeCooked(containerSink{c}, cc, t, int64(t.Len()), o)
}

// WriteSortedInto is WriteSorted into the container c (see WriteInto).
// Like WriteSorted it fails with ErrNotSorted, having written nothing, when
// s is not in sorted form.
func WriteSortedInto(c *Container, s *SortedTable, o WriteOptions) (*Manifest, WriteStats, error) {
	if err := ValidDatasetName(o.Dataset); err != nil {
		return nil, WriteStats{}, err
	}
	if err := s.check(); err != nil {
		return nil, WriteStats{}, fmt.Errorf("%w: %v", ErrNotSorted, err)
	}
	if c.used {
		return nil, WriteStats{}, errContainerUsed
	}
	c.used = true
	defaults(&o)
	return writeCooked(containerSink{c}, s.finished(), &Table{Series: s.series}, int64(len(s.c.value)), o)
}
