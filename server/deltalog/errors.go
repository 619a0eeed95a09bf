package deltalog

import (
	"errors"
	"fmt"

	"github.com/energyscope/energyscope/localcache/format"
)

var (
	// ErrBadName: the dataset name breaks format.ValidDatasetName.
	ErrBadName = errors.New("bad dataset name")
	// ErrNameConflict: the name differs only by case from the dataset the
	// log holds under that name.
	ErrNameConflict = errors.New("dataset name conflicts by case")
	// ErrUnknownDataset: the log holds no stream for the dataset (Create
	// makes one).
	ErrUnknownDataset = errors.New("unknown dataset")
	// ErrBadKey: an idempotency key that is empty, longer than MaxKeyLen
	// or holds a byte outside printable ASCII.
	ErrBadKey = errors.New("bad idempotency key")
	// ErrEmpty: an append of no records.
	ErrEmpty = errors.New("no records")
	// ErrBadRecord is format.ErrBadRecord: a record that would be logged
	// and then break every compaction.
	ErrBadRecord = format.ErrBadRecord
	// ErrTooLarge is matched by every *TooLargeError.
	ErrTooLarge = errors.New("batch too large for one message")
	// ErrTrimmed: the log no longer reaches back to the seq asked for.
	ErrTrimmed = errors.New("log trimmed past the seq asked for")
	// ErrAhead: a read from beyond the head + 1.
	ErrAhead = errors.New("seq is beyond the log's head")
	// ErrCorrupt is matched by every *CorruptionError.
	ErrCorrupt = errors.New("delta log message corrupt")
	// ErrClosed: the Log was closed.
	ErrClosed = errors.New("delta log closed")
)

// TooLargeError is a batch whose message would exceed what the NATS
// connection accepts in one message (the server's max_payload, less
// room for headers). Nothing was written: split the batch.
type TooLargeError struct {
	Records int
	Bytes   int // encoded message payload
	Limit   int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("a batch of %d records takes %d bytes, over the %d-byte message limit: send it in smaller batches", e.Records, e.Bytes, e.Limit)
}

// Is makes errors.Is(err, ErrTooLarge) true.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// CorruptionError is a message of the stream that does not decode (bad
// envelope or checksum, records that do not match its Es-Seq header, or
// a seq that does not follow the message before it).
type CorruptionError struct {
	Dataset   string
	StreamSeq uint64
	Err       error
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("delta log of %s: message %d: %v", e.Dataset, e.StreamSeq, e.Err)
}

func (e *CorruptionError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }
