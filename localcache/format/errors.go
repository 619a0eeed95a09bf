package format

import (
	"errors"
	"fmt"
)

// ErrNotFound is returned for a series that is not in a snapshot.
var ErrNotFound = errors.New("series not found")

// ErrChunkMismatch: a 4 MiB chunk of a file being received did not match
// the manifest's chunk hash (the bytes were damaged in transit). It comes
// wrapped in a *CorruptionError whose Offset is the chunk's first byte:
// fetch the chunk again from there.
var ErrChunkMismatch = errors.New("chunk SHA-256 differs from the manifest")

// CorruptionError says that a file of a snapshot is not what the format
// requires. File is the file's name within the snapshot directory, Offset the
// byte offset where the problem was found (-1 when it is the whole file).
type CorruptionError struct {
	File   string
	Offset int64
	Err    error
}

func (e *CorruptionError) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("corrupt %s at offset %d: %v", e.File, e.Offset, e.Err)
	}
	return fmt.Sprintf("corrupt %s: %v", e.File, e.Err)
}

func (e *CorruptionError) Unwrap() error { return e.Err }

func corrupt(file string, off int64, format string, args ...any) *CorruptionError {
	return &CorruptionError{File: file, Offset: off, Err: fmt.Errorf(format, args...)}
}
