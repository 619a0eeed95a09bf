//go:build amd64 || arm64

package prefetch

// Range starts loading every cache line of the n bytes at p.
func Range(p, n uintptr)
