package snapshot

// SetWarmSnapshotBytes sets the size from which an opened snapshot has the
// page cache warmed, and returns the function that restores it.
func SetWarmSnapshotBytes(n int) (restore func()) {
	old := warmSnapshotBytes
	warmSnapshotBytes = n
	return func() { warmSnapshotBytes = old }
}

// SetHugeIndexBytes sets the size of index.hash from which a snapshot
// opened with Options.HugeIndex copies it, and returns the function that
// restores it.
func SetHugeIndexBytes(n int) (restore func()) {
	old := hugeIndexBytes
	hugeIndexBytes = n
	return func() { hugeIndexBytes = old }
}
