//go:build windows

package server

import (
	"os"

	"golang.org/x/sys/windows"
)

// lockTokensFile waits for an exclusive lock on the first byte of f.
func lockTokensFile(f *os.File) error {
	return windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK, 0, 1, 0, new(windows.Overlapped))
}
