package format

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync/atomic"
	"unsafe"

	"github.com/energyscope/energyscope/localcache/internal/mmap"
	"github.com/energyscope/energyscope/localcache/internal/prefetch"
)

// index.hash version 2 (format version 2) adds, around the slot table of
// version 1, everything a lookup needs, so that a lookup touches the slot,
// one 32-byte record and the id's bytes, then the points: no index.arrow
// column, no data.arrow batch header, no string parsed. Little-endian:
//
//	0   [8]byte  magic "ESHASH\x00\x01"
//	8   uint32   version (2)
//	12  uint32   log2 of the slot count
//	16  uint32   series count n
//	20  uint32   CRC-32C of the slot table
//	24  uint32   batch count (data.arrow's record batches)
//	28  uint32   CRC-32C of the batch table, its padding and the records
//	32  [28]byte reserved (0)
//	60  uint32   CRC-32C of bytes 0..60
//	64  batch table, per batch of data.arrow 24 bytes (in the header's
//	    page, so that open faults in one page for both):
//	      uint64 byte offset of its period values in data.arrow
//	      uint64 byte offset of its value column in data.arrow
//	      uint64 its row count
//	S = 64 + 24*batches rounded up to 64 (zero padding): [slots]uint64 slot
//	    table, as in version 1
//	R = S + 8*slots: n records of 32 bytes, one per index row (R is a
//	    multiple of 64, so a record never straddles a 64-byte line):
//	      0  uint32 batch (hot: data.arrow record batch; cold: tail.parquet row group)
//	      4  uint32 offset of the series' first row in it
//	      8  uint32 length (rows)
//	      12 uint8  tier (0 hot, 1 cold)
//	      13 uint8  frequency code (0 none, 1 H, 2 D, 3 W, 4 M, 5 Q, 6 A)
//	      14 uint16 length of the series id in bytes
//	      16 uint64 byte offset of the series id in index.arrow
//	      24 uint64 reserved (0)
//
// The file is exactly R + 32*n bytes. The records and the batch table are
// a function of index.arrow and data.arrow (buildHotTables), which Verify
// recomputes and compares byte for byte.
//
// index.hash version 3 (format version 3) moves the id's bytes into the
// record, so that a lookup touches the slot and the record (two lines of
// index.hash), then the points: not index.arrow, a page of its own per
// lookup in version 2. The header, the batch table and the slot table are
// version 2's, with at 32 uint32 L, the longest id stored inline (8..48),
// and at 36 uint32 the record stride, 16 + L rounded up to 8 (reserved
// bytes then 40..60). A record is version 2's first 16 bytes, then L
// bytes: the id's bytes, zero-padded, when it is at most L bytes long,
// else the uint64 byte offset of the id in index.arrow and zeros. L is 16
// or 48 (32- or 64-byte records, never across a 64-byte line), the
// smaller when it keeps all but 1% of the ids of at most 48 bytes inline
// (chooseInline): a function of the ids. Readers also take the other
// lengths 8..48 that earlier version 3 writers chose. The file is
// R + stride*n bytes.
const (
	hashVersion2    = 2
	hashVersion3    = 3
	hotHeaderSize   = 64
	batchLocSize    = 24
	HotRecordSize   = 32 // version 2's stride
	hotRecordsAlign = 64
	recordHead      = 16 // a record's bytes before the id (version 3)
	minInline       = 8  // room for the offset of an id out of line
	maxInline       = 48 // records of at most 64 bytes
)

// recordStride is the size of a version 3 record with ids of up to
// inline bytes inside it: 16 + inline rounded up to 8. A record of this
// build's writer is 32 or 64 bytes (chooseInline), so that no record
// straddles two 64-byte lines; a reader takes any stride of this rule,
// which the snapshots of earlier version 3 writers used.
func recordStride(inline uint32) uint32 { return (recordHead + inline + 7) &^ 7 }

// Version 3's two record sizes: every record in one 64-byte line (records
// start on a 64-byte boundary). A 56-byte record, which ids of up to 40
// bytes gave before, straddles two lines in every other row, and a lookup
// at full scale was 1.3x slower than version 2's 32-byte records
// (BENCHMARKS.md "The record stride").
const (
	shortInline = HotRecordSize - recordHead // 16: 32-byte records
	longInline  = maxInline                  // 48: 64-byte records
)

// chooseInline is L of version 3 for ids: 16 (32-byte records) when all
// but 1% of the ids of at most 48 bytes are at most 16 bytes long, else
// 48 (64-byte records). A lookup then reads its id from the record,
// unless the id is one of the longest ones, and one long id does not
// make every record longer.
func chooseInline(ids func(row uint32) string, n int) uint32 {
	if inlineNeed(ids, n) <= shortInline {
		return shortInline
	}
	return longInline
}

// legacyInline is L as version 3 writers chose it before 64-byte records:
// inlineNeed, at least 8. Verify accepts it, so that a snapshot of such a
// writer still checks clean.
func legacyInline(ids func(row uint32) string, n int) uint32 {
	return max(inlineNeed(ids, n), minInline)
}

