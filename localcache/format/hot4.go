package format

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"math/bits"
	"unsafe"
)

// index.hash version 4 (format version 4) drops the slot table: the
// records are in the order of their ids' hashes, grouped in buckets, and a
// directory gives each bucket's first record. The directory is small (4
// bytes for about four series: 0.25 MiB at 175K series, 2.7 MiB at 2.82M),
// so that it stays in the CPU's caches where version 3's slot table (8
// bytes a slot, twice as many slots as series) did not: a lookup reads the
// bucket's directory entry, the record (the bucket's records are adjacent)
// and then the points (BENCHMARKS.md "Version 4: records in hash order").
// Little-endian:
//
//	0   [8]byte  magic "ESHASH\x00\x01"
//	8   uint32   version (4)
//	12  uint32   k: log2 of the bucket count B (bucketLog2 of n)
//	16  uint32   series count n
//	20  uint32   CRC-32C of the directory and the row table, with padding
//	24  uint32   batch count (data.arrow's record batches)
//	28  uint32   CRC-32C of the batch table, its padding and the records
//	32  [28]byte reserved (0)
//	60  uint32   CRC-32C of bytes 0..60
//	64  batch table, as in version 2, zero-padded to a multiple of 64: D
//	D   directory: B+1 uint32; the records of bucket b are [dir[b],
//	    dir[b+1]), dir[B] = n; zero-padded to a multiple of 64: P
//	P   row table: n uint32, the position of index row r's record;
//	    zero-padded to a multiple of 64: R
//	R   n records of 64 bytes (never across a 64-byte line), sorted by
//	    bucket, then by row:
//	      0  16 bytes as in version 3 (batch, offset, length, tier,
//	         frequency code, id length)
//	      16 [40]byte the id's bytes, zero-padded, when it is at most 40
//	         bytes long, else the uint64 byte offset of the id in
//	         index.arrow and zeros
//	      56 uint32 the low 32 bits of the id's hash
//	      60 uint32 the index row
//
// The bucket of an id is the top k bits of its hash (HashID). The whole
// file is a function of index.arrow and data.arrow (buildHash4), which
// Verify rebuilds and compares byte for byte.
const (
	hashVersion4 = 4
	v4Inline     = 40 // the longest id stored in its record
	v4Stride     = 64
	v4TagAt      = 56
	v4RowAt      = 60
)

// index.hash version 5 (format version 5) is version 4 with each hot
// series' first and last period in its record, so that a lookup makes
// its range search's guesses from the record alone: it then reads the
// guesses' periods and the values between them in one round, where
// version 4 read the first and the last period, then the guesses, then
// the values (BENCHMARKS.md "Version 5: the bounds in the record"). The
// room comes from the inline id (36 bytes, not 40) and the tag, which an
// inline id does not need (its length and bytes are in the same line):
//
//	12  uint32   k: about sixteen or eight series a bucket (bucketLog2), not four
//	32  int64    base: the smallest first period of a hot series (days or
//	    seconds; 0 when there is none); bytes 40..60 reserved (0)
//	R   records of 64 bytes:
//	      0  16 bytes as in version 3
//	      16 [36]byte the id's bytes, zero-padded, when it is at most 36
//	         bytes long; else the uint64 byte offset of the id in
//	         index.arrow, at 24 the low 32 bits of the id's hash, zeros
//	      52 uint32 first - base: the series' first period
//	      56 uint32 last - base: its last period; both 0xFFFFFFFF (noBounds)
//	         when the series is not hot, has no points, or its periods
//	         do not fit (a lookup then reads them from data.arrow)
//	      60 uint32 the index row
//
// Everything else is version 4's.
const (
	hashVersion5 = 5
	v5Inline     = 36
	v5TagAt      = 24 // of an id stored out of line
	v5FirstAt    = 52
	v5LastAt     = 56
	noBounds     = 0xFFFFFFFF
)

// bucketLog2 is k for n series: about four series a bucket in version 4;
// in version 5 about sixteen while the directory fits in 64 KiB (up to
// ~262K series), about eight beyond; at least 16 buckets.
//
// Every lookup reads a directory entry, then scans its bucket's records
// (adjacent lines) for the id. A directory of at most 64 KiB stays in the
// CPU's second-level cache between the lookups that use each of its lines
// (each lookup streams ~10 other lines through it); a larger one is read
// from the third level or memory, and then fewer, longer buckets only add
// records to scan. Measured against four a bucket: at 175K series sixteen
// was 13% faster, eight 7%; at 2.82M series eight was as fast over
// page-cache pages in large folios and 6-17% faster over 4 KiB folios,
// sixteen 5-10% slower over large folios (BENCHMARKS.md "Version 5: the
// bounds in the record", "Series a bucket").
func bucketLog2(version, n int) uint32 {
	k := bits.Len(uint(n / 4))
	if version >= hashVersion5 {
		if k = bits.Len(uint(n / 16)); k > v5SmallDirLog2 {
			k = bits.Len(uint(n / 8))
		}
	}
	return max(uint32(k), 4)
}

// v5SmallDirLog2 is the largest k of a version 5 directory with sixteen
// series a bucket: 2^14 entries, 64 KiB.
const v5SmallDirLog2 = 14

func align64(n uint64) uint64 { return (n + hotRecordsAlign - 1) &^ (hotRecordsAlign - 1) }

// hotLayout4 is the position of the directory, the row table and the
// records of a version 4 or 5 index.hash, and its size.
func hotLayout4(k, series, batches uint64) (dirAt, posAt, recAt, size uint64) {
	dirAt = align64(batchAt + batchLocSize*batches)
	posAt = align64(dirAt + 4*(1<<k+1))
	recAt = align64(posAt + 4*series)
	return dirAt, posAt, recAt, recAt + v4Stride*series
}

// buildHash4 builds index.hash version 4 or 5 for the rows of x over
// index.arrow's and data.arrow's bytes.
func buildHash4(version int, x *Index, d *Data, ib, db []byte) ([]byte, error) {
	inline := uint32(v4Inline)
	if version == hashVersion5 {
		inline = v5Inline
	}
	batches, rowRecs, err := buildHotTables(x, d, ib, db, inline)
	if err != nil {
		return nil, err
	}
	var base int64
	var bounds [][2]int64 // version 5: each row's first and last period (ok when first <= last)
	if version == hashVersion5 {
		if base, bounds, err = seriesBounds(x, d); err != nil {
			return nil, err
		}
	}
	n := uint64(x.N)
	k := uint64(bucketLog2(version, x.N))
	dirAt, posAt, recAt, size := hotLayout4(k, n, uint64(d.NumBatches))
	buf := make([]byte, size)
	hv := make([]uint64, n)
	dir := make([]uint32, 1<<k+1)
	for r := range n {
		hv[r] = HashID(x.ID(uint32(r)))
		dir[hv[r]>>(64-k)+1]++
	}
	for b := 1; b < len(dir); b++ {
		dir[b] += dir[b-1]
	}
	for b, at := range dir {
		binary.LittleEndian.PutUint32(buf[dirAt+4*uint64(b):], at)
	}
	next := dir[:1<<k]
	inStride := uint64(recordStride(inline))
	for r := range n {
		b := hv[r] >> (64 - k)
		p := uint64(next[b])
		next[b]++
		binary.LittleEndian.PutUint32(buf[posAt+4*r:], uint32(p))
		e := buf[recAt+v4Stride*p:][:v4Stride]
		copy(e, rowRecs[inStride*r:][:inStride])
		if version == hashVersion4 {
			binary.LittleEndian.PutUint32(e[v4TagAt:], uint32(hv[r]))
		} else {
			if binary.LittleEndian.Uint16(e[14:]) > v5Inline { // the id's length, from buildHotTables
				binary.LittleEndian.PutUint32(e[v5TagAt:], uint32(hv[r]))
			}
			f, l := uint32(noBounds), uint32(noBounds)
			if b := bounds[r]; b[0] <= b[1] && b[1]-base < noBounds {
				f, l = uint32(b[0]-base), uint32(b[1]-base)
			}
			binary.LittleEndian.PutUint32(e[v5FirstAt:], f)
			binary.LittleEndian.PutUint32(e[v5LastAt:], l)
		}
		binary.LittleEndian.PutUint32(e[v4RowAt:], uint32(r))
	}
	copy(buf, hashMagic)
	copy(buf[batchAt:], batches)
	binary.LittleEndian.PutUint32(buf[8:], uint32(version))
	binary.LittleEndian.PutUint32(buf[12:], uint32(k))
	binary.LittleEndian.PutUint32(buf[16:], uint32(n))
	binary.LittleEndian.PutUint32(buf[20:], crc32.Checksum(buf[dirAt:recAt], castagnoli))
	binary.LittleEndian.PutUint32(buf[24:], uint32(d.NumBatches))
	binary.LittleEndian.PutUint32(buf[28:], hotCRC(buf, dirAt, recAt))
	if version == hashVersion5 {
		binary.LittleEndian.PutUint64(buf[32:], uint64(base))
	}
	binary.LittleEndian.PutUint32(buf[60:], crc32.Checksum(buf[:60], castagnoli))
	return buf, nil
}

