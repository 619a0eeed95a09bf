package deltalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrRevision: a KV.Put whose value changed (or was created) since the
// revision it was given. Read again and retry.
var ErrRevision = errors.New("deltalog: the value changed since it was read")

// KV is one key-value bucket of the log's JetStream, replicated like the
// streams (Options.Replicas): the small state replicas share besides the
// deltas (the server's tokens, server.LoadSharedTokens). Every Put is a
// compare-and-swap on the key's revision.
type KV struct {
	bucket  string
	kv      jetstream.KeyValue
	attempt time.Duration // bounds one request (Options.AttemptTimeout)
}

// KV opens (creating if needed) the bucket named bucket (letters,
// digits, '-' and '_').
func (l *Log) KV(ctx context.Context, bucket string) (*KV, error) {
	cfg := jetstream.KeyValueConfig{Bucket: bucket, History: 5, Replicas: l.opts.Replicas, Storage: jetstream.FileStorage}
	for {
		// Per attempt, as Create: a cluster still electing its meta
		// leader drops the request rather than answering it.
		actx, cancel := context.WithTimeout(ctx, l.opts.AttemptTimeout)
		kv, err := l.js.CreateOrUpdateKeyValue(actx, cfg)
		cancel()
		if err == nil {
			return &KV{bucket: bucket, kv: kv, attempt: l.opts.AttemptTimeout}, nil
		}
		if !retryable(err) && !isAPIError(err, jsErrNoPeers) || ctx.Err() != nil {
			return nil, fmt.Errorf("deltalog: key-value bucket %s: %w", bucket, err)
		}
		if err := pause(ctx, 200*time.Millisecond); err != nil {
			return nil, fmt.Errorf("deltalog: key-value bucket %s: %w", bucket, err)
		}
	}
}

// Bucket is the bucket's name.
func (k *KV) Bucket() string { return k.bucket }

// Get returns key's value and revision; a key never written (or deleted)
// is nil, 0.
func (k *KV) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, k.attempt)
		e, err := k.kv.Get(actx, key)
		cancel()
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			return nil, 0, nil
		}
		if err == nil {
			return e.Value(), e.Revision(), nil
		}
		// A read changes nothing: retried through an election.
		if !retryable(err) || ctx.Err() != nil {
			return nil, 0, fmt.Errorf("deltalog: get %s/%s: %w", k.bucket, key, err)
		}
		if err := pause(ctx, 100*time.Millisecond); err != nil {
			return nil, 0, fmt.Errorf("deltalog: get %s/%s: %w", k.bucket, key, err)
		}
	}
}

// Put writes value if key's revision is still rev (0: the key does not
// exist yet) and returns the new revision; ErrRevision if it changed.
// It is not retried: after a lost answer the write may have landed, and
// only the caller knows whether doing its change again is right.
func (k *KV) Put(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	var n uint64
	var err error
	if rev == 0 {
		n, err = k.kv.Create(ctx, key, value)
		if errors.Is(err, jetstream.ErrKeyExists) {
			return 0, fmt.Errorf("%w: %s/%s was created meanwhile", ErrRevision, k.bucket, key)
		}
	} else {
		n, err = k.kv.Update(ctx, key, value, rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			return 0, fmt.Errorf("%w: %s/%s is past revision %d", ErrRevision, k.bucket, key, rev)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("deltalog: put %s/%s: %w", k.bucket, key, err)
	}
	return n, nil
}
