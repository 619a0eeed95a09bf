//go:build !linux

package mmap

// WillNeed is advice only the Linux build gives (see willneed_linux.go).
func WillNeed(b []byte) {}