// seriesBounds is each row's first and last period as data.arrow holds
// them (the periods a lookup's range search reads), and the smallest
// first: first > last (no bounds) for a row that is not hot, has no
// points or whose points lie outside its batch.
func seriesBounds(x *Index, d *Data) (base int64, bounds [][2]int64, err error) {
	bounds = make([][2]int64, x.N)
	base = math.MaxInt64
	for r := range uint32(x.N) {
		bounds[r] = [2]int64{1, 0}
		if x.Tier[r] != uint8(Hot) || x.Length[r] == 0 || int(x.Batch[r]) >= d.NumBatches {
			continue
		}
		b, err := d.Batch(int(x.Batch[r]))
		if err != nil {
			return 0, nil, err
		}
		off, end := int(x.Offset[r]), int(x.Offset[r])+int(x.Length[r])
		if end > b.Len() {
			continue
		}
		if b.Secs != nil {
			bounds[r] = [2]int64{b.Secs[off], b.Secs[end-1]}
		} else {
			bounds[r] = [2]int64{int64(b.Days[off]), int64(b.Days[end-1])}
		}
		if bounds[r][0] <= bounds[r][1] {
			base = min(base, bounds[r][0])
		}
	}
	if base == math.MaxInt64 {
		base = 0
	}
	return base, bounds, nil
}

// find4 is Find in a version 4 index.hash: the bucket's records, the tag
// then the id compared. A directory entry beyond the records (a damaged
// file: Verify reports it) finds nothing.
func (t *HotIndex) find4(id string) (uint32, bool) {
	hv := HashID(id)
	lo, hi, ok := t.bucket(hv)
	if !ok {
		return 0, false
	}
	tag := uint32(hv)
	recs := unsafe.Pointer(unsafe.SliceData(t.recs))
	for r := lo; r < hi; r++ {
		rb := unsafe.Add(recs, uint64(r)*v4Stride)
		if *(*uint32)(unsafe.Add(rb, v4TagAt)) == tag {
			t.coldPrefetch(r)
			if t.sameID(rb, id) {
				return r, true
			}
		}
	}
	return 0, false
}

// bucket is the records [lo, hi) of the bucket of hash hv (versions 4
// and 5); ok is false for a directory entry beyond the records (a damaged
// file: Verify reports it), which finds nothing.
func (t *HotIndex) bucket(hv uint64) (lo, hi uint32, ok bool) {
	dir := unsafe.Add(unsafe.Pointer(unsafe.SliceData(t.dir)), 4*(hv>>t.shift))
	lo, hi = *(*uint32)(dir), *(*uint32)(unsafe.Add(dir, 4))
	return lo, hi, hi <= t.n
}

// coldPrefetch asks for the pages of candidate record r while the
// lookups after open still do (prefetch), before its id is compared.
func (t *HotIndex) coldPrefetch(r uint32) {
	if t.cold.Load() > 0 {
		t.prefetch(r)
	}
}

// find5 is find4 for version 5, whose records have no tag: an inline
// id's length and bytes are compared (in the record's line), a longer
// id's length and the tag beside its offset before index.arrow is read.
func (t *HotIndex) find5(id string) (uint32, bool) {
	if len(id) > MaxSeriesIDLen { // no such id, and its length would not fit the record's uint16
		return 0, false
	}
	hv := HashID(id)
	lo, hi, ok := t.bucket(hv)
	if !ok {
		return 0, false
	}
	n := uint16(len(id))
	recs := unsafe.Pointer(unsafe.SliceData(t.recs))
	for r := lo; r < hi; r++ {
		rb := unsafe.Add(recs, uint64(r)*v4Stride)
		if *(*uint16)(unsafe.Add(rb, 14)) == n && (n <= v5Inline || *(*uint32)(unsafe.Add(rb, v5TagAt)) == uint32(hv)) {
			t.coldPrefetch(r)
			if t.sameID(rb, id) {
				return r, true
			}
		}
	}
	return 0, false
}

// row is the index row of record rec (< t.n) of a version 4 or 5 index.hash.
func (t *HotIndex) row(rec uint32) uint32 {
	return *(*uint32)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(t.recs)), uint64(rec)*v4Stride+v4RowAt))
}

// Rec is the record of index row row, for HotRangeDays and HotRangeSecs:
// the row itself before version 4, else the row table's entry. ok is false
// when there is no such row, or the row table points at another row's
// record (a damaged file: Verify reports it).
func (t *HotIndex) Rec(row uint32) (uint32, bool) {
	if row >= t.n {
		return 0, false
	}
	if t.pos == nil {
		return row, true
	}
	rec := *(*uint32)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(t.pos)), 4*uint64(row)))
	return rec, rec < t.n && t.row(rec) == row
}

