package lake

import (
	"cmp"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/energyscope/energyscope/internal/fileutil"
)

// iceberg-go's LocalFS never fsyncs: a crash after the catalog commit
// could leave the catalog naming a metadata file, manifest or data file
// that never reached the disk. Open replaces the "file" (and empty)
// scheme of iceberg-go's IO registry, once per process, with syncFS:
// every file the library or this package writes is fsynced when it is
// closed, then its directory, and every directory created on the way
// (FORMAT.md's rules for the rest of the store). The catalog commit comes
// after the writer closed its files, so once CommitTable returns, the
// snapshot's files are durable; the catalog database (SQLite in WAL mode,
// synchronous=FULL) makes the swap itself durable.
//
// The registry is process-wide: in a process that opens a Lake, every
// iceberg-go table on a local path is written through syncFS.

var registerOnce sync.Once

func registerSyncFS() {
	registerOnce.Do(func() {
		f := func(context.Context, *url.URL, map[string]string) (iceio.IO, error) { return syncFS{}, nil }
		for _, scheme := range []string{"file", ""} {
			iceio.Unregister(scheme)
			iceio.Register(scheme, f)
		}
	})
}

// syncHook, when set (tests only), is told every path syncFS fsynced:
// files and directories.
var syncHook atomic.Pointer[func(path string)]

func noteSynced(path string) {
	if h := syncHook.Load(); h != nil {
		(*h)(path)
	}
}

// syncedDirs remembers directories whose own entry in their parent is
// known durable, so that a file's ancestors are fsynced once per process
// rather than at every file.
var syncedDirs sync.Map

// syncFS is iceberg-go's LocalFS with fsync on every write.
type syncFS struct{ iceio.LocalFS }

var (
	_ iceio.WriteFileIO = syncFS{}
	_ iceio.ListableIO  = syncFS{}
)

func (fs syncFS) Create(name string) (iceio.FileWriter, error) {
	w, err := fs.LocalFS.Create(name)
	if err != nil {
		return nil, err
	}
	f, ok := w.(*os.File)
	if !ok {
		return w, nil
	}
	return &syncFile{File: f}, nil
}

func (fs syncFS) WriteFile(name string, b []byte) error {
	w, err := fs.Create(name)
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

func (fs syncFS) Rename(oldpath, newpath string) error {
	if err := fs.LocalFS.Rename(oldpath, newpath); err != nil {
		return err
	}
	return syncParents(localPathOf(newpath))
}

func (fs syncFS) RenameNoReplace(oldpath, newpath string) error {
	if err := fs.LocalFS.RenameNoReplace(oldpath, newpath); err != nil {
		return err
	}
	return syncParents(localPathOf(newpath))
}

// localPathOf turns a file URI or a plain path into a path.
func localPathOf(name string) string {
	if u, err := url.Parse(name); err == nil && u.Scheme == "file" {
		return filepath.FromSlash(u.Path)
	}
	return name
}

// syncFile fsyncs the file, its directory and any new ancestors on Close.
// A large file (a data file, a Puffin file) starts its writeback in the
// background every syncAheadBytes written, so that Close's fsync has
// little left to flush.
type syncFile struct {
	*os.File
	unsynced int64      // bytes written since the last background fsync began
	ahead    chan error // the background fsync running, if any
	aheadErr error      // the first error of a background fsync
}

// syncAheadBytes: a test lowers it.
var syncAheadBytes int64 = 32 << 20

func (f *syncFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	if f.unsynced += int64(n); f.unsynced >= syncAheadBytes {
		f.syncAhead()
	}
	return n, err
}

// syncAhead starts a background fsync unless one is still running.
func (f *syncFile) syncAhead() {
	if f.ahead != nil {
		select {
		case err := <-f.ahead:
			f.aheadErr = cmp.Or(f.aheadErr, err)
		default:
			return
		}
	}
	f.unsynced = 0
	ch := make(chan error, 1)
	f.ahead = ch
	file, dir := f.File, filepath.Dir(f.Name())
	go func() { ch <- fileutil.SyncOpen(file, dir) }()
}

func (f *syncFile) Close() error {
	if f.ahead != nil {
		f.aheadErr = cmp.Or(f.aheadErr, <-f.ahead)
		f.ahead = nil
	}
	if f.aheadErr != nil {
		// A failed writeback is reported to one fsync only: this file's
		// bytes are not known durable.
		f.File.Close()
		return f.aheadErr
	}
	if err := fileutil.SyncClose(f.File); err != nil {
		return err
	}
	noteSynced(f.Name())
	return syncParents(f.Name())
}

// syncParents fsyncs the directory of path, and walks up fsyncing the
// parent of every directory not yet known durable.
func syncParents(path string) error {
	dir := filepath.Dir(path)
	if err := fileutil.SyncDir(dir); err != nil {
		return err
	}
	noteSynced(dir)
	for {
		if _, ok := syncedDirs.Load(dir); ok {
			return nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil
		}
		if err := fileutil.SyncDir(parent); err != nil {
			return err
		}
		noteSynced(parent)
		syncedDirs.Store(dir, struct{}{})
		dir = parent
	}
}
