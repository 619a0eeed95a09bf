//go:build !windows

package fileutil

import (
	"errors"
	"os"
	"syscall"
)

// syncDir fsyncs the directory itself: on POSIX systems a new, removed or
// renamed entry is durable only once its directory is synced.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) {
		return nil // file systems that cannot sync a directory (some network mounts)
	}
	return err
}

func rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

func chmod(f *os.File, perm os.FileMode) error { return f.Chmod(perm) }
