package localcache

import (
	"errors"
	"fmt"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/internal/flock"
)

// Errors of the package, in one place: sentinels for errors.Is, and
// *DamageError for errors.As. Everything else is wrapped with %w.

// Sentinel errors.
var (
	// ErrNotFound: no dataset of the home has the series.
	ErrNotFound = format.ErrNotFound
	// ErrNoDataset: the named dataset does not exist.
	ErrNoDataset = errors.New("dataset not found")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store closed")
	// ErrHomeLocked: another process (es serve, a companion) holds the
	// home's writer lock; Open of a writable store wraps it.
	ErrHomeLocked = flock.ErrLocked
)

// ErrReadOnly is returned by writes to a store opened read-only.
var ErrReadOnly = errors.New("store is read-only")

// ErrDamaged is what every error about a damaged dataset wraps.
var ErrDamaged = errors.New("dataset damaged")

// DamageError says why a dataset is damaged. Err is usually a
// *format.CorruptionError (errors.As finds it).
type DamageError struct {
	Dataset string
	Err     error
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("dataset %s is damaged and must be re-installed: %v", e.Dataset, e.Err)
}

// Unwrap gives both ErrDamaged and the cause to errors.Is/As.
func (e *DamageError) Unwrap() []error { return []error{ErrDamaged, e.Err} }

// ErrFacetsStale is returned by Browse when the dataset's snapshot is no
// longer the one its Facets were computed from: compute them again.
var ErrFacetsStale = errors.New("facets are of an older snapshot")

// ErrBelowSnapshot is returned by Truncate when the records to drop are
// already folded into the snapshot in service: only a snapshot from the
// server (a download) can undo them.
var ErrBelowSnapshot = errors.New("seq is below what the snapshot in service covers")

// errScrubSkipped: the scrub could not read a file (no verdict).
var errScrubSkipped = errors.New("scrub skipped")

// ErrFormatVersion: a compaction was asked to write a snapshot format
// version this build does not write (Options.FormatVersion,
// CompactThroughVersion); see format.MinFormatVersion..FormatVersion.
var ErrFormatVersion = errors.New("snapshot format version not written by this build")
