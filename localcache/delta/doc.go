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
// The record type and its encoding belong to localcache/format
// (record.go), which the sync protocol shares; this package owns the
// framing of batches into log segments (wal.go). It does not know about
// snapshots beyond the format types; the store (package localcache)
// combines a snapshot and a delta into a read state.
package delta
