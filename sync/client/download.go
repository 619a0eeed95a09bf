package client

import (
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/sync/protocol"
)

// dlAcct is what this process did for one snapshot download, over all
// its sessions: Metrics().Downloads once complete.
type dlAcct struct {
	start     time.Time
	sessions  int
	fetched   int64      // chunk bytes received and written (refetches included)
	resumed   int64      // verified bytes found on disk when this process started the download
	refetched []ChunkRef // chunks discarded for a hash mismatch, in order
}

// download is a snapshot being fetched, one file at a time, into the
// sink's stage of it.
type download struct {
	acct    *dlAcct
	man     *format.Manifest
	st      Stage
	base    int64 // bytes of earlier files, for progress
	retries int
	// vintage is set for a vintage's files (vintage.go), which go to the
	// caller's directory instead of the store.
	vintage *vintageDownload
}

func (s *session) startDownload(man *format.Manifest) error {
	ds := man.Dataset
	if old := s.dl[ds]; old != nil {
		if old.man.SnapshotID == man.SnapshotID {
			return nil
		}
		old.st.Close()
		delete(s.dl, ds)
	}
	// The sink removes the stages of the dataset's other snapshots (stale
	// downloads) and keeps what an earlier stage of this one holds.
	st, err := s.e.sink.Stage(ds, man)
	if err != nil {
		return err
	}
	acct := s.e.acct[man.SnapshotID]
	if acct == nil {
		acct = &dlAcct{start: time.Now()}
		s.e.acct[man.SnapshotID] = acct
	}
	acct.sessions++
	d := &download{man: man, st: st, acct: acct}
	s.dl[ds] = d
	var total int64
	for _, f := range man.Files {
		total += f.Size
	}
	s.e.Stats.DownloadRebases.Add(1)
	s.e.log.Info("downloading snapshot", "dataset", ds, "snapshot", man.SnapshotID, "bytes", total)
	s.e.update(func(_ *Progress, dsf func(string) *DatasetProgress) {
		p := dsf(ds)
		p.State, p.BytesTotal, p.BytesDone, p.downloadStart = StateDownloading, total, 0, time.Now()
	})
	return s.nextFile(d, d.st.Verify)
}

// nextFile positions the stage (step: Verify or Finish) at the first byte
// it does not hold, keeping what verifies, and asks for the file from
// there; with every file held it finishes the download.
func (s *session) nextFile(d *download, step func() (skipped, kept int64, err error)) error {
	for {
		skipped, kept, err := step()
		if err != nil {
			return err
		}
		d.base += skipped
		if d.acct.sessions == 1 {
			d.acct.resumed += skipped + kept
		}
		s.e.Stats.ResumedBytesSkipped.Add(kept)
		i, off, open := d.st.Pos()
		if !open {
			return s.finishDownload(d)
		}
		fi := d.man.Files[i]
		if off < fi.Size {
			s.e.update(func(_ *Progress, dsf func(string) *DatasetProgress) {
				p := dsf(d.man.Dataset)
				p.File, p.FileDone, p.FileTotal, p.downloadOffset = fi.Name, off, fi.Size, d.base+off
				p.BytesDone = d.base + off
			})
			s.e.log.Debug("fetch", "file", fi.Name, "offset", off)
			s.progressed()
			s.send(&protocol.Message{Type: protocol.TFetch, Dataset: d.man.Dataset, Snapshot: d.man.SnapshotID, File: fi.Name, SHA256: fi.SHA256, Offset: off})
			return nil
		}
		// Held whole as .partial: finish it.
		d.base += fi.Size
		step = d.st.Finish
	}
}

// finishFile ends the file whose bytes are all in (whole-file SHA-256,
// kept durably) and moves on to the next.
func (s *session) finishFile(d *download) error {
	i, _, _ := d.st.Pos()
	d.base += d.man.Files[i].Size
	return s.nextFile(d, d.st.Finish)
}

// current is the file a download is writing and its offset.
func (d *download) current() (fi *format.FileInfo, off int64, ok bool) {
	i, off, open := d.st.Pos()
	if !open {
		return nil, 0, false
	}
	return &d.man.Files[i], off, true
}

