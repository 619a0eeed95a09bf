package snapshot

// SetHugeSnapshotBytes sets the size from which a snapshot is mapped in
// huge pages, and returns the function that restores it.
func SetHugeSnapshotBytes(n int) (restore func()) {
	old := hugeSnapshotBytes
	hugeSnapshotBytes = n
	return func() { hugeSnapshotBytes = old }
}
