package snapshot

// SetWarmSnapshotBytes sets the size from which an opened snapshot has the
// page cache warmed, and returns the function that restores it.
func SetWarmSnapshotBytes(n int) (restore func()) {
	old := warmSnapshotBytes
	warmSnapshotBytes = n
	return func() { warmSnapshotBytes = old }
}
