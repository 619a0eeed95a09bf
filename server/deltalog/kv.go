package deltalog

import (
	"context"
	"errors"
	"fmt"

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
	bucket string
	kv     jetstream.KeyValue
}

// KV opens (creating if needed) the bucket named bucket (letters,
// digits, '-' and '_').
func (l *Log) KV(ctx context.Context, bucket string) (*KV, error) {
	kv, err := l.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:   bucket,
		History:  5,
		Replicas: l.opts.Replicas,
		Storage:  jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("deltalog: key-value bucket %s: %w", bucket, err)
	}
	return &KV{bucket: bucket, kv: kv}, nil
}

// Bucket is the bucket's name.
func (k *KV) Bucket() string { return k.bucket }

// Get returns key's value and revision; a key never written (or deleted)
// is nil, 0.
func (k *KV) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	e, err := k.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("deltalog: get %s/%s: %w", k.bucket, key, err)
	}
	return e.Value(), e.Revision(), nil
}

// Put writes value if key's revision is still rev (0: the key does not
// exist yet) and returns the new revision; ErrRevision if it changed.
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
