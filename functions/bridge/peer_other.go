//go:build !linux && !windows

package bridge

import "net"

// No same-user check on this OS (macOS, BSD): the token alone guards the
// API. docs/excel.md says so.
const peerCheckSupported = false

type peerChecker struct{}

func newPeerChecker() (*peerChecker, error) { return &peerChecker{}, nil }

func (*peerChecker) check(local, remote *net.TCPAddr) error { return nil }
