// Package flock takes an exclusive advisory lock on a file, so that only
// one process writes a home directory at a time. The syscalls live in
// flock_unix.go and flock_windows.go.
package flock

import (
	"errors"
	"os"
)

// ErrLocked means another process holds the lock.
var ErrLocked = errors.New("locked by another process")

// Lock is a held lock; Unlock releases it.
type Lock struct{ f *os.File }

// TryLock locks path (creating it) without waiting.
func TryLock(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, err
	}
	return &Lock{f: f}, nil
}

// Unlock releases the lock.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing releases the lock on every platform
	l.f = nil
	return err
}
