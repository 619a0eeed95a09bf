//go:build !linux

package mmap

const fenceSupported = false

func markRegion(b []byte, odd bool) {}

func dropResident(b []byte) {}
