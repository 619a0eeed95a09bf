package localcache

import (
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/energyscope/energyscope/internal/fileutil"
	"github.com/energyscope/energyscope/localcache/format"
)

// A Stage is a snapshot being assembled in the store from bytes that
// arrive in order, file by file (a download from the sync server). Its
// files live in a staging directory of the dataset (format.StagingPrefix,
// FORMAT.md "Home layout") that survives a crash or a lost connection, so
// that a later Stage of the same snapshot resumes from the last verified
// 4 MiB chunk. Every chunk is checked against the manifest's hash as its
// last byte arrives, and every file against its SHA-256 before it is kept;
// Commit installs the whole (Install re-checks every file).
//
// The protocol for one snapshot:
//
//	st, err := store.Stage(dataset, m)
//	st.Verify()              // position at the first byte not held
//	for each file {
//		st.Append(bytes)... // at st.Pos(); a *format.CorruptionError
//		                    // wrapping format.ErrChunkMismatch: fetch again from its Offset
//		st.Finish()         // whole-file SHA-256, durable, then Verify the next
//	}
//	st.Commit()              // or Abort() to drop it, Close() to resume later
//
// A Stage is not safe for concurrent use; one goroutine drives it.
type Stage struct {
	s       *Store
	dataset string
	m       *format.Manifest
	dir     string

	i     int      // the file being written; len(m.Files) when all are held
	f     *os.File // file i's .partial file; nil when none is open
	off   int64    // bytes of file i written; the next byte to write
	whole hash.Hash
	mark  []byte    // whole's state at the start of the current chunk
	chunk hash.Hash // SHA-256 of the current chunk's bytes so far

	// commit, when set, keeps the staged files somewhere other than the
	// store (a vintage: VintageCache.Stage) instead of installing them.
	commit func(dir string) error
}

// stagingDir is where a download of snapshot id for dataset is assembled,
// so that Install moves it into place without copying. It is not swept at
// open (a download resumes); Install consumes it, Stage of another
// snapshot of the dataset removes it.
func (s *Store) stagingDir(dataset, id string) string {
	return filepath.Join(s.DatasetDir(dataset), format.SnapshotsDir, format.StagingPrefix+id)
}

// Stage opens the staging directory of snapshot m of dataset, creating it
// or keeping what an earlier Stage of the same snapshot left, and removes
// the staging directories of the dataset's other snapshots (stale
// downloads). Call Verify before the first Append.
func (s *Store) Stage(dataset string, m *format.Manifest) (*Stage, error) {
	if s.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	if m == nil || m.Dataset != dataset {
		return nil, fmt.Errorf("stage %s: manifest of another dataset", dataset)
	}
	// The id names a directory: never trust it unchecked.
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("stage %s: %w", dataset, err)
	}
	dir := s.stagingDir(dataset, m.SnapshotID)
	parent := filepath.Dir(dir)
	if ents, err := os.ReadDir(parent); err == nil {
		for _, en := range ents {
			if strings.HasPrefix(en.Name(), format.StagingPrefix) && filepath.Join(parent, en.Name()) != dir {
				os.RemoveAll(filepath.Join(parent, en.Name()))
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("stage %s: %w", dataset, err)
	}
	return &Stage{s: s, dataset: dataset, m: m, dir: dir}, nil
}

// Manifest is the snapshot being staged.
func (st *Stage) Manifest() *format.Manifest { return st.m }

// Pos is where the next Append writes: the index of the file in the
// manifest and the offset in it. open is false when no file is open
// (before Verify, after Finish or Close, or once every file is held:
// file == len(Manifest().Files)).
func (st *Stage) Pos() (file int, off int64, open bool) {
	return st.i, st.off, st.f != nil
}

// Verify positions the stage at the first byte it does not hold: from the
// current file on, it skips files complete on disk (verified, synced and
// kept by an earlier Finish) and opens the first that is not, keeping the
// longest prefix of whole chunks whose hashes match the manifest and
// cutting the rest. skipped is the bytes of the files it skipped, kept the
// prefix it kept. When every file is held, Pos reports none open and
// Commit may follow; a file held whole as .partial is open at its end,
// ready for Finish.
func (st *Stage) Verify() (skipped, kept int64, err error) {
	st.close()
	for ; st.i < len(st.m.Files); st.i++ {
		fi := st.m.Files[st.i]
		final := filepath.Join(st.dir, fi.Name)
		if info, err := os.Stat(final); err == nil && info.Size() == fi.Size {
			skipped += fi.Size
			continue
		}
		f, err := os.OpenFile(final+format.PartialSuffix, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return skipped, 0, err
		}
		st.f, st.whole, st.chunk, st.off = f, sha256.New(), sha256.New(), 0
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
			st.whole.Write(buf[:n])
			st.off += int64(n)
		}
		if st.mark, err = st.whole.(encoding.BinaryMarshaler).MarshalBinary(); err != nil {
			return skipped, 0, err
		}
		if err := f.Truncate(st.off); err != nil {
			return skipped, 0, err
		}
		if _, err := f.Seek(st.off, io.SeekStart); err != nil {
			return skipped, 0, err
		}
		return skipped, st.off, nil
	}
	return skipped, 0, nil
}

