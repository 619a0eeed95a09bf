package deltalog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/energyscope/energyscope/localcache/format"
)

// Append logs recs as one message of dataset's stream and returns the
// seqs it assigned them (first..last, contiguous after the dataset's
// head). It returns after JetStream acknowledged the message (package
// doc, Durability). The caller's Seq fields are ignored and left as they
// are.
//
// key identifies the append: a retry with the same key (from this Log or
// any other, within the duplicate window) stores nothing and returns the
// first append's seqs. Append retries lost connections, timeouts and
// elections with the same key until ctx ends; on an error the batch may
// or may not be in the log, and the caller retries with the same key.
//
// Bad input changes nothing: ErrEmpty, ErrBadKey, ErrBadName,
// ErrBadRecord (format.ValidateRecords), *TooLargeError,
// ErrUnknownDataset, ErrNameConflict.
func (l *Log) Append(ctx context.Context, name string, recs []format.Record, key string) (first, last uint64, err error) {
	if err := checkKey(key); err != nil {
		return 0, 0, err
	}
	if len(recs) == 0 {
		return 0, 0, ErrEmpty
	}
	batch := slices.Clone(recs)
	for i := range batch {
		batch[i].Seq = uint64(i) + 1 // the real seqs come from the tail; validity does not depend on them
	}
	if err := format.ValidateRecords(batch); err != nil {
		return 0, 0, err
	}
	d, err := l.dataset(ctx, name)
	if err != nil {
		return 0, 0, err
	}
	d.amu.Lock()
	defer d.amu.Unlock()
	return l.publish(ctx, d, batch, key, false, 0)
}

// Advance makes dataset's next record seq at least to+1: when the log's
// head is below to, it logs a skip message for head+1..to (message.go),
// which holds no record; readers pass over it. A dataset whose snapshot
// covers more than its log holds (a vintage installed from the lake, a
// log created anew beside an existing home) numbers its next records
// above the snapshot this way. Replicas advancing to the same seq log one
// message (its key is derived from to).
func (l *Log) Advance(ctx context.Context, name string, to uint64) error {
	d, err := l.dataset(ctx, name)
	if err != nil {
		return err
	}
	d.amu.Lock()
	defer d.amu.Unlock()
	_, _, err = l.publish(ctx, d, nil, "es-advance-"+strconv.FormatUint(to, 10), true, to)
	return err
}

