// Package tailhook is where the cold tier's Parquet writer
// (localcache/format/tailwrite) registers itself for format.Write. It
// exists so that format does not import the writer: arrow-go's Parquet
// writer links parquet/metadata and arrow/compute, whose init costs every
// binary several MiB of RSS, and a binary that only reads snapshots must
// not pay that (BENCHMARKS.md "Serving snapshot v2").
package tailhook

import "io"

// Group is one row group of tail.parquet: the rows of whole series, in
// order. Exactly one of Days and Secs is set.
type Group struct {
	Series []uint32
	Days   []int32
	Secs   []int64 // unix seconds; written as milliseconds
	Values []float64
}

// Writer writes tail.parquet to w: one row group per group, the given
// key-value metadata in the footer.
type Writer func(w io.Writer, timestamp bool, kv [][2]string, groups []Group) error

// Write is set by tailwrite's init; nil when the binary does not link it.
var Write Writer
