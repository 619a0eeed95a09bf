// Package fileutil is the one owner of durable writes: write a temporary
// file in the target's directory, fsync it, rename it over the target and
// fsync the directory, so that after a crash the target holds either the
// old bytes or the new ones, never a mix or nothing (Prometheus
// tsdb/fileutil, Pebble vfs/atomicfs).
//
// Every writer in the module that must survive a crash goes through it:
// the snapshot format (manifests, CURRENT, staged files), the delta's
// write-ahead log, the sync client's downloads, the server's tokens, the
// bridge's certificates, the companion's settings and the workbook
// export. The operating-system difference (a directory cannot be fsynced
// on Windows) lives in fileutil_unix.go and fileutil_windows.go.
//
// It is a leaf: it imports only the standard library and golang.org/x/sys,
// so any package may use it, including localcache/format, which otherwise
// imports no project package. Allowing format this one import keeps the
// rule that matters (the format owns its bytes and depends on nothing that
// knows about stores, sync or servers) while the knowledge of how to make a
// write durable exists once.
//
// It is not a general file helper: reading, listing and path layout live
// with the packages that own those files.
package fileutil

import (
	"errors"
	"os"
	"path/filepath"
)

// WriteFile replaces path with data atomically and durably: data goes to a
// temporary file in path's directory, which is fsynced, given perm,
// renamed over path, and the directory is fsynced. On any error the old
// file at path (if any) is untouched and the temporary file is removed.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	f, err := CreateTemp(path, perm)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Commit()
}

// WriteNew creates (or truncates) path, writes data and fsyncs the file.
// It is not atomic: it is for files inside a staging directory that is
// published whole by a Rename, whose caller fsyncs the directory before
// that rename.
func WriteNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return SyncClose(f)
}

// SyncClose fsyncs f and closes it, returning the first error. A streamed
// writer calls it when the last byte is written; the file is then durable
// under its current name, and its directory entry once the directory is
// synced (SyncDir) or it is renamed with Rename.
func SyncClose(f *os.File) error {
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// SyncOpen fsyncs f, a file kept open and written in place (a container
// its writer appends to and then hands on), and then dir, the directory
// that holds it now: its bytes and its directory entry are durable.
func SyncOpen(f *os.File, dir string) error {
	if err := f.Sync(); err != nil {
		return err
	}
	return SyncDir(dir)
}

// Rename renames oldpath to newpath (a file or a directory) and makes the
// rename durable: it fsyncs newpath's directory, and oldpath's too when it
// differs (the old entry's removal is part of the change).
func Rename(oldpath, newpath string) error {
	if err := rename(oldpath, newpath); err != nil {
		return err
	}
	newDir, oldDir := filepath.Dir(newpath), filepath.Dir(oldpath)
	if err := SyncDir(newDir); err != nil {
		return err
	}
	if filepath.Clean(oldDir) != filepath.Clean(newDir) {
		return SyncDir(oldDir)
	}
	return nil
}

// SyncDir makes the creations, removals and renames in dir durable. On
// Windows it does nothing (fileutil_windows.go says why).
func SyncDir(dir string) error { return syncDir(dir) }

// TempFile is a file being written under a temporary name beside its
// target. Commit publishes it; Close without Commit removes it. Write to
// it through the embedded *os.File.
type TempFile struct {
	*os.File
	target string
	done   bool // committed or closed
}

// CreateTemp starts a streamed replacement of path: a new temporary file
// in path's directory with mode perm (on Windows only the read-only bit
// exists; the file's privacy comes from the directory's ACL). The caller
// writes to it, then calls Commit; a deferred Close cleans up any path
// that did not commit.
func CreateTemp(path string, perm os.FileMode) (*TempFile, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, err
	}
	if err := chmod(f, perm); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &TempFile{File: f, target: path}, nil
}

// ErrDone is returned by Commit after Commit or Close.
var ErrDone = errors.New("fileutil: temporary file already committed or closed")

// Commit fsyncs and closes the temporary file, renames it over the target
// and fsyncs the directory. On an error before the rename the target is
// untouched and the temporary file is removed.
func (t *TempFile) Commit() error {
	if t.done {
		return ErrDone
	}
	t.done = true
	tmp := t.File.Name()
	if err := SyncClose(t.File); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := rename(tmp, t.target); err != nil {
		os.Remove(tmp)
		return err
	}
	return SyncDir(filepath.Dir(t.target))
}

// Close abandons an uncommitted temporary file (closes and removes it);
// after Commit it does nothing.
func (t *TempFile) Close() error {
	if t.done {
		return nil
	}
	t.done = true
	err := t.File.Close()
	if rerr := os.Remove(t.File.Name()); err == nil {
		err = rerr
	}
	return err
}