// publish logs batch (or, with skip, a skip message through skipTo when
// the tail is below it) under key. d.amu is held.
func (l *Log) publish(ctx context.Context, d *dataset, batch []format.Record, key string, skip bool, skipTo uint64) (first, last uint64, err error) {
	name := d.name
	backoff := 50 * time.Millisecond
	for conflicts := 0; ; {
		if !d.tailKnown {
			if err := l.readTail(ctx, d); err != nil {
				if !retryable(err) || ctx.Err() != nil {
					return 0, 0, fmt.Errorf("deltalog: append to %s: %w", name, err)
				}
				l.m.retries.Add(1)
				l.opts.Logger.Warn("delta log: read tail, retrying", "dataset", name, "err", err)
				if err := pause(ctx, backoff); err != nil {
					return 0, 0, fmt.Errorf("deltalog: append to %s: %w", name, err)
				}
				backoff = min(2*backoff, time.Second)
				continue
			}
		}
		first = d.tailSeq + 1
		last = first + uint64(len(batch)) - 1
		if skip {
			if d.tailSeq >= skipTo {
				return d.tailSeq, d.tailSeq, nil // the head is there already
			}
			last = skipTo
		}
		for i := range batch {
			batch[i].Seq = first + uint64(i)
		}
		if d.buf = encodeMessage(d.buf[:0], batch); len(d.buf)-msgHeader > l.MaxBatchBytes() {
			return 0, 0, &TooLargeError{Records: len(batch), Bytes: len(d.buf), Limit: l.MaxBatchBytes() + msgHeader}
		}
		m := &nats.Msg{Subject: Subject(d.name), Data: d.buf, Header: nats.Header{}}
		m.Header.Set(hdrSeq, seqHeader(first, last))
		actx, cancel := context.WithTimeout(ctx, l.opts.AttemptTimeout)
		ack, err := l.js.PublishMsg(actx, m, jetstream.WithMsgID(key), jetstream.WithExpectLastSequence(d.tailStream))
		cancel()
		switch {
		case err == nil && ack.Duplicate:
			// Stored before under this key (an earlier attempt, or another
			// writer's): its seqs are the answer.
			d.tailKnown = false
			f, la, err := l.messageSeqs(ctx, d, ack.Sequence)
			if errors.Is(err, ErrCorrupt) {
				// Trimmed since: the key's append is below the log's start.
				return 0, 0, fmt.Errorf("%w: %s: key %q was stored as message %d, which is trimmed", ErrTrimmed, name, key, ack.Sequence)
			}
			if err != nil {
				return 0, 0, fmt.Errorf("deltalog: append to %s: a retry of key %q: %w", name, key, err)
			}
			l.m.appends.Add(1)
			l.m.duplicates.Add(1)
			l.m.records.Add(int64(la - f + 1))
			return f, la, nil
		case err == nil:
			if ack.Sequence != d.tailStream+1 {
				// The expected-last-sequence check makes this impossible;
				// if a server broke it, the next reader sees the gap.
				d.tailKnown = false
				return 0, 0, &CorruptionError{Dataset: d.name, StreamSeq: ack.Sequence, Err: fmt.Errorf("stored after message %d, expected after %d", ack.Sequence-1, d.tailStream)}
			}
			d.tailStream, d.tailSeq = ack.Sequence, last
			if skip {
				return first, last, nil
			}
			l.m.appends.Add(1)
			l.m.records.Add(int64(len(batch)))
			return first, last, nil
		case isAPIError(err, jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant):
			// Another writer appended since the tail was read: renumber.
			d.tailKnown = false
			l.m.conflicts.Add(1)
			if conflicts++; conflicts > 3 {
				if err := pause(ctx, time.Duration(conflicts)*time.Millisecond); err != nil {
					return 0, 0, fmt.Errorf("deltalog: append to %s: %w", name, err)
				}
			}
		case isAPIError(err, jsErrDuplicateInProcess) || retryable(err):
			// The message may be stored (or be being stored): retry under the
			// same key, which stores it at most once.
			d.tailKnown = false
			if ctx.Err() != nil {
				return 0, 0, fmt.Errorf("deltalog: append to %s: %w (the batch may be in the log: retry with the same key)", name, err)
			}
			l.m.retries.Add(1)
			l.opts.Logger.Warn("delta log: append, retrying with the same key", "dataset", name, "key", key, "err", err)
			if err := pause(ctx, backoff); err != nil {
				return 0, 0, fmt.Errorf("deltalog: append to %s: %w (the batch may be in the log: retry with the same key)", name, err)
			}
			backoff = min(2*backoff, time.Second)
		case isAPIError(err, jetstream.JSErrCodeStreamNotFound):
			return 0, 0, fmt.Errorf("%w: %s", ErrUnknownDataset, name)
		default:
			return 0, 0, fmt.Errorf("deltalog: append to %s: %w", name, err)
		}
	}
}

// jsErrDuplicateInProcess: a message with the key is being stored (a
// cluster's proposal in flight).
const jsErrDuplicateInProcess jetstream.ErrorCode = 10158

// jsErrNoPeers: a cluster cannot place a stream's replicas (yet).
const jsErrNoPeers jetstream.ErrorCode = 10005

func isAPIError(err error, codes ...jetstream.ErrorCode) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return slices.Contains(codes, apiErr.ErrorCode)
}

// readTail sets d's tail from the stream: its last message's stream seq
// and last record seq (d.after when the stream has none).
func (l *Log) readTail(ctx context.Context, d *dataset) error {
	info, err := l.info(ctx, d)
	if err != nil {
		return err
	}
	if info.State.LastSeq == 0 {
		d.tailStream, d.tailSeq, d.tailKnown = 0, d.after, true
		return nil
	}
	_, last, err := l.messageSeqs(ctx, d, info.State.LastSeq)
	if err != nil {
		return err
	}
	d.tailStream, d.tailSeq, d.tailKnown = info.State.LastSeq, last, true
	return nil
}

// messageSeqs reads the record seqs message seq holds (its Es-Seq).
func (l *Log) messageSeqs(ctx context.Context, d *dataset, seq uint64) (first, last uint64, err error) {
	actx, cancel := context.WithTimeout(ctx, l.opts.AttemptTimeout)
	m, err := d.stream.GetMsg(actx, seq)
	cancel()
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, 0, &CorruptionError{Dataset: d.name, StreamSeq: seq, Err: errors.New("message missing (deleted or purged outside Trim)")}
		}
		return 0, 0, err
	}
	first, last, err = parseSeqHeader(m.Header.Get(hdrSeq))
	if err != nil {
		return 0, 0, &CorruptionError{Dataset: d.name, StreamSeq: seq, Err: err}
	}
	return first, last, nil
}

// info is the stream's info, within one attempt's time (a request
// during an election may go unanswered).
func (l *Log) info(ctx context.Context, d *dataset) (*jetstream.StreamInfo, error) {
	actx, cancel := context.WithTimeout(ctx, l.opts.AttemptTimeout)
	defer cancel()
	return d.stream.Info(actx)
}
