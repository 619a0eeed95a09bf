//go:build !windows

package xlsx

import (
	"errors"
	"syscall"
)

// checkNotOpen: Unix lets a file that another program has open be replaced.
func checkNotOpen(string) error { return nil }

// isLocked: Unix has no mandatory locks that stop a rename.
func isLocked(error) bool { return false }

func isNoSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }
