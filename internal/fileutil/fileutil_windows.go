//go:build windows

package fileutil

import (
	"os"

	"golang.org/x/sys/windows"
)

// syncDir does nothing on Windows: a directory cannot be opened for
// writing to call FlushFileBuffers on it, and Go's File.Sync on a
// directory handle fails. The equivalent guarantee comes from rename,
// which asks MoveFileEx for MOVEFILE_WRITE_THROUGH: the move is flushed
// to disk before it returns, and NTFS journals its metadata, so the
// directory entry is as durable as an fsynced directory would make it.
// Files created in a directory and then fsynced (their own data and
// size) are found after a crash through the NTFS journal.
func syncDir(string) error { return nil }

// rename is os.Rename (MoveFileEx with MOVEFILE_REPLACE_EXISTING) plus
// MOVEFILE_WRITE_THROUGH, the Windows stand-in for fsyncing the directory.
func rename(oldpath, newpath string) error {
	from, err := windows.UTF16PtrFromString(oldpath)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	to, err := windows.UTF16PtrFromString(newpath)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	if err := windows.MoveFileEx(from, to, windows.MOVEFILE_REPLACE_EXISTING|windows.MOVEFILE_WRITE_THROUGH); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return nil
}

// chmod: on Windows only the read-only bit exists and setting it would
// make the file impossible to replace; the file is private through the
// ACL of the directory it lives in.
func chmod(*os.File, os.FileMode) error { return nil }
