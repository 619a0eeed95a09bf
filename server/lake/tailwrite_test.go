package lake

// The tests write snapshots with a cold tier: they link the tail.parquet
// writer like the server does.
import _ "github.com/energyscope/energyscope/localcache/format/tailwrite"