// inlineNeed is the smallest length that keeps all but 1% of the ids of
// at most 48 bytes (0 when there is none).
func inlineNeed(ids func(row uint32) string, n int) uint32 {
	var count [maxInline + 1]int // count[l]: ids of l bytes
	short := 0
	for r := range uint32(n) {
		if l := len(ids(r)); l <= maxInline {
			count[l]++
			short++
		}
	}
	need, have := short-short/100, 0
	for l := range uint32(maxInline + 1) {
		if have += count[l]; have >= need {
			return l
		}
	}
	return 0 // not reached: need <= short
}

// HotRecord is the record of one series in index.hash version 2 (or built
// in memory from a version 1 snapshot).
type HotRecord struct {
	Batch  uint32 // data.arrow record batch (hot) or tail.parquet row group (cold)
	Offset uint32 // first row of the series in it
	Length uint32 // rows
	Tier   Tier
	freq   uint8
}

// Frequency is the series' frequency (Daily when the index has none).
func (r HotRecord) Frequency() Frequency { return freqByCode[r.freq&7] }

var freqByCode = [8]Frequency{Daily, Hourly, Daily, Weekly, Monthly, Quarterly, Annual, Daily}

func freqCode(f Frequency) uint8 {
	switch f {
	case Hourly:
		return 1
	case Daily:
		return 2
	case Weekly:
		return 3
	case Monthly:
		return 4
	case Quarterly:
		return 5
	case Annual:
		return 6
	}
	if p, err := ParseFrequency(string(f)); err == nil {
		return freqCode(p)
	}
	return 0
}

// HotIndex is the lookup side of a snapshot: index.hash's slots and hot records
// over the mappings of index.arrow (the ids) and data.arrow (the points).
// Like Index and Data it aliases the bytes it was opened on.
type HotIndex struct {
	slots []byte
	mask  uint64
	n     uint32
	locs  []batchLoc // the batch table, checked and decoded at open
	recs  []byte     // n * stride
	index []byte     // index.arrow
	data  []byte     // data.arrow
	pt    PeriodType
	// secs is pt == PeriodTimestamp, for the lookup path: comparing the
	// strings is a runtime.memequal call (~20 instructions a lookup).
	secs bool
	// stride is the bytes of a record (32 in version 2), inline the
	// longest id stored inside its record (versions 3 and 4; 0: none is).
	stride, inline uint64
	// Versions 4 and 5: the directory and the row table (nil before), and the
	// shift that leaves a hash's bucket (64 - k).
	dir, pos []byte
	shift    uint64
	// Version 5: the records hold their series' first and last period,
	// counted from base.
	bounds bool
	base   int64
	// Built is true when the records were built in memory at open (a
	// version 1 snapshot) rather than read from index.hash.
	Built bool
	// cold counts down the lookups that still prefetch (see prefetch).
	cold atomic.Int32
	// head is a copy of index.hash's header (versions 2 to 5), which Over
	// compares a copy of the file with.
	head []byte
}

// coldLookups is how many lookups after open prefetch their pages: the
// stall of a lookup on a cold page cache is the first lookups' (the pages
// of index.hash, index.arrow and data.arrow a lookup needs are read one
// fault after the other); once a process has served a few lookups, a
// syscall per lookup would cost more than it could save.
const coldLookups = 32

// willNeedDir is the largest version 4 or 5 directory OpenHot asks the disk
// for at open.
const willNeedDir = 1 << 20

// prefetchBytes caps what prefetch asks for of a series' column: a
// lookup reads a range, rarely more than this of a long series.
const prefetchBytes = 256 << 10

// batchLoc is an entry of the batch table, decoded.
type batchLoc struct{ periodsAt, valuesAt, rows uint64 }

// batchAt is the position of the batch table of a version 2 index.hash.
const batchAt = hotHeaderSize

// hotLayout is the position of the slot table and the records of a
// version 2 or 3 index.hash, and its size.
func hotLayout(log2, series, batches, stride uint64) (slotAt, recAt, size uint64) {
	slotAt = align64(batchAt + batchLocSize*batches)
	recAt = slotAt + 8<<log2
	return slotAt, recAt, recAt + stride*series
}

// hotCRC is the checksum at offset 28 of a version 2 index.hash: the batch
// table with its padding, then the records.
func hotCRC(b []byte, slotAt, recAt uint64) uint32 {
	return crc32.Update(crc32.Checksum(b[batchAt:slotAt], castagnoli), castagnoli, b[recAt:])
}

// OpenHot opens the lookup tables of a snapshot: hb is index.hash, ib and
// db the bytes index.arrow and data.arrow were opened on (x and d). A
// version 2 index.hash is read in place (its header and batch table are
// checked: O(batches)); for a version 1 index.hash the batch table and the
// records are built in memory from x and d (O(series), the one cost of an
// unconverted snapshot). version is the manifest's format version, which
// the index.hash version must match.
func OpenHot(version int, hb, ib, db []byte, x *Index, d *Data) (*HotIndex, error) {
	h, err := OpenHash(hb, x.N)
	if err != nil {
		return nil, err
	}
	if h.version != version {
		return nil, corrupt(HashFile, 8, "version %d in a format version %d snapshot", h.version, version)
	}
	t := &HotIndex{slots: h.table, mask: h.mask, n: h.n, index: ib, data: db, pt: x.PeriodType, secs: x.PeriodType == PeriodTimestamp, stride: HotRecordSize}
	t.cold.Store(coldLookups)
	var batches []byte
	if h.version == hashVersion {
		if batches, t.recs, err = buildHotTables(x, d, ib, db, 0); err != nil {
			return nil, err
		}
		t.Built = true
	}
	if !t.Built {
		t.head = bytes.Clone(hb[:hotHeaderSize])
		if int(h.batches) != d.NumBatches {
			return nil, corrupt(HashFile, 24, "%d batches, data.arrow has %d", h.batches, d.NumBatches)
		}
		t.stride, t.inline = uint64(h.stride), uint64(h.inline)
		_, recAt, _ := hotLayout(uint64(h.log2), uint64(h.n), uint64(h.batches), t.stride)
		if h.version >= hashVersion4 {
			t.bounds, t.base = h.version == hashVersion5, h.base
			var dirAt, posAt uint64
			dirAt, posAt, recAt, _ = hotLayout4(uint64(h.log2), uint64(h.n), uint64(h.batches))
			t.dir, t.pos, t.shift = hb[dirAt:posAt], hb[posAt:recAt], 64-uint64(h.log2)
			// A small directory (0.25 MiB at 175K series) is asked of
			// the disk at open, in the background: the first lookup
			// after a cold open then waits for its record's page only,
			// not for a directory page first (BENCHMARKS.md "The first
			// lookup after a cold open": 160-658 -> 149-247 µs at pet).
			// A large one is not: at 2.82M series (4 MiB) the first
			// lookup's record read queued behind it (0.23-0.77 ms ->
			// 1.2-2.7 ms).
			if len(t.dir) <= willNeedDir {
				mmap.WillNeed(t.dir)
			}
		}
		batches = hb[batchAt : batchAt+batchLocSize*uint64(h.batches)]
		t.recs = hb[recAt:]
	}
	psize := uint64(x.PeriodType.size())
	t.locs = make([]batchLoc, len(batches)/batchLocSize)
	for i := range t.locs {
		e := batches[batchLocSize*i:][:batchLocSize]
		l := batchLoc{binary.LittleEndian.Uint64(e), binary.LittleEndian.Uint64(e[8:]), binary.LittleEndian.Uint64(e[16:])}
		if l.periodsAt%8 != 0 || l.valuesAt%8 != 0 || !within(l.periodsAt, l.rows, psize, len(db)) || !within(l.valuesAt, l.rows, 8, len(db)) {
			return nil, corrupt(HashFile, int64(batchAt)+batchLocSize*int64(i), "batch %d: rows outside data.arrow", i)
		}
		t.locs[i] = l
	}
	return t, nil
}

// within reports whether count elements of size bytes at byte offset at
// fit in n bytes.
func within(at, count, size uint64, n int) bool {
	return at <= uint64(n) && count <= (uint64(n)-at)/size
}

func (p PeriodType) size() int {
	if p == PeriodTimestamp {
		return 8
	}
	return 4
}

// Lookup returns the index row of id: Find, then the record's row, whose
// entry in the row table must be that record (versions 4 and 5: a damaged file
// finds nothing rather than a row that names another record).
func (t *HotIndex) Lookup(id string) (uint32, bool) {
	rec, ok := t.Find(id)
	if !ok || t.pos == nil {
		return rec, ok
	}
	row, ok := t.Row(rec)
	if r, ok2 := t.Rec(row); !ok || !ok2 || r != rec {
		return 0, false
	}
	return row, true
}

// Find returns the record of id (its position among the records, for
// HotRangeDays and HotRangeSecs): in versions 4 and 5 the bucket's records in
// the directory (find4), before it the slot, whose record is the row's.
//
// The slot and the record are read without bounds checks: OpenHot checked
// that the slot table has mask+1 slots and that there are n records, and
// a row is compared with n before its record is read. This is the first
// half of every lookup (BENCHMARKS.md "Serving snapshot v2").
func (t *HotIndex) Find(id string) (uint32, bool) {
	if t.pos != nil {
		if t.bounds {
			return t.find5(id)
		}
		return t.find4(id)
	}
	hv := HashID(id)
	tag := uint32(hv >> 32)
	slots := unsafe.Pointer(unsafe.SliceData(t.slots))
	for i, probes := hv&t.mask, uint64(0); probes <= t.mask; i, probes = (i+1)&t.mask, probes+1 {
		e := *(*uint64)(unsafe.Add(slots, 8*i)) // a little-endian host, as for the points
		if e == 0 {
			return 0, false
		}
		if uint32(e>>32) == tag {
			row := uint32(e) - 1
			if row >= t.n {
				continue
			}
			t.coldPrefetch(row)
			if t.sameID(unsafe.Add(unsafe.Pointer(unsafe.SliceData(t.recs)), uint64(row)*t.stride), id) {
				return row, true
			}
		}
	}
	return 0, false
}

// sameID reports whether the record at rb (inside t.recs) is id's: in the
// record (versions 3 and 4, an id of at most t.inline bytes: inside the
// record's stride, which OpenHot checked) or in index.arrow.
//
// An inline id of 8 bytes or more is compared a word at a time, the last
// word overlapping the one before (a string == is a runtime.memequal call
// and its general loop: ~45 instructions for a 20-byte id; BENCHMARKS.md
// "Fewer instructions on the mapped Get").
func (t *HotIndex) sameID(rb unsafe.Pointer, id string) bool {
	n := uintptr(len(id))
	if uintptr(*(*uint16)(unsafe.Add(rb, 14))) != n {
		return false
	}
	if uint64(n) <= t.inline {
		if n < 8 {
			return unsafe.String((*byte)(unsafe.Add(rb, recordHead)), n) == id
		}
		p, q := unsafe.Add(rb, recordHead), unsafe.Pointer(unsafe.StringData(id))
		i := uintptr(0)
		for ; i < n-8 && *(*uint64)(unsafe.Add(p, i)) == *(*uint64)(unsafe.Add(q, i)); i += 8 {
		}
		return i >= n-8 && *(*uint64)(unsafe.Add(p, n-8)) == *(*uint64)(unsafe.Add(q, n-8))
	}
	at := *(*uint64)(unsafe.Add(rb, 16))
	if at > uint64(len(t.index)) || uint64(n) > uint64(len(t.index))-at {
		return false
	}
	return unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(t.index)), at)), n) == id
}

// prefetch is Find's help to the first lookups after open, whose pages
// may not be in the page cache: with the candidate record rec read (rec <
// t.n), it asks the kernel for the id's bytes and the series' points at
// once (mmap.WillNeed), so that the id compare and the reads of the
// points wait for about one disk read instead of three in a row
// (BENCHMARKS.md "Serving snapshot v2": the first lookup after a cold open).
func (t *HotIndex) prefetch(rec uint32) {
	t.cold.Add(-1)
	rb := t.recs[uint64(rec)*t.stride:][:t.stride]
	if l, at := uint64(binary.LittleEndian.Uint16(rb[14:])), binary.LittleEndian.Uint64(rb[16:]); l > t.inline && at <= uint64(len(t.index)) && l <= uint64(len(t.index))-at {
		mmap.WillNeed(t.index[at : at+l])
	}
	batch, off, n := binary.LittleEndian.Uint32(rb), uint64(binary.LittleEndian.Uint32(rb[4:])), uint64(binary.LittleEndian.Uint32(rb[8:]))
	if Tier(rb[12]) != Hot || batch >= uint32(len(t.locs)) || off+n > t.locs[batch].rows {
		return
	}
	l := &t.locs[batch]
	ps := uint64(t.pt.size())
	mmap.WillNeed(t.data[l.periodsAt+ps*off:][:min(ps*n, prefetchBytes)])
	mmap.WillNeed(t.data[l.valuesAt+8*off:][:min(8*n, prefetchBytes)])
}

// HotDays is Record and Slice of a hot series of a date32 snapshot in
// one call, for the lookup path: the series' days and values and its
// frequency. ok is false when row is not a hot series with points inside
// its batch, or the snapshot's periods are timestamps (HotSecs): the
// caller then goes through Record and Slice, which tell an empty or cold
// series from a corrupt record. The results are nine words, which the
// register ABI returns in registers (HotSlice's twelve went through
// memory: ~30 instructions a lookup).
func (t *HotIndex) HotDays(row uint32) (days []int32, values []float64, freq Frequency, ok bool) {
	if t.secs {
		return
	}
	periods, vals, n, code, ok := t.hotSpan(row, 4)
	if !ok {
		return
	}
	return unsafe.Slice((*int32)(periods), n), unsafe.Slice((*float64)(vals), n), freqByCode[code&7], true
}

// HotSecs is HotDays for a snapshot of timestamp periods (seconds).
func (t *HotIndex) HotSecs(row uint32) (secs []int64, values []float64, freq Frequency, ok bool) {
	if !t.secs {
		return
	}
	periods, vals, n, code, ok := t.hotSpan(row, 8)
	if !ok {
		return
	}
	return unsafe.Slice((*int64)(periods), n), unsafe.Slice((*float64)(vals), n), freqByCode[code&7], true
}

// hotSpan locates the points of hot series row (psize: bytes a period):
// the start of its periods and of its values in data.arrow, its length
// (> 0) and its frequency code.
func (t *HotIndex) hotSpan(row uint32, psize uint64) (periods, values unsafe.Pointer, n int, freq uint8, ok bool) {
	rec, ok := t.Rec(row)
	if !ok {
		return
	}
	ok = false
	rb := unsafe.Add(unsafe.Pointer(unsafe.SliceData(t.recs)), uint64(rec)*t.stride)
	batch, off, length := *(*uint32)(rb), uint64(*(*uint32)(unsafe.Add(rb, 4))), *(*uint32)(unsafe.Add(rb, 8))
	if *(*uint8)(unsafe.Add(rb, 12)) != uint8(Hot) || length == 0 || batch >= uint32(len(t.locs)) {
		return
	}
	l := &t.locs[batch]
	if off+uint64(length) > l.rows {
		return
	}
	// In bounds: OpenHot checked every batch's columns against data.arrow.
	base := unsafe.Pointer(unsafe.SliceData(t.data))
	return unsafe.Add(base, l.periodsAt+psize*off), unsafe.Add(base, l.valuesAt+8*off), int(length), *(*uint8)(unsafe.Add(rb, 13)), true
}

// Record returns the record of index row row; ok is false when there is
// no such row.
func (t *HotIndex) Record(row uint32) (r HotRecord, ok bool) {
	rec, ok := t.Rec(row)
	if !ok {
		return HotRecord{}, false
	}
	rb := t.recs[uint64(rec)*t.stride:][:t.stride]
	return HotRecord{
		Batch:  binary.LittleEndian.Uint32(rb),
		Offset: binary.LittleEndian.Uint32(rb[4:]),
		Length: binary.LittleEndian.Uint32(rb[8:]),
		Tier:   Tier(rb[12]),
		freq:   rb[13],
	}, true
}

// Slice returns the points of a hot record over data.arrow: days (date32
// snapshots) or secs (timestamp snapshots), and values, each of r.Length
// elements. A record outside its batch is a CorruptionError.
func (t *HotIndex) Slice(r HotRecord) (days []int32, secs []int64, values []float64, err error) {
	if r.Batch >= uint32(len(t.locs)) {
		return nil, nil, nil, corrupt(HashFile, -1, "batch %d out of range (%d batches)", r.Batch, len(t.locs))
	}
	l := &t.locs[r.Batch]
	end := uint64(r.Offset) + uint64(r.Length)
	if end > l.rows {
		return nil, nil, nil, corrupt(DataFile, -1, "series rows [%d,%d) outside batch of %d", r.Offset, end, l.rows)
	}
	if r.Length == 0 {
		return nil, nil, nil, nil
	}
	// In bounds: OpenHot checked every batch's columns against data.arrow.
	base := unsafe.Pointer(unsafe.SliceData(t.data))
	n := int(r.Length)
	values = unsafe.Slice((*float64)(unsafe.Add(base, l.valuesAt+8*uint64(r.Offset))), n)
	if t.pt == PeriodTimestamp {
		secs = unsafe.Slice((*int64)(unsafe.Add(base, l.periodsAt+8*uint64(r.Offset))), n)
	} else {
		days = unsafe.Slice((*int32)(unsafe.Add(base, l.periodsAt+4*uint64(r.Offset))), n)
	}
	return days, secs, values, nil
}

// buildHotTables computes the batch table and the records of index.hash
// from index.arrow and data.arrow opened over ib and db: version 2's
// (inline 0) or version 3's with ids of up to inline bytes in the record.
// Offsets are positions in those bytes, so ib and db must be the whole
// files.
func buildHotTables(x *Index, d *Data, ib, db []byte, inline uint32) (batches, recs []byte, err error) {
	batches = make([]byte, batchLocSize*d.NumBatches)
	for i := range d.NumBatches {
		b, err := d.Batch(i)
		if err != nil {
			return nil, nil, err
		}
		var p unsafe.Pointer
		if b.Secs != nil {
			p = unsafe.Pointer(unsafe.SliceData(b.Secs))
		} else if b.Days != nil {
			p = unsafe.Pointer(unsafe.SliceData(b.Days))
		}
		e := batches[batchLocSize*i:]
		if b.Len() > 0 {
			pAt, ok1 := offsetIn(db, p)
			vAt, ok2 := offsetIn(db, unsafe.Pointer(unsafe.SliceData(b.Values)))
			if !ok1 || !ok2 {
				return nil, nil, corrupt(DataFile, -1, "batch %d: columns outside the file", i)
			}
			binary.LittleEndian.PutUint64(e, pAt)
			binary.LittleEndian.PutUint64(e[8:], vAt)
		}
		binary.LittleEndian.PutUint64(e[16:], uint64(b.Len()))
	}
	stride := uint64(HotRecordSize)
	if inline > 0 {
		stride = uint64(recordStride(inline))
	}
	recs = make([]byte, stride*uint64(x.N))
	for r := range uint32(x.N) {
		e := recs[stride*uint64(r):]
		binary.LittleEndian.PutUint32(e, x.Batch[r])
		binary.LittleEndian.PutUint32(e[4:], x.Offset[r])
		binary.LittleEndian.PutUint32(e[8:], x.Length[r])
		e[12] = x.Tier[r]
		e[13] = freqCode(x.Frequency(r))
		id := x.ID(r)
		if len(id) == 0 || len(id) > MaxSeriesIDLen {
			return nil, nil, corrupt(IndexFile, -1, "row %d: series id of %d bytes", r, len(id))
		}
		binary.LittleEndian.PutUint16(e[14:], uint16(len(id)))
		if len(id) <= int(inline) {
			copy(e[recordHead:], id)
			continue
		}
		at, ok := offsetIn(ib, unsafe.Pointer(unsafe.StringData(id)))
		if !ok {
			return nil, nil, corrupt(IndexFile, -1, "row %d: series id outside the file", r)
		}
		binary.LittleEndian.PutUint64(e[16:], at)
	}
	return batches, recs, nil
}

