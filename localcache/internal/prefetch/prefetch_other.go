//go:build !amd64 && !arm64

package prefetch

// Range does nothing on this architecture.
func Range(p, n uintptr) {}
