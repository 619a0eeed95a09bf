// Package deltalog is the server's live delta as a NATS JetStream log: one
// stream per dataset, replicated (R=3) on a cluster, or held by an
// embedded single-node JetStream server under a directory of the home.
// It is the foundation of issue 13 (stateless replicas): the log the
// server's own write-ahead log and history log give way to. It is not
// wired into `es serve` yet; nothing in the server imports it.
//
// # Parts
//
//   - node.go: StartNode runs a nats-server with JetStream inside the
//     process (the embedded default: one box, 127.0.0.1 only, a random
//     port, sync_interval always so an acknowledgement means fsynced), or
//     one node of a loopback cluster for tests and demos.
//   - log.go: Connect (an external cluster, by URLs) and Node.Connect
//     (the embedded node, in-process) both return a *Log; everything after
//     the connection is the same code. Create makes a dataset's stream.
//   - append.go: Append, the acknowledged, idempotent write.
//   - read.go: Head, Read (catch-up), Follow (catch-up then live tail),
//     Trim.
//   - message.go: one message's bytes (the record codec of
//     localcache/format inside a checksummed envelope) and its headers.
//
// # Names
//
// A dataset name follows format.ValidDatasetName. Names that differ only
// by case are one dataset (a home may not hold both, see
// server.CheckNameFree), so the log keys a dataset by its lower-case
// name: stream ES_DELTA_<token>, subject es.delta.<token>, where <token>
// is the lower-cased name with '_' written "__" and '.' written "_D"
// (an injective map onto the characters stream names and subject tokens
// allow). The stream's metadata keeps the name as created (es-dataset);
// a name that differs from it only by case gets ErrNameConflict.
//
// # Sequence numbers
//
// One message is one acknowledged batch of records (one ingest), so a
// batch is in the log all at once or not at all, as in the WAL it
// replaces. The sync protocol's seqs stay per record (PROTOCOL.md), so a
// message carries its records with their seqs: first..last, contiguous,
// and the first message after a stream message holding ..n starts at
// n+1. Append makes that hold for any number of writers (replicas) by
// publishing with Nats-Expected-Last-Sequence = the stream sequence of
// the message it numbered from: a writer that lost a race is refused,
// re-reads the tail and renumbers. The stream sequence is therefore
// contiguous per dataset too (one per batch) but is not the record seq;
// Head, Read, Follow and Trim speak record seqs and find the message of
// a record seq by a binary search over the stream (header Es-Seq).
// Create's After sets the seq the first record follows (a dataset that
// moves to the log from a WAL keeps its numbering).
//
// # Idempotency
//
// Every append carries a key, sent as Nats-Msg-Id. A retry with the same
// key within the stream's duplicate window (Options.DuplicateWindow,
// default 10 minutes) returns the first append's seqs and stores nothing,
// whichever node the retry reaches. Append itself retries timeouts and
// lost connections with the same key until its context ends, so an
// error from Append means "not known to be stored": the caller retries
// with the same key (not a new one) to stay exactly-once. A retry whose
// first append was trimmed since gets ErrTrimmed (and stores nothing).
//
// # Durability
//
// Append returns only after JetStream acknowledged the publish. The
// embedded node runs with SyncAlways (fsync before the ack; proven by a
// kill -9 test); on a cluster the ack follows a quorum of replicas (2 of
// 3), and nodes should run with sync_interval: always as well
// (StartNode's cluster nodes do).
//
// # Trim
//
// Trim(dataset, below) drops whole messages whose records are all below
// below, never the last message (the head must stay readable to number
// the next append). Read or Follow from a seq the log no longer holds
// returns ErrTrimmed: the caller sends a snapshot instead.
package deltalog
