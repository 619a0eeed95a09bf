//go:build !windows

package xlsx

import (
	"errors"
	"os"
	"syscall"
)

// syncDir makes a rename in dir durable.
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
		return nil // file systems that cannot sync a directory
	}
	return err
}

// checkNotOpen: Unix lets a file that another program has open be replaced.
func checkNotOpen(string) error { return nil }

// isLocked: Unix has no mandatory locks that stop a rename.
func isLocked(error) bool { return false }

func isNoSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }
