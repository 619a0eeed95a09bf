package deltalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/energyscope/energyscope/localcache/format"
)

// span is where a dataset's log stands: its messages (stream seqs
// firstMsg..lastMsg, none when lastMsg < firstMsg) and the record seqs
// they hold (low..head; low = head+1 when none).
type span struct {
	firstMsg, lastMsg uint64
	low, head         uint64
}

func (l *Log) span(ctx context.Context, d *dataset) (span, error) {
	info, err := l.info(ctx, d)
	if err != nil {
		return span{}, err
	}
	st := info.State
	if st.LastSeq == 0 {
		return span{firstMsg: 1, lastMsg: 0, low: d.after + 1, head: d.after}, nil
	}
	if st.Msgs == 0 {
		return span{}, &CorruptionError{Dataset: d.name, StreamSeq: st.LastSeq, Err: errors.New("the stream holds no message: its head was purged outside Trim")}
	}
	_, head, err := l.messageSeqs(ctx, d, st.LastSeq)
	if err != nil {
		return span{}, err
	}
	low, _, err := l.messageSeqs(ctx, d, st.FirstSeq)
	if err != nil {
		return span{}, err
	}
	return span{firstMsg: st.FirstSeq, lastMsg: st.LastSeq, low: low, head: head}, nil
}

// locate returns the stream seq of the message holding record seq (the
// next stream seq when seq is head+1).
func (l *Log) locate(ctx context.Context, d *dataset, sp span, seq uint64) (uint64, error) {
	switch {
	case seq > sp.head+1:
		return 0, fmt.Errorf("%w: %s: seq %d, head %d", ErrAhead, d.name, seq, sp.head)
	case seq == sp.head+1:
		return sp.lastMsg + 1, nil
	case seq < sp.low:
		return 0, fmt.Errorf("%w: %s: seq %d, the log holds %d..%d", ErrTrimmed, d.name, seq, sp.low, sp.head)
	}
	// The last message whose first record is at or below seq: seqs rise
	// with stream seqs, and no message is missing between firstMsg and
	// lastMsg (DenyDelete; Trim purges a prefix).
	lo, hi := sp.firstMsg, sp.lastMsg
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		f, _, err := l.messageSeqs(ctx, d, mid)
		if err != nil {
			return 0, err
		}
		if f <= seq {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, nil
}

// Head is the seq of dataset's last logged record (Create's After when
// none).
func (l *Log) Head(ctx context.Context, name string) (uint64, error) {
	d, err := l.dataset(ctx, name)
	if err != nil {
		return 0, err
	}
	sp, err := l.span(ctx, d)
	if err != nil {
		return 0, fmt.Errorf("deltalog: head of %s: %w", name, err)
	}
	return sp.head, nil
}

// Read returns dataset's records from seq from (>= 1) through its head
// at the call, in seq order: the catch-up of a client that holds
// everything below from. ErrTrimmed: the log no longer holds from;
// ErrAhead: from is beyond head + 1 (a client ahead of the log).
func (l *Log) Read(ctx context.Context, name string, from uint64) ([]format.Record, error) {
	var out []format.Record
	err := l.scan(ctx, name, from, true, func(recs []format.Record) error {
		out = append(out, recs...)
		return nil
	})
	return out, err
}

// Follow calls fn with dataset's records from seq from (>= 1) on, one
// batch per call in seq order, with no gap and no repeat: the catch-up,
// then each batch as it is logged. It returns when ctx ends (ctx.Err()),
// when fn returns an error (that error), or on ErrTrimmed (the log was
// trimmed past a record not yet delivered), ErrAhead or a
// *CorruptionError. The records passed to fn are its own.
func (l *Log) Follow(ctx context.Context, name string, from uint64, fn func([]format.Record) error) error {
	return l.scan(ctx, name, from, false, fn)
}

func (l *Log) scan(ctx context.Context, name string, from uint64, stopAtHead bool, fn func([]format.Record) error) error {
	if from == 0 {
		from = 1
	}
	d, err := l.dataset(ctx, name)
	if err != nil {
		return err
	}
	sp, err := l.span(ctx, d)
	if err != nil {
		return fmt.Errorf("deltalog: read %s: %w", name, err)
	}
	start, err := l.locate(ctx, d, sp, from)
	if err != nil {
		return err
	}
	if stopAtHead && start > sp.lastMsg {
		return nil
	}
	cons, err := d.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   start,
	})
	if err != nil {
		return fmt.Errorf("deltalog: read %s: %w", name, err)
	}
	it, err := cons.Messages(jetstream.PullMaxBytes(max(64<<20, 2*int(l.nc.MaxPayload()))))
	if err != nil {
		return fmt.Errorf("deltalog: read %s: %w", name, err)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			it.Stop()
		case <-done:
			it.Stop()
		}
	}()
	next := from
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("deltalog: read %s: %w", name, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("deltalog: read %s: %w", name, err)
		}
		sseq := md.Sequence.Stream
		recs, err := decodeMessage(m.Headers().Get(hdrSeq), m.Data())
		if err != nil {
			return &CorruptionError{Dataset: d.name, StreamSeq: sseq, Err: err}
		}
		first, last, _ := parseSeqHeader(m.Headers().Get(hdrSeq)) // checked by decodeMessage
		switch {
		case first > next:
			// The ordered consumer skips what a Trim removed under it.
			return fmt.Errorf("%w: %s: message %d starts at seq %d, the next to deliver is %d", ErrTrimmed, d.name, sseq, first, next)
		case last >= next:
			if len(recs) > 0 { // else a skip message
				if err := fn(recs[next-first:]); err != nil {
					return err
				}
			}
			next = last + 1
		}
		if stopAtHead && sseq >= sp.lastMsg {
			return nil
		}
	}
}

// Trim drops dataset's messages whose records are all below seq below,
// except the last message (package doc). Records at or above below stay;
// so may a few below it, in the message that holds below.
func (l *Log) Trim(ctx context.Context, name string, below uint64) error {
	d, err := l.dataset(ctx, name)
	if err != nil {
		return err
	}
	sp, err := l.span(ctx, d)
	if err != nil {
		return fmt.Errorf("deltalog: trim %s: %w", name, err)
	}
	if sp.lastMsg < sp.firstMsg || below <= sp.low {
		return nil
	}
	keep := sp.lastMsg
	if below <= sp.head {
		if keep, err = l.locate(ctx, d, sp, below); err != nil {
			return fmt.Errorf("deltalog: trim %s: %w", name, err)
		}
	}
	if keep <= sp.firstMsg {
		return nil
	}
	if err := d.stream.Purge(ctx, jetstream.WithPurgeSequence(keep)); err != nil {
		return fmt.Errorf("deltalog: trim %s: %w", name, err)
	}
	return nil
}
