package localcache_test

// The tests write snapshots with a cold tier (and compact them): they link
// the tail.parquet writer like the binaries that write snapshots do. The
// package itself does not (localcache/format TestReadPathLinksNoParquet).
import _ "github.com/energyscope/energyscope/localcache/format/tailwrite"