func (s *session) onChunk(c *protocol.Chunk) error {
	var d *download
	var fi *format.FileInfo
	var off int64
	for _, x := range s.dl {
		if f, o, ok := x.current(); ok && f.SHA256 == hex.EncodeToString(c.SHA256[:]) {
			d, fi, off = x, f, o
		}
	}
	if d == nil || c.Offset != off {
		return nil // a stale stream (after a refetch); ignore
	}
	if off+int64(len(c.Data)) > fi.Size {
		return fmt.Errorf("server sent more of %s than its size", fi.Name)
	}
	s.e.Stats.BytesDownloaded.Add(int64(len(c.Data)))
	d.acct.fetched += int64(len(c.Data))
	s.progressed()
	verified, err := d.st.Append(c.Data)
	if verified > 0 {
		s.verified = true
	}
	var ce *format.CorruptionError
	if errors.Is(err, format.ErrChunkMismatch) && errors.As(err, &ce) {
		// Corrupt in transit: the stage dropped the chunk; fetch it again.
		ci := ce.Offset / format.ChunkSize
		s.e.Stats.ChunksRefetched.Add(1)
		d.acct.refetched = append(d.acct.refetched, ChunkRef{File: fi.Name, Chunk: int(ci)})
		s.e.log.Warn("chunk hash mismatch; refetching", "file", fi.Name, "chunk", ci)
		d.retries++
		if d.retries > 20 {
			return fmt.Errorf("%s: too many corrupt chunks", fi.Name)
		}
		s.send(&protocol.Message{Type: protocol.TFetch, Dataset: d.man.Dataset, Snapshot: d.man.SnapshotID, File: fi.Name, SHA256: fi.SHA256, Offset: ce.Offset})
		return nil
	}
	if err != nil {
		return err
	}
	s.progressBytes(d)
	if s.e.opts.BandwidthLimit > 0 {
		time.Sleep(time.Duration(float64(len(c.Data)) / float64(s.e.opts.BandwidthLimit) * float64(time.Second)))
	}
	if _, off, _ := d.st.Pos(); off == fi.Size {
		// Every byte is here and every chunk verified: finish now rather
		// than at file_end. Chunk frames name the file by SHA-256 only, so
		// when two datasets download the same file (equal data.arrow) a
		// stream's chunks may land in the other download, whose file_end
		// then finds nothing to finish.
		return s.finishFile(d)
	}
	return nil
}

func (s *session) onFileEnd(m *protocol.Message) error {
	s.e.log.Debug("file_end", "file", m.File)
	d := s.dl[m.Dataset]
	if d == nil {
		return nil
	}
	fi, off, ok := d.current()
	if !ok || fi.SHA256 != m.SHA256 || off != fi.Size {
		return nil // not this file, or a refetch is under way
	}
	return s.finishFile(d)
}

// closeDownloads lets go of the files of the downloads in progress when
// the session ends; the next session's stage resumes from them.
func (s *session) closeDownloads() {
	for _, d := range s.dl {
		d.st.Close()
	}
}

// finishDownload writes the manifest and hands the directory to the sink,
// then subscribes for the deltas after it.
func (s *session) finishDownload(d *download) error {
	if d.vintage != nil {
		return s.finishVintage(d)
	}
	ds := d.man.Dataset
	delete(s.dl, ds)
	s.progressed()
	var total int64
	for _, f := range d.man.Files {
		total += f.Size
	}
	a := d.acct
	delete(s.e.acct, d.man.SnapshotID)
	dm := DownloadMetrics{
		Dataset: ds, Snapshot: d.man.SnapshotID, Bytes: total,
		Fetched: a.fetched, Resumed: a.resumed, RefetchedChunks: int64(len(a.refetched)), Refetched: a.refetched, Sessions: a.sessions,
		Duration: time.Since(a.start), Completed: time.Now(),
	}
	s.e.recordDownload(dm)
	s.e.log.Info("download complete", "dataset", ds, "snapshot", dm.Snapshot, "bytes", dm.Bytes,
		"fetched", dm.Fetched, "resumed", dm.Resumed, "refetched_chunks", dm.RefetchedChunks, "sessions", dm.Sessions,
		"seconds", dm.Duration.Seconds())
	// The stage writes the manifest durably and installs (the store
	// verifies every file again); a snapshot that fails is removed.
	if _, err := d.st.Commit(); err != nil {
		return fmt.Errorf("install %s: %w", ds, err)
	}
	s.e.log.Info("installed downloaded snapshot", "dataset", ds, "snapshot", d.man.SnapshotID)
	s.e.recordRebase(RebaseMetrics{Dataset: ds, Snapshot: d.man.SnapshotID, At: time.Now()})
	delete(s.healing, ds)
	s.markCurrent(ds)
	s.caughtUp[ds] = false
	s.send(&protocol.Message{Type: protocol.TSubscribe, Subs: []protocol.Sub{s.sub(ds)}})
	return nil
}