// offsetIn returns the position of p in b.
func offsetIn(b []byte, p unsafe.Pointer) (uint64, bool) {
	if len(b) == 0 || p == nil {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if uintptr(p) < base || uintptr(p)-base >= uintptr(len(b)) {
		return 0, false
	}
	return uint64(uintptr(p) - base), true
}

// buildHash2 builds index.hash version 2 or 3 for the rows of x over
// index.arrow and data.arrow's bytes.
func buildHash2(version int, x *Index, d *Data, ib, db []byte) ([]byte, error) {
	if version >= hashVersion4 {
		return buildHash4(version, x, d, ib, db)
	}
	var inline uint32
	stride := uint64(HotRecordSize)
	if version == hashVersion3 {
		inline = chooseInline(x.ID, x.N)
		stride = uint64(recordStride(inline))
	}
	batches, recs, err := buildHotTables(x, d, ib, db, inline)
	if err != nil {
		return nil, err
	}
	ids := make([]string, x.N)
	for r := range ids {
		ids[r] = x.ID(uint32(r))
	}
	log2 := slotLog2(len(ids))
	slotAt, recAt, size := hotLayout(uint64(log2), uint64(len(ids)), uint64(d.NumBatches), stride)
	buf := make([]byte, size)
	fillSlots(buf[slotAt:recAt], ids)
	copy(buf[batchAt:], batches)
	copy(buf[recAt:], recs)
	copy(buf, hashMagic)
	binary.LittleEndian.PutUint32(buf[8:], uint32(version))
	if version == hashVersion3 {
		binary.LittleEndian.PutUint32(buf[32:], inline)
		binary.LittleEndian.PutUint32(buf[36:], uint32(stride))
	}
	binary.LittleEndian.PutUint32(buf[12:], log2)
	binary.LittleEndian.PutUint32(buf[16:], uint32(len(ids)))
	binary.LittleEndian.PutUint32(buf[20:], crc32.Checksum(buf[slotAt:recAt], castagnoli))
	binary.LittleEndian.PutUint32(buf[24:], uint32(d.NumBatches))
	binary.LittleEndian.PutUint32(buf[28:], hotCRC(buf, slotAt, recAt))
	binary.LittleEndian.PutUint32(buf[60:], crc32.Checksum(buf[:60], castagnoli))
	return buf, nil
}

// verifyHot checks a version 2 index.hash beyond verifyHash: the checksum
// of its batch table and records, and that they are exactly what
// index.arrow and data.arrow give.
func verifyHot(hb, ib, db []byte, x *Index, d *Data) error {
	h, err := OpenHash(hb, x.N)
	if err != nil || h.version == hashVersion {
		return err
	}
	if h.version >= hashVersion4 {
		return verifyHot4(hb, ib, db, x, d, h)
	}
	if h.version == hashVersion3 {
		if want := chooseInline(x.ID, x.N); h.inline != want && h.inline != legacyInline(x.ID, x.N) {
			return corrupt(HashFile, 32, "inline id length %d, the ids give %d", h.inline, want)
		}
	}
	slotAt, recAt, _ := hotLayout(uint64(h.log2), uint64(h.n), uint64(h.batches), uint64(h.stride))
	if got, want := hotCRC(hb, slotAt, recAt), binary.LittleEndian.Uint32(hb[28:]); got != want {
		return corrupt(HashFile, batchAt, "batch table and records checksum %08x, want %08x", got, want)
	}
	if int(h.batches) != d.NumBatches {
		return corrupt(HashFile, 24, "%d batches, data.arrow has %d", h.batches, d.NumBatches)
	}
	batches, recs, err := buildHotTables(x, d, ib, db, h.inline)
	if err != nil {
		return err
	}
	if i := firstDiff(hb[batchAt:batchAt+uint64(len(batches))], batches); i >= 0 {
		return corrupt(HashFile, int64(batchAt)+int64(i), "batch %d does not match data.arrow", i/batchLocSize)
	}
	for i := batchAt + uint64(len(batches)); i < slotAt; i++ {
		if hb[i] != 0 {
			return corrupt(HashFile, int64(i), "padding is not zero")
		}
	}
	if i := firstDiff(hb[recAt:], recs); i >= 0 {
		return corrupt(HashFile, int64(recAt)+int64(i), "record of row %d does not match index.arrow", i/int(h.stride))
	}
	return nil
}

func firstDiff(a, b []byte) int {
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// String names a record for error messages.
func (r HotRecord) String() string {
	return fmt.Sprintf("batch %d offset %d length %d tier %d", r.Batch, r.Offset, r.Length, r.Tier)
}

// buildHashFromBytes builds index.hash version 2 or 3 for the index.arrow
// and data.arrow just written, mapped as ib and db by the writer's sink
// (positions in the records are positions in the files): it reads only
// their headers, the index's id, batch, offset, length, tier and
// frequency columns.
func buildHashFromBytes(version int, ib, db []byte, pt PeriodType, series, batches int) ([]byte, error) {
	x, err := OpenIndex(ib, pt, series)
	if err != nil {
		return nil, err
	}
	defer x.Close()
	d, err := OpenData(db, pt, batches)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return buildHash2(version, x, d, ib, db)
}

// HotRangeDays is HotDays narrowed to the points with fd <= day <= td
// (day numbers), for the lookup path: the record, the bounds checks and
// the range search in one frame (hotRange; HotDays + hotSpan + the
// caller's narrowing were three calls and ~110 instructions of a lookup;
// BENCHMARKS.md "Fewer instructions on the mapped Get"). ok as for
// HotDays; when the range holds no point, days and values are nil and ok
// is true. rec is the series' record: Find's, or Rec of its row.
func (t *HotIndex) HotRangeDays(rec uint32, fd, td int64) (days []int32, values []float64, freq Frequency, ok bool) {
	if t.secs {
		return
	}
	return hotRange[int32](t, rec, fd, td)
}

// HotRangeSecs is HotRangeDays for a snapshot of timestamp periods, with
// from <= period <= to in seconds.
func (t *HotIndex) HotRangeSecs(rec uint32, from, to int64) (secs []int64, values []float64, freq Frequency, ok bool) {
	if !t.secs {
		return
	}
	return hotRange[int64](t, rec, from, to)
}

// hotRange is HotRangeDays (T int32) and HotRangeSecs (T int64) past
// their check of the period type.
func hotRange[T int32 | int64](t *HotIndex, rec uint32, from, to int64) (periods []T, values []float64, freq Frequency, ok bool) {
	if rec >= t.n {
		return
	}
	rb := unsafe.Add(unsafe.Pointer(unsafe.SliceData(t.recs)), uint64(rec)*t.stride)
	batch, off, length := *(*uint32)(rb), uint64(*(*uint32)(unsafe.Add(rb, 4))), *(*uint32)(unsafe.Add(rb, 8))
	if *(*uint8)(unsafe.Add(rb, 12)) != uint8(Hot) || length == 0 || batch >= uint32(len(t.locs)) {
		return
	}
	l := &t.locs[batch]
	if off+uint64(length) > l.rows {
		return
	}
	freq, ok = freqByCode[*(*uint8)(unsafe.Add(rb, 13))&7], true
	// In bounds: OpenHot checked every batch's columns against data.arrow,
	// and the searches stay in [0, length): the slices are made without
	// unsafe.Slice's checks or an index check a probe (~45 instructions a
	// lookup).
	psize := unsafe.Sizeof(T(0))
	base := unsafe.Pointer(unsafe.SliceData(t.data))
	pp, vp, n := unsafe.Add(base, l.periodsAt+uint64(psize)*off), unsafe.Add(base, l.valuesAt+8*off), uint(length)
	if n <= shortSeries {
		prefetch.Range(uintptr(vp), 8*uintptr(n))
		prefetch.Range(uintptr(pp), psize*uintptr(n))
	}
	// The series' first and last period: from the record (version 5),
	// else read from the points (two loads in parallel, a round of cache
	// misses before the guesses can be read).
	f := uint32(noBounds)
	if t.bounds {
		f = *(*uint32)(unsafe.Add(rb, v5FirstAt))
	}
	var first, last int64
	var ahead unsafe.Pointer // the values to load from the guesses on
	if f != noBounds {
		first, last = t.base+int64(f), t.base+int64(*(*uint32)(unsafe.Add(rb, v5LastAt)))
		if n > shortSeries {
			ahead = vp
		}
	} else {
		first, last = int64(at[T](pp, 0)), int64(at[T](pp, n-1))
	}
	lo, hi := rangeOf[T](pp, ahead, n, from, to, first, last)
	if lo >= hi {
		return
	}
	pp, vp = unsafe.Add(pp, psize*uintptr(lo)), unsafe.Add(vp, 8*lo)
	if ahead == nil && n > shortSeries && hi-lo > prefetchPoints {
		prefetch.Range(uintptr(vp), 8*uintptr(hi-lo))
		prefetch.Range(uintptr(pp), psize*uintptr(hi-lo))
	}
	return mkSlice[T](pp, hi-lo), mkSlice[float64](vp, hi-lo), freq, true
}

// prefetchPoints is the longest range a lookup returns without asking
// the CPU to load its lines ahead (prefetch.Range): the values of a
// longer one span more than eight cache lines, which the caller would
// wait for one after the other until the hardware prefetcher caught up
// (BENCHMARKS.md "Prefetching the points": a one-year range of a daily
// series, ~260 points). For a shorter one the two calls cost more than
// they save (~25 ns of a 51-point Get whose lines are in cache).
const prefetchPoints = 64

// shortSeries is the longest series whose points a lookup asks the CPU
// for whole as soon as it has read the record, before the range search:
// its values (at most eight lines) then load while the first and last
// period and the guess are read, instead of after them, and the range is
// usually most of such a series (a year of a monthly or weekly series).
// The lookup then waits for the record and one round of reads, where it
// waited for the periods and then the values (BENCHMARKS.md "Prefetching
// the points": pet p50 0.68-0.70 -> 0.55-0.62 µs, full 1.24-1.36 ->
// 1.11-1.19).
const shortSeries = 64

// mkSlice is the slice of the n values of type T at p, which the caller
// has checked lie inside a mapping (unsafe.Slice without its checks).
func mkSlice[T any](p unsafe.Pointer, n uint) (s []T) {
	type header struct {
		p    unsafe.Pointer
		l, c int
	}
	*(*header)(unsafe.Pointer(&s)) = header{p, int(n), int(n)}
	return s
}

// rangeOf is [lo, hi) of the n (> 0) sorted periods at p (int32 days or
// int64 seconds; p and n checked by the caller) with from <= period <= to.
// first and last are the first and the last period (the caller read them,
// or took them from a version 5 record): a range that covers an end of the
// series needs no search for that end.
//
// An end inside the series is searched from where it would be if the
// periods were evenly spaced (interpolation), galloping out from that
// guess, then bisecting what the gallop bracketed. The periods of a
// series are close to evenly spaced (a frequency, with weekends, holidays
// or a gap), so the guess is at or next to the answer: a lookup reads the
// line of the guess, where the binary search over the whole series read a
// chain of about log2(n/16) dependent lines, each a likely cache miss
// (BENCHMARKS.md "Interpolated range ends"). Any order of the periods,
// even a corrupt one, and any first and last give lo and hi within [0, n]
// in O(log n) probes.
//
// ahead, when not nil, is the series' values: the lines of the values and
// the periods between the two guesses are asked of the CPU before the
// guesses' periods are read, so that they load together (a lookup whose
// record gives first and last then waits for one round of reads after
// the record; BENCHMARKS.md "Version 5: the bounds in the record").
func rangeOf[T int32 | int64](p, ahead unsafe.Pointer, n uint, from, to, first, last int64) (lo, hi uint) {
	if from > last || to < first {
		return 0, 0
	}
	// The guess's scale: first < x <= last below, so last > first.
	scale := float64(n-1) / (float64(last) - float64(first))
	// Where an end needs no search, its guess is that end of the series,
	// whose line the range returned starts or ends in (not a line apart).
	gl, gh := uint(0), n-1
	if from > first {
		gl = guess(from, first, scale, n)
	}
	if to < last {
		gh = guess(to+1, first, scale, n)
	}
	if ahead != nil {
		end := n
		if to < last {
			end = min(gh+1, n)
		}
		if end > gl {
			psize := unsafe.Sizeof(T(0))
			prefetch.Range(uintptr(ahead)+8*uintptr(gl), 8*uintptr(end-gl))
			prefetch.Range(uintptr(p)+psize*uintptr(gl), psize*uintptr(end-gl))
		}
	}
	// Both guesses' periods are read before either search branches on
	// one: the two loads (cache misses, for a long series) overlap.
	vl, vh := int64(at[T](p, gl)), int64(at[T](p, gh))
	lo, hi = 0, n
	if from > first {
		lo = searchFrom[T](p, n, from, gl, vl)
	}
	if to < last {
		hi = searchFrom[T](p, n, to+1, gh, vh)
	}
	return lo, hi
}

// guess is where x would be among n periods from first, evenly spaced at
// 1/scale: an index in [0, n).
func guess(x, first int64, scale float64, n uint) uint {
	g := (float64(x) - float64(first)) * scale
	if !(g >= 0) { // NaN too
		return 0
	}
	return min(uint(g), n-1)
}

// at is the i-th period at p, as T.
func at[T int32 | int64](p unsafe.Pointer, i uint) T {
	return *(*T)(unsafe.Add(p, uintptr(i)*unsafe.Sizeof(T(0))))
}

// searchFrom is the index of the first of the n periods at p that is >=
// x (sort.Search's answer over sorted periods), searched from index g <
// n, whose period the caller read as vg: a gallop from g in the answer's direction (steps 1, 2, 4, ...)
// brackets it, a bisection finds it.
func searchFrom[T int32 | int64](p unsafe.Pointer, n uint, x int64, g uint, vg int64) uint {
	var lo, hi uint // the answer is in [lo, hi]
	if vg < x {
		lo, hi = g+1, n
		for i, step := g+1, uint(1); i < n; i, step = i+step, step<<1 {
			if int64(at[T](p, i)) >= x {
				hi = i
				break
			}
			lo = i + 1
		}
	} else {
		hi = g
		for step := uint(1); step <= hi; step <<= 1 {
			i := hi - step
			if int64(at[T](p, i)) < x {
				lo = i + 1
				break
			}
			hi = i
		}
	}
	for lo < hi {
		m := (lo + hi) >> 1
		if int64(at[T](p, m)) < x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}
