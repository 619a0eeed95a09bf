package bridge

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
)

const peerCheckSupported = true

// peerChecker knows the bridge's own user.
type peerChecker struct {
	uid int // the bridge's effective uid
}

func newPeerChecker() (*peerChecker, error) {
	return &peerChecker{uid: os.Geteuid()}, nil
}

// check finds the client's end of the connection local<-remote (the
// bridge's view) among the machine's TCP sockets and compares its owner
// with the bridge's uid. The client socket is the one whose local address
// is the bridge's remote and whose remote address is the bridge's local.
// A client may use an AF_INET6 socket connected to ::ffff:127.0.0.1, which
// the kernel lists in /proc/net/tcp6 in its v4-mapped form.
func (c *peerChecker) check(local, remote *net.TCPAddr) error {
	uid, err := socketOwner("/proc/net/tcp", procAddr4(remote), procAddr4(local))
	if errors.Is(err, errNoSocket) {
		uid, err = socketOwner("/proc/net/tcp6", procAddr6(remote), procAddr6(local))
	}
	if errors.Is(err, errNoSocket) {
		return fmt.Errorf("%w: no socket %v -> %v in /proc/net/tcp{,6}", ErrPeerUnknown, remote, local)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrPeerUnknown, err)
	}
	if uid != c.uid {
		return fmt.Errorf("%w: client %v runs as uid %d, the bridge as uid %d", ErrForeignUser, remote, uid, c.uid)
	}
	return nil
}

var errNoSocket = errors.New("no such socket")

// socketOwner reads a /proc/net/tcp-format file and returns the uid of
// the socket with the given local and remote address (as procAddr4/6 spell
// them), errNoSocket if there is none. TIME_WAIT entries (state 06) own
// nothing and are skipped.
func socketOwner(path string, local, remote []byte) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return 0, errNoSocket
		}
		return 0, err
	}
	return parseSocketOwner(b, local, remote)
}

// parseSocketOwner is socketOwner over the file's contents. A line is
//
//	sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
func parseSocketOwner(b, local, remote []byte) (int, error) {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		// Cheap filter before splitting: the client's address must occur.
		if !bytes.Contains(line, local) {
			continue
		}
		f := bytes.Fields(line)
		if len(f) < 8 || !bytes.Equal(f[1], local) || !bytes.Equal(f[2], remote) || string(f[3]) == "06" {
			continue
		}
		uid, err := strconv.Atoi(string(f[7]))
		if err != nil {
			return 0, fmt.Errorf("bad uid %q in a /proc/net/tcp line", f[7])
		}
		return uid, nil
	}
	return 0, errNoSocket
}

// procAddr4 spells an IPv4 address as /proc/net/tcp does: the 4 bytes of
// the address read as a native-endian uint32, then the port, in hex.
func procAddr4(a *net.TCPAddr) []byte {
	ip := a.IP.To4()
	if ip == nil {
		return []byte("-")
	}
	return fmt.Appendf(nil, "%08X:%04X", binary.NativeEndian.Uint32(ip), a.Port)
}

// procAddr6 spells an address as /proc/net/tcp6 does: four native-endian
// uint32 words, then the port. IPv4 addresses take their v4-mapped form.
func procAddr6(a *net.TCPAddr) []byte {
	ip := a.IP.To16()
	if ip == nil {
		return []byte("-")
	}
	return fmt.Appendf(nil, "%08X%08X%08X%08X:%04X",
		binary.NativeEndian.Uint32(ip[0:4]), binary.NativeEndian.Uint32(ip[4:8]),
		binary.NativeEndian.Uint32(ip[8:12]), binary.NativeEndian.Uint32(ip[12:16]), a.Port)
}
