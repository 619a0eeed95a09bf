package client

import "time"

// Metrics is a snapshot of what the engine did, for tests, benchmarks and
// a status page: the figures are fields, never words of a log line.
type Metrics struct {
	// Server is the server in use or being tried (one of Options.Server's
	// list); Failovers counts the moves to the next one of the list after
	// a failed or lost connection.
	Server              string
	Failovers           int64
	Sessions            int64 // connections made (a reconnect is one more)
	DeltasApplied       int64
	LocalRebases        int64 // snapshots matched by local compaction
	DownloadRebases     int64 // snapshot downloads started (a resume on a new connection is one more)
	BytesDownloaded     int64 // chunk bytes received, refetches included
	ResumedBytesSkipped int64 // bytes kept from .partial files at resume
	ChunksRefetched     int64 // chunks whose hash did not match
	ApplyFailures       int64 // local applies that failed (each retried later)
	ChecksumErrors      int64 // frames refused for a bad or missing checksum
	Heals               int64 // damaged local datasets downloaded again
	Diverged            int64 // resets for records that differ from the server's
	// Connections lost or refused, after which the engine connects again
	// (after the backoff, or at once to the next server of a list; each is
	// one "sync offline" for a person), and why.
	Reconnects      int64
	Unauthorized    int64 // the server refused the token (ErrUnauthorized)
	WelcomeTimeouts int64 // the server's welcome did not come (Options.WelcomeTimeout)
	Stalls          int64 // a download got nothing it asked for (Options.StallTimeout)
	Malformed       int64 // a malformed message or frame from the server
	// Resets counts the resets below the local seq that dropped local
	// records, ResetDiscarded the records they dropped (the server no
	// longer has them).
	Resets         int64
	ResetDiscarded int64
	// CompactionMismatches counts local compactions whose files differed
	// from the server's snapshot (which was then downloaded).
	CompactionMismatches int64
	// Downloads are the snapshot downloads this process completed, oldest
	// first (at most the last maxDownloadMetrics).
	Downloads []DownloadMetrics
	// Rebases are the snapshots the engine moved datasets to, oldest first
	// (at most the last maxDownloadMetrics): matched by local compaction
	// or downloaded (whose accounting is in Downloads).
	Rebases []RebaseMetrics
}

// RebaseMetrics is one dataset moved to a snapshot of the server's.
type RebaseMetrics struct {
	Dataset  string
	Snapshot string
	// Local: the engine compacted its own records and every file's
	// SHA-256 equalled the server's; else it downloaded the snapshot.
	Local bool
	At    time.Time
}

// ChunkRef names a 4 MiB chunk of a snapshot file.
type ChunkRef struct {
	File  string
	Chunk int // index in the file: the chunk starts at Chunk*format.ChunkSize
}

// DownloadMetrics is the accounting of one completed snapshot download,
// over every session of this process it took: taken when every file is
// verified, synced and renamed, before the sink installs the snapshot.
type DownloadMetrics struct {
	Dataset  string
	Snapshot string
	Bytes    int64 // the snapshot's size (every file)
	// Fetched is the chunk bytes received and written, refetches
	// included; Resumed the verified bytes found on disk when this
	// process started the download (a kill's leftovers). Without
	// refetches, Fetched+Resumed == Bytes.
	Fetched         int64
	Resumed         int64
	RefetchedChunks int64 // chunks discarded for a hash mismatch
	// Refetched names them, in order (a download gives up after 20).
	Refetched []ChunkRef
	Sessions  int // connections the download took
	Duration  time.Duration
	Completed time.Time
}

// maxDownloadMetrics bounds Metrics.Downloads.
const maxDownloadMetrics = 64

// Metrics returns a snapshot of the engine's counters and completed
// downloads; it is safe to call from any goroutine.
func (e *Engine) Metrics() Metrics {
	m := Metrics{
		Sessions:             e.Stats.Sessions.Load(),
		DeltasApplied:        e.Stats.DeltasApplied.Load(),
		LocalRebases:         e.Stats.LocalRebases.Load(),
		DownloadRebases:      e.Stats.DownloadRebases.Load(),
		BytesDownloaded:      e.Stats.BytesDownloaded.Load(),
		ResumedBytesSkipped:  e.Stats.ResumedBytesSkipped.Load(),
		ChunksRefetched:      e.Stats.ChunksRefetched.Load(),
		ApplyFailures:        e.Stats.ApplyFailures.Load(),
		ChecksumErrors:       e.Stats.ChecksumErrors.Load(),
		Heals:                e.Stats.Heals.Load(),
		Diverged:             e.Stats.Diverged.Load(),
		Reconnects:           e.Stats.Reconnects.Load(),
		Unauthorized:         e.Stats.Unauthorized.Load(),
		WelcomeTimeouts:      e.Stats.WelcomeTimeouts.Load(),
		Stalls:               e.Stats.Stalls.Load(),
		Malformed:            e.Stats.Malformed.Load(),
		Resets:               e.Stats.Resets.Load(),
		ResetDiscarded:       e.Stats.ResetDiscarded.Load(),
		CompactionMismatches: e.Stats.CompactionMismatches.Load(),
		Failovers:            e.Stats.Failovers.Load(),
	}
	e.mu.Lock()
	m.Server = e.prog.Server
	m.Downloads = append([]DownloadMetrics(nil), e.downloads...)
	m.Rebases = append([]RebaseMetrics(nil), e.rebases...)
	e.mu.Unlock()
	return m
}

// Download returns the accounting of the completed download of snapshot,
// if this process completed one (the latest).
func (m Metrics) Download(snapshot string) (DownloadMetrics, bool) {
	for i := len(m.Downloads) - 1; i >= 0; i-- {
		if m.Downloads[i].Snapshot == snapshot {
			return m.Downloads[i], true
		}
	}
	return DownloadMetrics{}, false
}

// recordDownload keeps a completed download's accounting for Metrics.
func (e *Engine) recordDownload(d DownloadMetrics) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.downloads = appendRecent(e.downloads, d)
}

// recordRebase keeps a rebase for Metrics.
func (e *Engine) recordRebase(r RebaseMetrics) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rebases = appendRecent(e.rebases, r)
}

// appendRecent appends v to s, dropping the oldest entry first when s
// already holds maxDownloadMetrics.
func appendRecent[T any](s []T, v T) []T {
	if len(s) == maxDownloadMetrics {
		s = append(s[:0], s[1:]...)
	}
	return append(s, v)
}
