// Package localcache is the serving store: the datasets of a home
// directory, each served from its current memory-mapped snapshot.
//
// A home holds datasets/<name>/ (see localcache/format for what is inside).
// Series ids are unique across the datasets of a home: a lookup without a
// dataset finds the series in whichever dataset has it; "dataset:series"
// names the dataset explicitly.
//
// Each dataset publishes its read state through an atomic pointer. A reader
// takes a reference on the state it loaded (TryRef); replacing the state
// never waits for readers, and the old snapshot is unmapped when its last
// reader lets go. Results that alias a mapping (Result.Points) are valid
// until Result.Release; everything else is copied.
//
// The store does not know about HTTP, Excel, sync or Wails; those wire it
// up through small interfaces they declare themselves.
//
// Files, by operation:
//
//   - store.go: Open, Close, Refresh, the Store and Dataset types, the
//     read state a dataset publishes, dataset bookkeeping (Dataset,
//     DatasetNames, Status) and the opening of a dataset's snapshot,
//     write-ahead log and delta.
//   - read.go: the read path: Get, View, Copy, Info, Latest, Search, Has,
//     LastSeq, State, and the merge of a snapshot's points with the delta.
//   - apply.go: Apply (the delta side: write-ahead log, then visible),
//     the log's recovery after a failed write, and Watch.
//   - compact.go: Compact and CompactThrough, and the fold of base +
//     delta they write.
//   - install.go: Install, publishing a snapshot
//     beside the old one, swapping it in, moving CURRENT, and retiring
//     the replaced snapshots.
//   - stage.go: Stage, a download assembled in the dataset's staging
//     directory, chunk-verified and resumable, committed by Install.
//   - truncate.go: Truncate, dropping delta records above a seq.
//   - epoch.go: the write-ahead log's epoch marker.
//   - damage.go, heal.go, scrub.go: damage containment, re-install over a
//     damaged dataset, and the background scrub.
//   - facets.go: Facets and Browse; chain.go: Pending for a companion's
//     history chain; home.go: DefaultHome.
//   - errors.go: every sentinel and error type of the package.
package localcache
