// Package client is the companion's background sync engine: it keeps a
// local copy of each subscribed dataset in step with the central server
// over one websocket.
//
// A session says hello with what it holds; the server answers per dataset
// with a catch-up (deltas after the client's seq, applied as one batch at
// catchup_end so readers never see half of it) or a snapshot to rebase on.
// Rebasing compacts locally when the client already holds every delta the
// snapshot covers and compares SHA-256s with the server's manifest; it
// downloads only on a mismatch or when it lacks deltas. Downloads go into
// the sink's Stage of the snapshot (the store owns the files), which
// verifies per 4 MiB chunk and per file by SHA-256 and resumes from the
// last verified chunk after a kill or a network cut; the engine touches
// no file of the store.
// Deltas are acknowledged only after the sink made them durable.
//
// Trust (protocol version 2): a frame whose checksum fails is never
// applied; the connection drops (protocol.ErrChecksum) and the next one
// resumes. Each subscription carries the chain of the records held above
// the snapshot, so a server that gave those seqs to other records answers
// reset and the client takes the server's. A local apply failure (a full
// or read-only disk) is not a connection failure: only that dataset is
// marked (ApplyError) and retried with backoff. A dataset the sink
// reports damaged is downloaded again and installed over the damage.
//
// The engine writes through the Sink interface it declares; the store
// satisfies it through internal/wiring. Progress for a UI comes from
// protocol markers (file bytes, seq lag), never from guesses.
//
// Files, by operation:
//
//   - engine.go: Sink, Options, Engine, New, Run (the reconnect loop), Pause, Resume.
//   - backoff.go: the reconnect and apply-retry delays.
//   - session.go: one connection: dial, hello, the read loop, the writer, the watchdog.
//   - apply.go: deltas made durable and acknowledged; a failing apply and its retry.
//   - rebase.go: a server reset, a snapshot answered by local compaction or by download.
//   - download.go: the resumable, chunk-verified snapshot download into a Sink.Stage, and its commit.
//   - vintage.go: protocol version 3's vintage and revisions requests, and a
//     vintage's files fetched like a snapshot's into the caller's Stage.
//   - progress.go: Progress for a UI (states, lag, rate, ETA).
//   - metrics.go: Metrics, the counters, each completed download's accounting and each rebase.
//   - state.go, errors.go: the dataset states and the errors callers check.
package client
