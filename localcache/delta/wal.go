package delta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/energyscope/energyscope/internal/fileutil"
	"github.com/energyscope/energyscope/localcache/format"
)

// WAL layout (localcache/format/FORMAT.md, "Write-ahead log", is the
// spec): a directory of segments named <first-seq, 20 digits>.wal. A
// segment starts with the 8-byte magic "ESWAL\0\0\1" and holds frames:
//
//	uint32 payload length | uint32 CRC-32C of payload | payload
//
// One frame is one batch (so a batch is all there or, if torn, all gone).
// Payload: format.EncodeBatch of the batch (the record codec is owned by
// localcache/format, record.go; the sync protocol sends the same bytes).
//
// Torn tail or corruption: a frame is appended by one write and fsynced
// before the batch is acknowledged, and the next append waits for that
// fsync, so a crash can damage only the frame being written: the last
// one of the last segment. Its damage is a torn tail: the bytes from the
// damaged frame to the end of the segment hold no intact frame (a prefix
// of the frame, zeros where the file grew but the data did not reach the
// disk, or a frame whose checksum fails at the very end). Open cuts a
// torn tail off. Any other damage (in a segment that is not the last, or
// followed by an intact frame) is corruption: Open refuses with a
// *CorruptionError and leaves every byte as it is.
const (
	walMagic     = "ESWAL\x00\x00\x01"
	walExt       = ".wal"
	frameHeader  = 8
	maxFrameSize = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is matched (errors.Is) by every *CorruptionError.
var ErrCorrupt = errors.New("write-ahead log corrupt")

// CorruptionError is damage in the write-ahead log that a crash cannot
// have made (see the package's WAL layout comment): acknowledged records
// may be behind it, so the log is not opened and not changed. The store
// marks the dataset damaged; a companion re-syncs it from its server.
type CorruptionError struct {
	Segment string // path of the segment file
	Offset  int64  // byte offset in the segment of the damaged frame (or header)
	Err     error  // what is wrong there
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("write-ahead log corrupt: segment %s at offset %d: %v", e.Segment, e.Offset, e.Err)
}

func (e *CorruptionError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

// WAL is the write-ahead log of one dataset. Append is not safe for
// concurrent use; the store serializes writers.
type WAL struct {
	dir      string
	readOnly bool
	f        *os.File // active segment, nil when read-only
	segs     []uint64 // first seq of each segment, ascending; last is active
	buf      []byte
	size     int64 // bytes in all segments
	active   int64 // bytes in the active segment (end of its last complete frame)
	torn     TornTail
	// failed: an append failed and the end of the active segment is
	// unknown (or a replacement could not reopen it); Reopen recovers.
	failed bool
	// memory: a WAL with no files (MemoryWAL): every write succeeds and
	// keeps nothing.
	memory bool
}

// MemoryWAL returns a WAL that keeps nothing: Append, Rotate,
// DropThrough and Replace succeed at once and write no file, Reopen
// returns no record, Size is 0. It is the log of a store whose delta is
// made durable elsewhere (localcache.Options.DeltaInMemory: the server,
// whose delta lives in its JetStream delta log). After a restart such a
// delta starts empty, at the seq its snapshot covers, and its owner
// applies the records above it again from where it keeps them.
func MemoryWAL() *WAL { return &WAL{memory: true} }

// ErrFailed is wrapped by the errors of a WAL whose append failed and
// left the end of its segment unknown: it takes no append until Reopen
// (the store reopens it at its next write).
var ErrFailed = errors.New("write-ahead log failed")

// OpenWAL opens (creating if needed) the log in dir and returns the
// records of every frame in order. Records at or below skipThrough are
// not returned.
//
// A torn tail (the last frame of the last segment, damaged by a crash
// while it was written) is cut off (unless readOnly) and reported through
// log as a warning. Damage anywhere else returns a *CorruptionError
// naming the segment and offset; nothing is cut or changed then, so no
// acknowledged record is dropped and no seq is ever handed out twice.
func OpenWAL(dir string, readOnly bool, skipThrough uint64, log *slog.Logger) (*WAL, []format.Record, error) {
	w := &WAL{dir: dir, readOnly: readOnly}
	if !readOnly {
		if err := recoverReplace(dir); err != nil {
			return nil, nil, fmt.Errorf("finish an interrupted write-ahead log replacement: %w", err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, err
		}
	} else if replacing(dir) {
		w.dir = dir + replaceNew // between Replace's two renames: the new log is complete
	}
	dir = w.dir
	ents, err := os.ReadDir(dir)
	if err != nil && !(readOnly && errors.Is(err, os.ErrNotExist)) {
		return nil, nil, err
	}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, walExt) {
			continue
		}
		seq, err := strconv.ParseUint(strings.TrimSuffix(name, walExt), 10, 64)
		if err != nil {
			continue
		}
		w.segs = append(w.segs, seq)
	}
	slices.Sort(w.segs)
	var recs []format.Record
	var lastSeq uint64
	for i, first := range w.segs {
		path := w.segPath(first)
		b, err := os.ReadFile(path)
		if readOnly && errors.Is(err, os.ErrNotExist) {
			// Dropped by the writer since the listing: it held only
			// records a newer snapshot covers (the caller checks CURRENT).
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		sc := scanSegment(b)
		last := i == len(w.segs)-1
		if sc.damage != nil && (!last || !sc.torn) {
			return nil, nil, &CorruptionError{Segment: path, Offset: int64(sc.good), Err: sc.damage}
		}
		for _, batch := range sc.batches {
			for _, r := range batch {
				if r.Seq > lastSeq {
					lastSeq = r.Seq
				}
				if r.Seq > skipThrough {
					recs = append(recs, r)
				}
			}
		}
		w.size += int64(sc.good)
		if sc.damage == nil {
			continue
		}
		w.torn = TornTail{Segment: path, Offset: int64(sc.good), Bytes: int64(len(b) - sc.good), Reason: sc.damage}
		log.Warn("write-ahead log: cutting off a torn tail", "segment", path, "offset", sc.good, "bytes", len(b)-sc.good, "reason", sc.damage)
		if !readOnly {
			if err := os.Truncate(path, int64(sc.good)); err != nil {
				return nil, nil, fmt.Errorf("truncate torn wal tail: %w", err)
			}
		}
	}
	if readOnly {
		return w, recs, nil
	}
	if len(w.segs) == 0 {
		if err := w.newSegment(lastSeq + 1); err != nil {
			return nil, nil, err
		}
	} else {
		f, err := os.OpenFile(w.segPath(w.segs[len(w.segs)-1]), os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, nil, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		w.f, w.active = f, st.Size()
		if w.active < int64(len(walMagic)) {
			// Cut back to nothing (a crash between creating the segment and
			// writing its header, or a bad header): write the header again,
			// or every frame appended next would be cut off at the next open.
			w.active = 0
			err := w.truncateActive()
			if err == nil {
				_, err = f.Write([]byte(walMagic))
			}
			if err == nil {
				err = f.Sync()
			}
			if err != nil {
				f.Close()
				return nil, nil, fmt.Errorf("rewrite wal segment header: %w", err)
			}
			w.active = int64(len(walMagic))
			w.size += w.active
		}
	}
	return w, recs, nil
}

// segScan is what scanSegment found in one segment.
type segScan struct {
	good    int               // end of the last intact frame (0 when the header is bad)
	batches [][]format.Record // the batches of the intact frames
	damage  error             // why the scan stopped before the end; nil at a clean end
	torn    bool              // damage is a torn tail: no intact frame starts after good
}

// scanSegment reads the frames of a segment up to the first damaged one
// and classifies the damage (torn tail or not; whether that is allowed
// depends on the segment being the last, which the caller knows).
func scanSegment(b []byte) segScan {
	var sc segScan
	sc.good, sc.batches, sc.damage = scanFrames(b)
	if sc.damage != nil {
		sc.torn = !intactFrameAfter(b, sc.good)
	}
	return sc
}

// scanFrames returns the length of the intact prefix of a segment, the
// batches in it, and why it stopped early (nil at a clean end).
func scanFrames(b []byte) (good int, batches [][]format.Record, why error) {
	if len(b) < len(walMagic) {
		if len(b) == 0 {
			return 0, nil, errors.New("empty segment")
		}
		return 0, nil, errors.New("torn segment header")
	}
	if string(b[:len(walMagic)]) != walMagic {
		return 0, nil, errors.New("bad segment magic")
	}
	off := len(walMagic)
	for off < len(b) {
		batch, n, err := readFrame(b[off:])
		if err != nil {
			return off, batches, err
		}
		batches = append(batches, batch)
		off += n
	}
	return off, batches, nil
}

// readFrame decodes the frame at the start of b and returns its batch
// and its length (header included).
func readFrame(b []byte) ([]format.Record, int, error) {
	if len(b) < frameHeader {
		return nil, 0, fmt.Errorf("frame header cut short (%d of %d bytes)", len(b), frameHeader)
	}
	n := binary.LittleEndian.Uint32(b)
	crc := binary.LittleEndian.Uint32(b[4:])
	if n > maxFrameSize {
		return nil, 0, fmt.Errorf("frame length %d exceeds the %d-byte limit", n, maxFrameSize)
	}
	if int(n) > len(b)-frameHeader {
		return nil, 0, fmt.Errorf("frame length %d runs past the end of the segment (%d bytes left)", n, len(b)-frameHeader)
	}
	p := b[frameHeader : frameHeader+int(n)]
	if crc32.Checksum(p, castagnoli) != crc {
		return nil, 0, errors.New("frame checksum mismatch")
	}
	batch, err := format.DecodeBatch(p)
	if err != nil {
		return nil, 0, fmt.Errorf("frame payload: %w", err)
	}
	return batch, frameHeader + int(n), nil
}

// minRecord is the fewest bytes a record takes in a payload.
const minRecord = format.MinEncodedRecord

// intactFrameAfter reports whether an intact frame (length within the
// segment, checksum right, payload decoding to at least one record)
// starts at any offset after from. A torn tail holds none: it is part of
// one frame, whose own header is at from. Finding one means the damage
// at from has intact data after it, which a crash cannot produce. When
// the search runs out of budget (nextIntactFrame) it answers true, which
// refuses the open rather than cut what it could not classify.
func intactFrameAfter(b []byte, from int) bool {
	p, exhausted := nextIntactFrame(b, from)
	return p >= 0 || exhausted
}

// nextIntactFrame returns the first offset after from at which an intact
// frame holding at least one record starts, or -1.
//
// The search looks at every offset, so it is bounded: payloads are
// checksummed only when their record count is plausible for their
// length, and after checksumming more than 64 MiB plus 16 bytes per byte
// searched (an adversarial tail) it gives up and reports exhausted.
func nextIntactFrame(b []byte, from int) (pos int, exhausted bool) {
	budget := 64<<20 + 16*(len(b)-from)
	for p := from + 1; p+frameHeader < len(b); p++ {
		n := int(binary.LittleEndian.Uint32(b[p:]))
		if n == 0 || n > maxFrameSize || n > len(b)-p-frameHeader {
			continue
		}
		payload := b[p+frameHeader : p+frameHeader+n]
		count, k := binary.Uvarint(payload)
		if k <= 0 || count == 0 || count > uint64(n/minRecord) {
			continue
		}
		if budget -= n; budget < 0 {
			return -1, true
		}
		if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(b[p+4:]) {
			continue
		}
		if _, err := format.DecodeBatch(payload); err == nil {
			return p, false
		}
	}
	return -1, false
}

// SalvageSeq returns the highest seq the log in dir may have handed out,
// reading past damage: the largest of every segment's first seq (its
// name) and every seq in an intact frame anywhere, found by searching for
// intact frames after each damaged one. A store that sets a log that
// fails to open aside starts its next seq above this, so that a seq
// acknowledged behind the damage is never handed out again. It changes
// nothing; a missing directory gives 0.
func SalvageSeq(dir string) (uint64, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	var top uint64
	for _, e := range ents {
		first, err := strconv.ParseUint(strings.TrimSuffix(e.Name(), walExt), 10, 64)
		if err != nil || !strings.HasSuffix(e.Name(), walExt) {
			continue
		}
		top = max(top, first)
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return top, err
		}
		off := min(len(walMagic), len(b))
		if string(b[:off]) != walMagic {
			off = 0 // a damaged header: search from the start
		}
		for off < len(b) {
			batch, n, err := readFrame(b[off:])
			if err == nil {
				for _, r := range batch {
					top = max(top, r.Seq)
				}
				off += n
				continue
			}
			p, _ := nextIntactFrame(b, off)
			if p < 0 {
				break
			}
			off = p
		}
	}
	return top, nil
}

func (w *WAL) segPath(first uint64) string {
	return filepath.Join(w.dir, fmt.Sprintf("%020d%s", first, walExt))
}

func (w *WAL) newSegment(first uint64) error {
	path := w.segPath(first)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// A segment that could not be started must not stay behind: as the
	// last segment it would claim that records from first on follow it,
	// while appends go on into the active one.
	abandon := func(err error) error {
		f.Close()
		os.Remove(path)
		return err
	}
	if _, err := f.Write([]byte(walMagic)); err != nil {
		return abandon(err)
	}
	if err := f.Sync(); err != nil {
		return abandon(err)
	}
	if err := fileutil.SyncDir(w.dir); err != nil {
		return abandon(err)
	}
	if w.f != nil {
		w.f.Close()
	}
	w.f = f
	w.active = int64(len(walMagic))
	if n := len(w.segs); n == 0 || w.segs[n-1] != first {
		w.segs = append(w.segs, first)
	}
	w.size += int64(len(walMagic))
	return nil
}

// Append writes batch as one frame and fsyncs. On error the batch is not
// acknowledged (the caller must not acknowledge it). A failed write is cut
// back at once when that works (a full disk); otherwise, and after any
// failed fsync, the WAL is Failed: it refuses appends until Reopen.
func (w *WAL) Append(batch []format.Record) error {
	if w.memory {
		return nil
	}
	if w.f == nil {
		if w.failed {
			return fmt.Errorf("%w; reopen it", ErrFailed)
		}
		return errors.New("write-ahead log is read-only or closed")
	}
	var err error
	if w.buf, err = appendFrame(w.buf[:0], batch); err != nil {
		return err
	}
	if _, err := w.f.Write(w.buf); err != nil {
		// A short write (a full disk): cut the partial frame off so the
		// log stays appendable once space is freed. If even that fails,
		// stop appending; the next open cuts the torn frame.
		if terr := w.truncateActive(); terr != nil {
			w.fail()
		}
		return fmt.Errorf("append to write-ahead log: %w", err)
	}
	if err := w.f.Sync(); err != nil {
		w.fail()
		return fmt.Errorf("fsync write-ahead log: %w", err)
	}
	w.size += int64(len(w.buf))
	w.active += int64(len(w.buf))
	return nil
}

// appendFrame appends batch to dst as one frame (header and payload).
func appendFrame(dst []byte, batch []format.Record) ([]byte, error) {
	start := len(dst)
	dst = append(dst, make([]byte, frameHeader)...)
	dst = format.EncodeBatch(dst, batch)
	p := dst[start+frameHeader:]
	if len(p) > maxFrameSize {
		return dst[:start], fmt.Errorf("batch of %d bytes exceeds the %d-byte frame limit", len(p), maxFrameSize)
	}
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(p)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(p, castagnoli))
	return dst, nil
}

// truncateActive cuts the active segment back to its last complete frame.
func (w *WAL) truncateActive() error {
	if err := w.f.Truncate(w.active); err != nil {
		return err
	}
	return w.f.Sync()
}

func (w *WAL) fail() {
	w.f.Close()
	w.f = nil
	w.failed = true
}

// Failed reports whether an append (or a replacement) failed and left
// the WAL refusing appends until Reopen.
func (w *WAL) Failed() bool { return w.failed }

// Reopen recovers a Failed WAL without a restart, and returns the
// records above skipThrough as OpenWAL does. It cuts the active segment
// back to the end of its last acknowledged frame: whatever the failed
// append left after it was never acknowledged, and after a failed fsync
// the page cache may hold bytes the disk does not (fsyncgate), so they
// are not trusted even when their checksum is right. The cut is fsynced;
// then the log is opened again as at startup: every segment is read and
// checked, a torn tail is cut, damage elsewhere is a *CorruptionError.
// On error (the disk still refuses) the WAL stays Failed; call it again
// later. Acknowledged records are never cut: they end at or before the
// cut, and the caller checks that they are all there.
func (w *WAL) Reopen(skipThrough uint64, log *slog.Logger) ([]format.Record, error) {
	if w.memory {
		return nil, nil
	}
	if w.readOnly {
		return nil, errors.New("write-ahead log is read-only")
	}
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
	w.failed = true
	if n := len(w.segs); n > 0 {
		if err := cutSegment(w.segPath(w.segs[n-1]), w.active); err != nil {
			return nil, fmt.Errorf("reopen write-ahead log: cut the failed append: %w", err)
		}
	}
	nw, recs, err := OpenWAL(w.dir, false, skipThrough, log)
	if err != nil {
		return nil, fmt.Errorf("reopen write-ahead log: %w", err)
	}
	nw.buf = w.buf
	*w = *nw
	return recs, nil
}

// cutSegment truncates the segment at path to size if it is longer, and
// fsyncs it. A missing segment is left to OpenWAL.
func cutSegment(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	st, err := f.Stat()
	if err == nil && st.Size() > size {
		err = f.Truncate(size)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Rotate starts a new segment whose records will all have seq >= next.
// Compaction rotates before it folds, so that once the new snapshot is in
// place every older segment can be deleted whole.
func (w *WAL) Rotate(next uint64) error {
	if w.memory {
		return nil
	}
	if w.readOnly {
		return errors.New("write-ahead log is read-only")
	}
	if w.f == nil {
		// Failed (or closed): the active segment may end in a torn frame,
		// and the next open cuts off every segment after one.
		return fmt.Errorf("%w; reopen it", ErrFailed)
	}
	if n := len(w.segs); n > 0 && w.segs[n-1] >= next {
		return nil // the active segment already starts there
	}
	return w.newSegment(next)
}

// DropThrough deletes segments whose records all have seq <= seq.
func (w *WAL) DropThrough(seq uint64) error {
	if w.readOnly || w.memory {
		return nil
	}
	keep := 0
	for i := 0; i+1 < len(w.segs); i++ {
		if w.segs[i+1]-1 > seq { // the segment may hold records above seq
			break
		}
		path := w.segPath(w.segs[i])
		st, err := os.Stat(path)
		if err == nil {
			w.size -= st.Size()
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		keep = i + 1
	}
	w.segs = w.segs[keep:]
	return fileutil.SyncDir(w.dir)
}

// TornTail is what OpenWAL found at the end of the last segment: a frame
// a crash interrupted, with nothing intact after it. A writable open cut
// it off; a read-only open left it (a writer may be appending it).
type TornTail struct {
	Segment string // path of the segment
	Offset  int64  // where the torn frame starts (the segment's length after the cut)
	Bytes   int64  // how many bytes it held
	Reason  error  // what was wrong with the frame
}

// TornTail returns the torn tail OpenWAL found; its Bytes are 0 if none.
func (w *WAL) TornTail() TornTail { return w.torn }

// Size is the number of bytes in the log.
func (w *WAL) Size() int64 { return w.size }

// Close closes the active segment.
func (w *WAL) Close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// Replace swaps the directories wal.new (complete) and wal; wal.old is the
// previous log until it is deleted.
const (
	replaceNew = ".new"
	replaceOld = ".old"
)

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// replacing reports whether a Replace stopped between its two renames:
// the log directory is gone and both the complete new one and the old one
// are there.
func replacing(dir string) bool {
	return !exists(dir) && exists(dir+replaceNew) && exists(dir+replaceOld)
}

// recoverReplace finishes or undoes a Replace that a crash interrupted.
// The new directory is complete (fsynced) before the old one is renamed
// away, so once that rename happened it rolls forward; before it, the new
// directory is dropped and the old log stands.
func recoverReplace(dir string) error {
	parent := filepath.Dir(dir)
	switch {
	case exists(dir):
	case replacing(dir):
		if err := os.Rename(dir+replaceNew, dir); err != nil {
			return err
		}
	case exists(dir + replaceOld):
		// Not produced by Replace's order; keep the old log rather than none.
		if err := os.Rename(dir+replaceOld, dir); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(dir + replaceNew); err != nil {
		return err
	}
	if err := os.RemoveAll(dir + replaceOld); err != nil {
		return err
	}
	if exists(parent) {
		return fileutil.SyncDir(parent)
	}
	return nil
}

// Replace makes keep (records in increasing seq order) the whole content
// of the log: every other record is gone. Appends then continue in the
// same segment, whose name is keep's first seq, or next when keep is
// empty (next must exceed every seq the log will no longer hold and be at
// most the next seq appended).
//
// The replacement is atomic across a crash: the new log is written and
// fsynced into a sibling directory, then the old directory is renamed
// away and the new one into place (OpenWAL rolls a crash between the two
// renames forward). An error before the second rename leaves the old log
// in place and appendable. An error after it (reopening the segment) is
// not returned: the new log is on disk; the WAL refuses appends until it
// is reopened.
func (w *WAL) Replace(keep []format.Record, next uint64) error {
	if w.memory {
		return nil
	}
	if w.readOnly {
		return errors.New("write-ahead log is read-only")
	}
	if w.f == nil {
		return fmt.Errorf("%w; reopen it", ErrFailed)
	}
	first := next
	if len(keep) > 0 {
		first = keep[0].Seq
	}
	tmp, old, parent := w.dir+replaceNew, w.dir+replaceOld, filepath.Dir(w.dir)
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.RemoveAll(old); err != nil {
		return err
	}
	b, err := appendFrames([]byte(walMagic), keep)
	if err != nil {
		return err
	}
	seg := fmt.Sprintf("%020d%s", first, walExt)
	err = os.Mkdir(tmp, 0o755)
	if err == nil {
		err = fileutil.WriteNew(filepath.Join(tmp, seg), b, 0o644)
	}
	if err == nil {
		err = fileutil.SyncDir(tmp)
	}
	if err == nil {
		err = fileutil.SyncDir(parent)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("write the new write-ahead log: %w", err)
	}
	// Windows cannot rename a directory while a file in it is open.
	w.f.Close()
	w.f = nil
	w.failed = true // until reopenActive succeeds
	if err := os.Rename(w.dir, old); err != nil {
		os.RemoveAll(tmp)
		w.reopenActive()
		return fmt.Errorf("replace the write-ahead log: %w", err)
	}
	if err := fileutil.SyncDir(parent); err != nil {
		// The rename may not be durable yet: put the old log back.
		if os.Rename(old, w.dir) == nil {
			w.reopenActive()
		}
		os.RemoveAll(tmp)
		return fmt.Errorf("replace the write-ahead log: %w", err)
	}
	if err := os.Rename(tmp, w.dir); err != nil {
		if os.Rename(old, w.dir) == nil {
			w.reopenActive()
		}
		return fmt.Errorf("replace the write-ahead log: %w", err)
	}
	// Committed: a crash from here on opens the new log (OpenWAL rolls a
	// lost second rename forward and deletes the old directory).
	fileutil.SyncDir(parent)
	os.RemoveAll(old)
	w.segs = []uint64{first}
	w.size = int64(len(b))
	w.active = int64(len(b))
	w.reopenActive()
	return nil
}

// reopenActive opens the active segment for appending again after Replace
// closed it; on failure the WAL stays failed.
func (w *WAL) reopenActive() {
	if len(w.segs) == 0 {
		return
	}
	f, err := os.OpenFile(w.segPath(w.segs[len(w.segs)-1]), os.O_WRONLY|os.O_APPEND, 0o644)
	if err == nil {
		w.f, w.failed = f, false
	}
}

// appendFrames appends recs as frames under the frame size limit.
func appendFrames(dst []byte, recs []format.Record) ([]byte, error) {
	const per = 4096
	for len(recs) > 0 {
		n := min(per, len(recs))
		for {
			out, err := appendFrame(dst, recs[:n])
			if err == nil {
				dst = out
				break
			}
			if n == 1 {
				return dst, err
			}
			n /= 2
		}
		recs = recs[n:]
	}
	return dst, nil
}

// WALCheck is what VerifyWAL found in a log.
type WALCheck struct {
	Segments int
	Frames   int
	Records  int
	FirstSeq uint64 // 0 when the log holds no record
	LastSeq  uint64
	// TornTail is the length of a torn tail at the end of the last
	// segment (the next writable open cuts it; a writer may be appending
	// it right now). It is not an error.
	TornTail int64
}

// VerifyWAL reads every frame of the log in dir without changing it:
// the magic of each segment, each frame's length and CRC, that each
// payload decodes, and that seqs strictly increase across the whole log.
// Damage other than a torn tail, and a seq that does not increase, return
// a *CorruptionError naming segment and offset. A missing directory is an
// empty log.
func VerifyWAL(dir string) (WALCheck, error) {
	var c WALCheck
	if replacing(dir) {
		dir += replaceNew // between Replace's two renames: the new log is complete
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	} else if err != nil {
		return c, err
	}
	var segs []string
	for _, e := range ents {
		name := e.Name()
		if _, err := strconv.ParseUint(strings.TrimSuffix(name, walExt), 10, 64); err == nil && strings.HasSuffix(name, walExt) {
			segs = append(segs, name)
		}
	}
	slices.Sort(segs) // 20 digits: lexical order is numeric order
	for i, name := range segs {
		path := filepath.Join(dir, name)
		b, err := os.ReadFile(path)
		if err != nil {
			return c, err
		}
		c.Segments++
		sc := scanSegment(b)
		if sc.damage != nil && (i < len(segs)-1 || !sc.torn) {
			return c, &CorruptionError{Segment: path, Offset: int64(sc.good), Err: sc.damage}
		}
		if sc.damage != nil {
			c.TornTail = int64(len(b) - sc.good)
		}
		off := len(walMagic)
		for _, batch := range sc.batches {
			for _, r := range batch {
				if c.Records > 0 && r.Seq <= c.LastSeq {
					return c, &CorruptionError{Segment: path, Offset: int64(off),
						Err: fmt.Errorf("seq %d follows seq %d: seqs must strictly increase", r.Seq, c.LastSeq)}
				}
				if c.Records == 0 {
					c.FirstSeq = r.Seq
				}
				c.LastSeq = r.Seq
				c.Records++
			}
			c.Frames++
			off += frameHeader + int(binary.LittleEndian.Uint32(b[off:])) // an intact frame's length
		}
	}
	return c, nil
}
