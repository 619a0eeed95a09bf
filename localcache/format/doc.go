// Package format owns the bytes of a snapshot: every file of a snapshot
// directory, the directory layout of one dataset (CURRENT, snapshots/, the
// temporary names), how they are written, published by rename, verified
// and read back. It is the only code that writes or parses these bytes;
// FORMAT.md beside it is their spec (and also specifies, for their owners,
// the layout of a whole home, the write-ahead log of localcache/delta and
// the lake of server/lake).
//
// A snapshot is immutable: written once into a temporary directory,
// published by rename, never modified. Everything a server used to rebuild
// at start (which series exist, where their rows are, their bounds, latest
// value and metadata) is cooked into it, so opening one decodes nothing:
// the readers here take mapped bytes and look things up in place.
//
// Map of the package:
//
//   - table.go: what goes in: Table (rows in any order), SeriesMeta,
//     Frequency (ParseFrequency, Normalize over internal/calendar's
//     Bucket), PeriodType, Tier.
//   - write.go: Write (validate, sort and normalize, dedupe, cut batches
//     at series boundaries, write every file, manifest last), WriteOptions,
//     WriteStats, InferFrequency, and the period limits (MinPeriod,
//     MaxPeriod, MinRecordPeriod), the one set of them.
//   - sorted.go: SortedTable and WriteSorted, the same files from rows the
//     caller already holds in order (compaction's fold), checked rather
//     than sorted (ErrNotSorted).
//   - schema.go: the Arrow schemas of data.arrow and index.arrow and their
//     column numbers.
//   - manifest.go: the file names of a snapshot, manifest.json (Manifest,
//     ParseManifest, ReadManifest, Validate), file and chunk hashes
//     (HashFileInfo, VerifyFiles), ValidDatasetName.
//   - layout.go: one dataset's directory: CURRENT (WriteCurrent,
//     ReadCurrent), TempSnapshotDir, Publish, SweepTemp, Verify (a whole
//     snapshot directory against its manifest).
//   - hash.go: index.hash, the open-addressing slot table (HashID,
//     OpenHash, Hash.Lookup).
//   - hot.go: index.hash version 2's batch table and hot records
//     (HotIndex: OpenHot, Lookup, Record, Slice), the one lookup path of
//     both format versions (version 1's records are built at open).
//   - read.go: OpenIndex and OpenData: index.arrow and data.arrow read in
//     place from mapped bytes (Index, Data, Batch).
//   - footer.go: the bounds check of an Arrow IPC footer before arrow-go
//     decodes it (a flipped bit must be a CorruptionError, not an
//     out-of-memory crash).
//   - tail.go, tail_decode.go, tail_footer.go: tail.parquet, the cold
//     tier: TailRule (which series are cold), OpenTail with the
//     hand-rolled decoding of its footer and of its column chunks
//     straight from the mapping. The Parquet writer is in the subpackage
//     tailwrite, which a binary that writes cold tiers imports (Write
//     reaches it through internal/tailhook; without it Write refuses a
//     cold tier with ErrNoTailWriter), so that a binary that only reads
//     snapshots links neither arrow-go's Parquet packages nor
//     arrow/compute.
//   - record.go: the record of a live update (Record, Op, RecordMeta),
//     ValidateRecords, and the one encoding of a batch of records
//     (EncodeBatch, DecodeBatch, the exact EncodedSize): the payload of a
//     write-ahead log frame (localcache/delta frames it) and of a sync
//     delta frame (sync/protocol).
//   - seriesid.go: ValidSeriesID, the rules for a series id (shared by the
//     cook and live ingest).
//   - errors.go: ErrNotFound and CorruptionError{File, Offset, Err}.
//
// Lifetimes: Index, Data, Batch and Tail alias the bytes they were opened
// on; they and every string or slice they return are valid only while the
// caller keeps those bytes mapped (localcache/snapshot holds the mapping
// and the reference count). Copy what must outlive it.
//
// What it is not: it maps no file and counts no reference
// (localcache/snapshot does), holds no delta and no write-ahead log
// (localcache/delta), knows no home, no LOCK and no store
// (localcache), and parses no source file (server/cook). It owns the
// record codec so that sync/protocol needs no package but this one. It
// imports the standard library, arrow-go and three internal leaves: internal/calendar
// (where a period starts), internal/fileutil (durable writes) and
// localcache/internal/mmap (the writer maps the files it has just written
// to derive index.hash's records from them).
package format
