package format

import (
	"encoding/binary"
	"hash/crc32"
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

// bucketLog2 is k of version 4 for n series: about four series a bucket,
// at least 16 buckets.
func bucketLog2(n int) uint32 { return max(uint32(bits.Len(uint(n/4))), 4) }

func align64(n uint64) uint64 { return (n + hotRecordsAlign - 1) &^ (hotRecordsAlign - 1) }

// hotLayout4 is the position of the directory, the row table and the
// records of a version 4 index.hash, and its size.
func hotLayout4(k, series, batches uint64) (dirAt, posAt, recAt, size uint64) {
	dirAt = align64(batchAt + batchLocSize*batches)
	posAt = align64(dirAt + 4*(1<<k+1))
	recAt = align64(posAt + 4*series)
	return dirAt, posAt, recAt, recAt + v4Stride*series
}

// buildHash4 builds index.hash version 4 for the rows of x over
// index.arrow's and data.arrow's bytes.
func buildHash4(x *Index, d *Data, ib, db []byte) ([]byte, error) {
	batches, rowRecs, err := buildHotTables(x, d, ib, db, v4Inline)
	if err != nil {
		return nil, err
	}
	n := uint64(x.N)
	k := uint64(bucketLog2(x.N))
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
	inStride := uint64(recordStride(v4Inline))
	for r := range n {
		b := hv[r] >> (64 - k)
		p := uint64(next[b])
		next[b]++
		binary.LittleEndian.PutUint32(buf[posAt+4*r:], uint32(p))
		e := buf[recAt+v4Stride*p:][:v4Stride]
		copy(e, rowRecs[inStride*r:][:inStride])
		binary.LittleEndian.PutUint32(e[v4TagAt:], uint32(hv[r]))
		binary.LittleEndian.PutUint32(e[v4RowAt:], uint32(r))
	}
	copy(buf, hashMagic)
	copy(buf[batchAt:], batches)
	binary.LittleEndian.PutUint32(buf[8:], hashVersion4)
	binary.LittleEndian.PutUint32(buf[12:], uint32(k))
	binary.LittleEndian.PutUint32(buf[16:], uint32(n))
	binary.LittleEndian.PutUint32(buf[20:], crc32.Checksum(buf[dirAt:recAt], castagnoli))
	binary.LittleEndian.PutUint32(buf[24:], uint32(d.NumBatches))
	binary.LittleEndian.PutUint32(buf[28:], hotCRC(buf, dirAt, recAt))
	binary.LittleEndian.PutUint32(buf[60:], crc32.Checksum(buf[:60], castagnoli))
	return buf, nil
}

// find4 is Find in a version 4 index.hash: the bucket's records, the tag
// then the id compared. A directory entry beyond the records (a damaged
// file: Verify reports it) finds nothing.
func (t *HotIndex) find4(id string) (uint32, bool) {
	hv := HashID(id)
	dir := unsafe.Add(unsafe.Pointer(unsafe.SliceData(t.dir)), 4*(hv>>t.shift))
	lo, hi := *(*uint32)(dir), *(*uint32)(unsafe.Add(dir, 4))
	if hi > t.n {
		return 0, false
	}
	tag := uint32(hv)
	recs := unsafe.Pointer(unsafe.SliceData(t.recs))
	for r := lo; r < hi; r++ {
		rb := unsafe.Add(recs, uint64(r)*v4Stride)
		if *(*uint32)(unsafe.Add(rb, v4TagAt)) != tag {
			continue
		}
		if t.cold.Load() > 0 {
			t.prefetch(r)
		}
		if t.sameID(rb, id) {
			return r, true
		}
	}
	return 0, false
}

// row is the index row of record rec (< t.n) of a version 4 index.hash.
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

// verifyHot4 checks a version 4 index.hash beyond its header (OpenHash):
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
	want, err := buildHash4(x, d, ib, db)
	if err != nil {
		return err
	}
	i := firstDiff(hb, want)
	switch {
	case i < 0:
		return nil
	case uint64(i) < dirAt:
		return corrupt(HashFile, int64(i), "batch %d does not match data.arrow", (uint64(i)-batchAt)/batchLocSize)
	case uint64(i) < posAt:
		return corrupt(HashFile, int64(i), "directory entry %d does not match the ids' hashes", (uint64(i)-dirAt)/4)
	case uint64(i) < recAt:
		return corrupt(HashFile, int64(i), "row table entry %d does not match the ids' hashes", (uint64(i)-posAt)/4)
	}
	return corrupt(HashFile, int64(i), "record %d does not match index.arrow", (uint64(i)-recAt)/v4Stride)
}

// openHash4 checks the rest of a version 4 header (its checksum and
// reserved bytes are checked): k, the series count and the size.
func openHash4(b []byte, series int) (Hash, error) {
	h := Hash{version: hashVersion4, stride: v4Stride, inline: v4Inline}
	h.log2, h.n, h.batches = binary.LittleEndian.Uint32(b[12:]), binary.LittleEndian.Uint32(b[16:]), binary.LittleEndian.Uint32(b[24:])
	if int(h.n) != series {
		return Hash{}, corrupt(HashFile, 16, "holds %d series, index has %d", h.n, series)
	}
	if want := bucketLog2(series); h.log2 != want {
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