// verifyHot4 checks a version 4 or 5 index.hash beyond its header (OpenHash):
// its two checksums, then every byte against the file buildHash4 makes of
// index.arrow and data.arrow.
func verifyHot4(hb, ib, db []byte, x *Index, d *Data, h Hash) error {
	dirAt, posAt, recAt, _ := hotLayout4(uint64(h.log2), uint64(h.n), uint64(h.batches))
	if got, want := crc32.Checksum(hb[dirAt:recAt], castagnoli), binary.LittleEndian.Uint32(hb[20:]); got != want {
		return corrupt(HashFile, int64(dirAt), "directory and row table checksum %08x, want %08x", got, want)
	}
	if got, want := hotCRC(hb, dirAt, recAt), binary.LittleEndian.Uint32(hb[28:]); got != want {
		return corrupt(HashFile, batchAt, "batch table and records checksum %08x, want %08x", got, want)
	}
	if int(h.batches) != d.NumBatches {
		return corrupt(HashFile, 24, "%d batches, data.arrow has %d", h.batches, d.NumBatches)
	}
	want, err := buildHash4(h.version, x, d, ib, db)
	if err != nil {
		return err
	}
	// The tables first: damage to them (with its checksums rewritten)
	// also changes the header's checksums, and is named by where it is.
	i := firstDiff(hb[batchAt:], want[batchAt:])
	if i >= 0 {
		i += batchAt
	} else {
		i = firstDiff(hb[:batchAt], want[:batchAt])
	}
	switch {
	case i < 0:
		return nil
	case h.version == hashVersion5 && i >= 32 && i < 40:
		return corrupt(HashFile, int64(i), "the base of the records' periods does not match data.arrow")
	case uint64(i) < batchAt:
		return corrupt(HashFile, int64(i), "header does not match the tables")
	case uint64(i) < dirAt:
		return corrupt(HashFile, int64(i), "batch %d does not match data.arrow", (uint64(i)-batchAt)/batchLocSize)
	case uint64(i) < posAt:
		return corrupt(HashFile, int64(i), "directory entry %d does not match the ids' hashes", (uint64(i)-dirAt)/4)
	case uint64(i) < recAt:
		return corrupt(HashFile, int64(i), "row table entry %d does not match the ids' hashes", (uint64(i)-posAt)/4)
	}
	rec := (uint64(i) - recAt) / v4Stride
	if at := (uint64(i) - recAt) % v4Stride; h.version == hashVersion5 && at >= v5FirstAt && at < v4RowAt {
		return corrupt(HashFile, int64(i), "record %d: first or last period does not match data.arrow", rec)
	}
	return corrupt(HashFile, int64(i), "record %d does not match index.arrow", rec)
}

// openHash4 checks the rest of a version 4 or 5 header (its checksum and
// reserved bytes are checked): k, the series count and the size.
func openHash4(b []byte, series, version int) (Hash, error) {
	h := Hash{version: version, stride: v4Stride, inline: v4Inline}
	if version == hashVersion5 {
		h.inline, h.base = v5Inline, int64(binary.LittleEndian.Uint64(b[32:]))
	}
	h.log2, h.n, h.batches = binary.LittleEndian.Uint32(b[12:]), binary.LittleEndian.Uint32(b[16:]), binary.LittleEndian.Uint32(b[24:])
	if int(h.n) != series {
		return Hash{}, corrupt(HashFile, 16, "holds %d series, index has %d", h.n, series)
	}
	if want := bucketLog2(version, series); h.log2 != want {
		return Hash{}, corrupt(HashFile, 12, "2^%d buckets, want 2^%d for %d series", h.log2, want, series)
	}
	if _, _, _, size := hotLayout4(uint64(h.log2), uint64(h.n), uint64(h.batches)); uint64(len(b)) != size {
		return Hash{}, corrupt(HashFile, -1, "size %d, want %d for %d series in %d batches", len(b), size, h.n, h.batches)
	}
	return h, nil
}

// Row is the index row of record rec (Find's): rec itself before version
// 4. ok is false when there is no such record, or it names no row (a
// damaged file).
func (t *HotIndex) Row(rec uint32) (uint32, bool) {
	if rec >= t.n {
		return 0, false
	}
	if t.pos == nil {
		return rec, true
	}
	row := t.row(rec)
	return row, row < t.n
}
