package client

import (
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/energyscope/energyscope/internal/fileutil"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/sync/protocol"
)

// dlAcct is what this process did for one snapshot download, over all
// its sessions: Metrics().Downloads once complete.
type dlAcct struct {
	start     time.Time
	sessions  int
	fetched   int64 // chunk bytes received and written (refetches included)
	resumed   int64 // verified bytes found on disk when this process started the download
	refetched int64 // chunks discarded for a hash mismatch
}

// download is a snapshot being fetched, one file at a time.
type download struct {
	acct    *dlAcct
	man     *format.Manifest
	dir     string
	files   []format.FileInfo
	i       int // file being fetched
	f       *os.File
	off     int64     // next expected byte of the current file
	whole   hash.Hash // SHA-256 of bytes [0, off)
	mark    []byte    // whole's state at the start of the current chunk
	chunk   hash.Hash // SHA-256 of the current 4 MiB chunk
	base    int64     // bytes of earlier files, for progress
	retries int
}

func (s *session) startDownload(man *format.Manifest) error {
	ds := man.Dataset
	if old := s.dl[ds]; old != nil {
		if old.man.SnapshotID == man.SnapshotID {
			return nil
		}
		old.close()
	}
	dir := s.e.sink.StagingDir(ds, man.SnapshotID)
	// Other staging directories of this dataset are stale downloads.
	parent := filepath.Dir(dir)
	if ents, err := os.ReadDir(parent); err == nil {
		for _, en := range ents {
			if strings.HasPrefix(en.Name(), ".dl-") && filepath.Join(parent, en.Name()) != dir {
				os.RemoveAll(filepath.Join(parent, en.Name()))
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	acct := s.e.acct[man.SnapshotID]
	if acct == nil {
		acct = &dlAcct{start: time.Now()}
		s.e.acct[man.SnapshotID] = acct
	}
	acct.sessions++
	d := &download{man: man, dir: dir, files: man.Files, acct: acct}
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
	return s.nextFile(d)
}

// nextFile opens the next file that is not complete yet and asks for it
// from the last verified chunk.
func (s *session) nextFile(d *download) error {
	for ; d.i < len(d.files); d.i++ {
		fi := d.files[d.i]
		final := filepath.Join(d.dir, fi.Name)
		if st, err := os.Stat(final); err == nil && st.Size() == fi.Size {
			d.base += fi.Size
			if d.acct.sessions == 1 {
				d.acct.resumed += fi.Size
			}
			continue // verified and renamed in an earlier session
		}
		part := final + ".partial"
		f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		d.f, d.whole, d.chunk = f, sha256.New(), sha256.New()
		// Keep the prefix of whole chunks that verify.
		d.off = 0
		buf := make([]byte, format.ChunkSize)
		for ci := range fi.Chunks {
			n, err := io.ReadFull(f, buf)
			if int64(n) != min(format.ChunkSize, fi.Size-int64(ci)*format.ChunkSize) || (err != nil && !errors.Is(err, io.ErrUnexpectedEOF)) {
				break
			}
			sum := sha256.Sum256(buf[:n])
			if hex.EncodeToString(sum[:]) != fi.Chunks[ci] {
				break
			}
			d.whole.Write(buf[:n])
			d.off += int64(n)
		}
		if d.mark, err = d.whole.(encoding.BinaryMarshaler).MarshalBinary(); err != nil {
			return err
		}
		if err := f.Truncate(d.off); err != nil {
			return err
		}
		if _, err := f.Seek(d.off, io.SeekStart); err != nil {
			return err
		}
		s.e.Stats.ResumedBytesSkipped.Add(d.off)
		if d.acct.sessions == 1 {
			d.acct.resumed += d.off
		}
		if d.off == fi.Size {
			return s.finishFile(d)
		}
		s.e.update(func(_ *Progress, dsf func(string) *DatasetProgress) {
			p := dsf(d.man.Dataset)
			p.File, p.FileDone, p.FileTotal, p.downloadOffset = fi.Name, d.off, fi.Size, d.base+d.off
			p.BytesDone = d.base + d.off
		})
		s.e.log.Debug("fetch", "file", fi.Name, "offset", d.off)
		s.progressed()
		s.send(&protocol.Message{Type: protocol.TFetch, Dataset: d.man.Dataset, Snapshot: d.man.SnapshotID, File: fi.Name, SHA256: fi.SHA256, Offset: d.off})
		return nil
	}
	return s.finishDownload(d)
}

func (d *download) close() {
	if d.f != nil {
		d.f.Close()
		d.f = nil
	}
}

func (s *session) onChunk(c *protocol.Chunk) error {
	var d *download
	for _, x := range s.dl {
		if x.f != nil && x.i < len(x.files) && x.files[x.i].SHA256 == hex.EncodeToString(c.SHA256[:]) {
			d = x
		}
	}
	if d == nil || c.Offset != d.off {
		return nil // a stale stream (after a refetch); ignore
	}
	fi := d.files[d.i]
	if d.off+int64(len(c.Data)) > fi.Size {
		return fmt.Errorf("server sent more of %s than its size", fi.Name)
	}
	s.e.Stats.BytesDownloaded.Add(int64(len(c.Data)))
	d.acct.fetched += int64(len(c.Data))
	s.progressed()
	data := c.Data
	for len(data) > 0 {
		inChunk := d.off % format.ChunkSize
		take := min(int64(len(data)), format.ChunkSize-inChunk)
		if _, err := d.f.Write(data[:take]); err != nil {
			return err
		}
		d.chunk.Write(data[:take])
		d.whole.Write(data[:take])
		d.off += take
		data = data[take:]
		if d.off%format.ChunkSize == 0 || d.off == fi.Size {
			ci := (d.off - 1) / format.ChunkSize
			sum := hex.EncodeToString(d.chunk.Sum(nil))
			d.chunk.Reset()
			start := ci * format.ChunkSize
			if sum != fi.Chunks[ci] {
				// Corrupt in transit: drop the chunk and fetch it again.
				s.e.Stats.ChunksRefetched.Add(1)
				d.acct.refetched++
				s.e.log.Warn("chunk hash mismatch; refetching", "file", fi.Name, "chunk", ci)
				d.retries++
				if d.retries > 20 {
					return fmt.Errorf("%s: too many corrupt chunks", fi.Name)
				}
				if err := d.f.Truncate(start); err != nil {
					return err
				}
				if _, err := d.f.Seek(start, io.SeekStart); err != nil {
					return err
				}
				d.off = start
				if err := d.whole.(encoding.BinaryUnmarshaler).UnmarshalBinary(d.mark); err != nil {
					return err
				}
				s.send(&protocol.Message{Type: protocol.TFetch, Dataset: d.man.Dataset, Snapshot: d.man.SnapshotID, File: fi.Name, SHA256: fi.SHA256, Offset: start})
				return nil
			}
			// Verified: the whole-file hash keeps it.
			s.verified = true
			var err error
			if d.mark, err = d.whole.(encoding.BinaryMarshaler).MarshalBinary(); err != nil {
				return err
			}
		}
	}
	s.progressBytes(d)
	if s.e.opts.BandwidthLimit > 0 {
		time.Sleep(time.Duration(float64(len(c.Data)) / float64(s.e.opts.BandwidthLimit) * float64(time.Second)))
	}
	if d.off == fi.Size {
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
	if d == nil || d.i >= len(d.files) || d.files[d.i].SHA256 != m.SHA256 {
		return nil
	}
	if d.off != d.files[d.i].Size {
		return nil // a refetch is under way
	}
	return s.finishFile(d)
}

// finishFile checks the whole-file SHA-256 and renames .partial away.
func (s *session) finishFile(d *download) error {
	fi := d.files[d.i]
	if got := hex.EncodeToString(d.whole.Sum(nil)); got != fi.SHA256 {
		d.close()
		os.Remove(filepath.Join(d.dir, fi.Name+".partial"))
		return fmt.Errorf("%s: SHA-256 %s, manifest says %s; file discarded", fi.Name, got, fi.SHA256)
	}
	err := fileutil.SyncClose(d.f)
	d.f = nil
	if err != nil {
		return err
	}
	final := filepath.Join(d.dir, fi.Name)
	if err := os.Rename(final+".partial", final); err != nil {
		return err
	}
	d.base += fi.Size
	d.i++
	return s.nextFile(d)
}

// finishDownload writes the manifest and hands the directory to the sink,
// then subscribes for the deltas after it.
func (s *session) finishDownload(d *download) error {
	ds := d.man.Dataset
	delete(s.dl, ds)
	s.progressed()
	var total int64
	for _, f := range d.files {
		total += f.Size
	}
	a := d.acct
	delete(s.e.acct, d.man.SnapshotID)
	dm := DownloadMetrics{
		Dataset: ds, Snapshot: d.man.SnapshotID, Bytes: total,
		Fetched: a.fetched, Resumed: a.resumed, RefetchedChunks: a.refetched, Sessions: a.sessions,
		Duration: time.Since(a.start), Completed: time.Now(),
	}
	s.e.recordDownload(dm)
	s.e.log.Info("download complete", "dataset", ds, "snapshot", dm.Snapshot, "bytes", dm.Bytes,
		"fetched", dm.Fetched, "resumed", dm.Resumed, "refetched_chunks", dm.RefetchedChunks, "sessions", dm.Sessions,
		"seconds", dm.Duration.Seconds())
	b, err := jsonManifest(d.man)
	if err != nil {
		return err
	}
	// Durable (file and directory, which also makes the renames of the
	// .partial files durable) before Install moves CURRENT to it.
	if err := fileutil.WriteFile(filepath.Join(d.dir, format.ManifestFile), b, 0o644); err != nil {
		return err
	}
	if err := s.e.sink.Install(ds, d.dir); err != nil {
		os.RemoveAll(d.dir)
		return fmt.Errorf("install %s: %w", ds, err)
	}
	s.e.log.Info("installed downloaded snapshot", "dataset", ds, "snapshot", d.man.SnapshotID)
	delete(s.healing, ds)
	s.markCurrent(ds)
	s.caughtUp[ds] = false
	s.send(&protocol.Message{Type: protocol.TSubscribe, Subs: []protocol.Sub{s.sub(ds)}})
	return nil
}