// Append writes p at Pos. verified counts the chunks p completed (each
// checked against the manifest). When a chunk does not match, its bytes
// are cut, the rest of p is dropped, the stage stands at the chunk's first
// byte, and Append returns a *format.CorruptionError wrapping
// format.ErrChunkMismatch whose Offset is that byte. p must not run past the
// file's end.
func (st *Stage) Append(p []byte) (verified int, err error) {
	if st.f == nil {
		return 0, errors.New("stage: no file open")
	}
	fi := st.m.Files[st.i]
	if st.off+int64(len(p)) > fi.Size {
		return 0, fmt.Errorf("stage: %d bytes at %d run past the end of %s (%d bytes)", len(p), st.off, fi.Name, fi.Size)
	}
	for len(p) > 0 {
		inChunk := st.off % format.ChunkSize
		take := min(int64(len(p)), format.ChunkSize-inChunk)
		if _, err := st.f.Write(p[:take]); err != nil {
			return verified, err
		}
		st.chunk.Write(p[:take])
		st.whole.Write(p[:take])
		st.off += take
		p = p[take:]
		if st.off%format.ChunkSize != 0 && st.off != fi.Size {
			continue
		}
		ci := (st.off - 1) / format.ChunkSize
		sum := hex.EncodeToString(st.chunk.Sum(nil))
		st.chunk.Reset()
		start := ci * format.ChunkSize
		if sum != fi.Chunks[ci] {
			if err := st.f.Truncate(start); err != nil {
				return verified, err
			}
			if _, err := st.f.Seek(start, io.SeekStart); err != nil {
				return verified, err
			}
			st.off = start
			if err := st.whole.(encoding.BinaryUnmarshaler).UnmarshalBinary(st.mark); err != nil {
				return verified, err
			}
			return verified, &format.CorruptionError{File: fi.Name, Offset: start, Err: fmt.Errorf("%w: chunk %d", format.ErrChunkMismatch, ci)}
		}
		verified++
		if st.mark, err = st.whole.(encoding.BinaryMarshaler).MarshalBinary(); err != nil {
			return verified, err
		}
	}
	return verified, nil
}

// Finish ends the current file once all its bytes are in: it checks the
// whole-file SHA-256 (a mismatch discards the file and returns a
// *format.CorruptionError), makes the file durable and keeps it under its
// name, then Verifies the next file. skipped and kept are Verify's.
func (st *Stage) Finish() (skipped, kept int64, err error) {
	if st.f == nil || st.off != st.m.Files[st.i].Size {
		return 0, 0, errors.New("stage: finish of a file not fully written")
	}
	fi := st.m.Files[st.i]
	final := filepath.Join(st.dir, fi.Name)
	if got := hex.EncodeToString(st.whole.Sum(nil)); got != fi.SHA256 {
		st.close()
		os.Remove(final + format.PartialSuffix)
		return 0, 0, &format.CorruptionError{File: fi.Name, Offset: -1, Err: fmt.Errorf("SHA-256 %s, manifest says %s; file discarded", got, fi.SHA256)}
	}
	err = fileutil.SyncClose(st.f)
	st.f = nil
	if err != nil {
		return 0, 0, err
	}
	// Commit's manifest write syncs the directory, which makes this
	// rename durable before Install moves CURRENT.
	if err := os.Rename(final+format.PartialSuffix, final); err != nil {
		return 0, 0, err
	}
	st.i++
	st.off = 0
	return st.Verify()
}

// Commit installs the staged snapshot once every file is held: it writes
// the manifest (durably, with the directory, which also makes the files'
// renames durable) and hands the directory to Install, which verifies
// every file again and moves it into place. A snapshot that fails is
// removed, with its staging directory.
func (st *Stage) Commit() (*format.Manifest, error) {
	if st.f != nil || st.i < len(st.m.Files) {
		return nil, errors.New("stage: commit before every file is held")
	}
	if st.commit != nil {
		// VintageCache.Commit writes the manifest itself.
		if err := st.commit(st.dir); err != nil {
			os.RemoveAll(st.dir)
			return nil, err
		}
		return st.m, nil
	}
	b, err := json.MarshalIndent(st.m, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := fileutil.WriteFile(filepath.Join(st.dir, format.ManifestFile), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	m, err := st.s.Install(st.dataset, st.dir)
	if err != nil {
		os.RemoveAll(st.dir)
		return nil, err
	}
	return m, nil
}

// Close lets go of the open file and keeps what is staged, for a later
// Stage of the same snapshot to resume.
func (st *Stage) Close() error {
	return st.close()
}

func (st *Stage) close() error {
	if st.f == nil {
		return nil
	}
	err := st.f.Close()
	st.f = nil
	return err
}

// Abort closes the stage and removes everything it staged.
func (st *Stage) Abort() error {
	st.close()
	return os.RemoveAll(st.dir)
}

// StagedBytes reports the bytes of downloads being staged for dataset in
// the home at root (complete files and, of them, .partial ones), without
// opening the store: for tests and tools that watch a download of another
// process.
func StagedBytes(root, dataset string) (held, partial int64) {
	dirs, _ := filepath.Glob(filepath.Join(root, DatasetsDir, dataset, format.SnapshotsDir, format.StagingPrefix+"*"))
	for _, d := range dirs {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			info, err := e.Info()
			if err != nil || e.Name() == format.ManifestFile {
				continue
			}
			held += info.Size()
			if strings.HasSuffix(e.Name(), format.PartialSuffix) {
				partial += info.Size()
			}
		}
	}
	return held, partial
}
