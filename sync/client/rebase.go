package client

import (
	"fmt"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/sync/protocol"
)

// onReset follows a server whose head is below the local seq (it lost
// records it had acknowledged, e.g. restored from a backup): the records
// above its head exist only here, so they are dropped. The rebase snapshot
// the server sends next then subscribes from its head, and the catch-up
// brings exactly the server's records. A server older than the reset's
// seq field sends 0: dropping every pending record is still safe (the
// catch-up sends them again), and a snapshot that covers more is refused
// below.
func (s *session) onReset(m *protocol.Message) error {
	e, ds := s.e, m.Dataset
	if !s.want(ds) {
		return nil
	}
	_, _, seq, ok := e.sink.State(ds)
	if !ok || seq <= m.Seq {
		e.log.Warn("server reset", "dataset", ds, "reason", m.Reason, "server_seq", m.Seq)
		return nil
	}
	if m.Code == protocol.ResetDiverged {
		e.Stats.Diverged.Add(1)
	}
	n, err := e.sink.Truncate(ds, m.Seq)
	if err != nil {
		// The local snapshot already holds records the server does not
		// have: only a fresh download could undo them, and Install keeps
		// a snapshot that looks newer. Keep retrying; the operator sees why.
		e.log.Error("server reset: cannot drop the local records the server no longer has; delete the dataset's local directory to download it again", "dataset", ds, "reason", m.Reason, "local_seq", seq, "server_seq", m.Seq, "err", err)
		return fmt.Errorf("reset %s to the server's seq %d: %w", ds, m.Seq, err)
	}
	ep, snap, now, _ := e.sink.State(ds)
	e.Stats.Resets.Add(1)
	e.Stats.ResetDiscarded.Add(int64(n))
	e.log.Warn("server reset: discarded local records the server no longer has", "dataset", ds, "code", m.Code, "reason", m.Reason, "discarded", n, "local_seq", seq, "server_seq", m.Seq, "seq_now", now)
	s.caughtUp[ds] = false
	delete(s.snapAnswer, ds)
	e.update(func(_ *Progress, dsf func(string) *DatasetProgress) {
		d := dsf(ds)
		d.Epoch, d.Snapshot, d.Seq = ep, snap, now
		d.State = StateCatchingUp
		d.HeadSeq, d.Lag = m.Seq, m.Seq-now
	})
	return nil
}

// onSnapshot rebases onto the server's snapshot: by local compaction
// (written in the server's snapshot's format version) when the client
// holds every delta it covers and this build writes that version, else
// by download.
func (s *session) onSnapshot(m *protocol.Message) error {
	e, man := s.e, m.Manifest
	ds := man.Dataset
	if !s.want(ds) {
		return nil
	}
	if s.healing[ds] {
		return s.startDownload(man) // nothing local is trusted
	}
	ep, snapID, seq, ok := e.sink.State(ds)
	if ok && snapID == man.SnapshotID {
		s.markCurrent(ds)
		return s.resubscribe(ds)
	}
	if ok && ep == man.Epoch && seq >= man.CoversThroughSeq && (man.Version < format.MinFormatVersion || man.Version > format.FormatVersion) {
		// A local fold could not give the server's bytes: this build does
		// not write that version (FORMAT.md, "Compatibility").
		e.log.Warn("the server's snapshot is of a format version this build does not write; downloading it instead of compacting locally", "dataset", ds, "snapshot", man.SnapshotID, "version", man.Version, "writes", fmt.Sprintf("%d..%d", format.MinFormatVersion, format.FormatVersion))
	} else if ok && ep == man.Epoch && seq >= man.CoversThroughSeq {
		e.update(func(_ *Progress, dsf func(string) *DatasetProgress) { dsf(ds).State = StateRebasing })
		// Write the version of the snapshot reproduced: a server still on
		// an older version is followed without a download.
		local, err := e.sink.CompactThrough(ds, man.CoversThroughSeq, man.Version)
		if err == nil && sameFiles(local, man) {
			e.Stats.LocalRebases.Add(1)
			e.log.Info("rebased by local compaction: SHA-256 of every file equals the server's", "dataset", ds, "snapshot", man.SnapshotID)
			e.recordRebase(RebaseMetrics{Dataset: ds, Snapshot: man.SnapshotID, Local: true, At: time.Now()})
			s.markCurrent(ds)
			return s.resubscribe(ds)
		}
		if err != nil {
			e.log.Warn("local compaction failed; downloading the server's snapshot", "dataset", ds, "err", err)
		} else {
			e.Stats.CompactionMismatches.Add(1)
			e.log.Warn("local compaction differs from the server's snapshot; downloading it", "dataset", ds, "local", local.SnapshotID, "server", man.SnapshotID)
		}
	}
	return s.startDownload(man)
}

// resubscribe follows a snapshot the client did not need to download.
// When it came as the answer to a subscribe (the server could not catch
// the client up by deltas), the server has not registered the client for
// live deltas: subscribe again from the new state. If the server answers
// the same state with a snapshot again, it cannot catch this client up
// (its history was lost): end the session and retry later, rather than
// sit there unsubscribed.
func (s *session) resubscribe(ds string) error {
	if s.caughtUp[ds] {
		return nil // live: the snapshot was an announcement
	}
	_, snap, seq, _ := s.e.sink.State(ds)
	state := fmt.Sprintf("%s@%d", snap, seq)
	if s.snapAnswer[ds] == state {
		s.e.log.Warn("the server cannot catch this dataset up by deltas (its history does not reach back); retrying later", "dataset", ds, "snapshot", snap, "seq", seq)
		return fmt.Errorf("server cannot catch %s up from seq %d", ds, seq)
	}
	s.snapAnswer[ds] = state
	s.send(&protocol.Message{Type: protocol.TSubscribe, Subs: []protocol.Sub{s.sub(ds)}})
	return nil
}

func (s *session) markCurrent(ds string) {
	ep, snap, seq, _ := s.e.sink.State(ds)
	s.e.update(func(p *Progress, dsf func(string) *DatasetProgress) {
		d := dsf(ds)
		d.Epoch, d.Snapshot, d.Seq = ep, snap, seq
		if d.State != StateCatchingUp {
			d.State = StateLive
		}
		p.LastSync, d.LastSync = time.Now(), time.Now()
	})
}

func sameFiles(a, b *format.Manifest) bool {
	for _, name := range []string{format.DataFile, format.IndexFile, format.HashFile, format.TailFile} {
		fa, fb := a.File(name), b.File(name)
		if (fa == nil) != (fb == nil) || (fa != nil && fa.SHA256 != fb.SHA256) {
			return false
		}
	}
	return true
}
