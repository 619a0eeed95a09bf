//go:build unix

package server

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockTokensFile waits for an exclusive advisory lock on f.
func lockTokensFile(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			return err
		}
	}
}
