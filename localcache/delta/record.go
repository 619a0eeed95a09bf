// Package delta holds the live updates of a dataset that are not yet folded
// into its snapshot: a write-ahead log of CRC-framed batches on disk and a
// per-series, period-sorted view in memory that shadows the snapshot on
// read.
//
// A batch is durable (written and fsynced) before Apply returns, and it is
// visible to readers all at once or not at all. Records carry sequence
// numbers assigned by the server; they are strictly increasing per dataset
// and a record whose seq was already applied is skipped, so applying the
// same batch twice is a no-op.
//
// This package does not know about snapshots beyond the format types; the
// store (package localcache) combines a snapshot and a delta into a read
// state.
package delta

import (
	"errors"
	"fmt"
	"math"

	"github.com/energyscope/energyscope/localcache/format"
)

// Op is what a record does to its point.
type Op uint8

const (
	// Upsert sets the value at (series, normalized period).
	Upsert Op = 1
	// Delete removes the point at (series, normalized period).
	Delete Op = 2
)

func (o Op) String() string {
	switch o {
	case Upsert:
		return "upsert"
	case Delete:
		return "delete"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Meta is series metadata carried by a record; a record with Meta may
// create a series that the snapshot does not have.
type Meta struct {
	Name      string
	Unit      string
	Source    string
	Frequency format.Frequency
}

// Record is one update.
type Record struct {
	Seq      uint64
	Op       Op
	SeriesID string
	Period   int64   // unix seconds UTC; normalized to the series' bucket on apply
	Value    float64 // ignored for Delete
	Meta     *Meta   // optional
}

// ErrBadRecord wraps every validation failure of a batch.
var ErrBadRecord = errors.New("bad delta record")

// Validate checks a batch before anything is written: ops, ids (the
// rules of format.ValidSeriesID, shared with cook), finite values, known
// frequencies, and strictly increasing seqs.
func Validate(batch []Record) error {
	var prev uint64
	for i := range batch {
		r := &batch[i]
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: record %d (seq %d, series %q): %s", ErrBadRecord, i, r.Seq, r.SeriesID, fmt.Sprintf(format, args...))
		}
		if r.Seq == 0 {
			return bad("seq 0 is reserved")
		}
		if i > 0 && r.Seq <= prev {
			return bad("seq %d does not follow %d: seqs must strictly increase", r.Seq, prev)
		}
		prev = r.Seq
		if r.Op != Upsert && r.Op != Delete {
			return bad("unknown op %d", r.Op)
		}
		if err := format.ValidSeriesID(r.SeriesID); err != nil {
			return bad("%v", err)
		}
		if r.Period < minPeriod || r.Period > maxPeriod {
			return bad("period %d is outside the range a snapshot can hold", r.Period)
		}
		if r.Op == Upsert && (math.IsNaN(r.Value) || math.IsInf(r.Value, 0)) {
			return bad("value %v is not a finite number", r.Value)
		}
		if r.Meta != nil {
			if r.Meta.Frequency != "" {
				if _, err := format.ParseFrequency(string(r.Meta.Frequency)); err != nil {
					return bad("%v", err)
				}
			}
			if len(r.Meta.Name) > maxMetaLen || len(r.Meta.Unit) > maxMetaLen || len(r.Meta.Source) > maxMetaLen {
				return bad("metadata longer than %d bytes", maxMetaLen)
			}
		}
	}
	return nil
}

const (
	maxIDLen   = format.MaxSeriesIDLen
	maxMetaLen = 4096
)

// The periods a record may carry: format's limits for a live record (a
// record outside them would be logged and acknowledged and then make every
// compaction of the dataset fail).
const (
	minPeriod = format.MinRecordPeriod
	maxPeriod = format.MaxPeriod
)
