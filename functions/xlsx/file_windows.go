//go:build windows

package xlsx

import (
	"errors"
	"os"
	"syscall"
)

// Windows error codes: a file another process has open without sharing.
const (
	errorAccessDenied     syscall.Errno = 5
	errorSharingViolation syscall.Errno = 32
	errorLockViolation    syscall.Errno = 33
	errorDiskFull         syscall.Errno = 112
	errorHandleDiskFull   syscall.Errno = 39
)

// checkNotOpen fails early, before any work, when path exists and another program
// (Excel keeps an open workbook locked) holds it: the rename at the end would fail.
func checkNotOpen(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		var en syscall.Errno
		if errors.As(err, &en) && (en == errorSharingViolation || en == errorLockViolation) {
			return openElsewhere(path)
		}
		return nil // missing, or a problem the write itself will report
	}
	return f.Close()
}

// isLocked reports whether err is a sharing or lock violation, or the access denial a
// rename over an open file gets.
func isLocked(err error) bool {
	var en syscall.Errno
	if !errors.As(err, &en) {
		return false
	}
	return en == errorSharingViolation || en == errorLockViolation || en == errorAccessDenied
}

func isNoSpace(err error) bool {
	var en syscall.Errno
	return errors.As(err, &en) && (en == errorDiskFull || en == errorHandleDiskFull)
}
