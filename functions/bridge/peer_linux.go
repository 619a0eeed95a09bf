package bridge

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
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
// bridge's view: the client socket's local address is the bridge's remote)
// and compares its owner with the bridge's uid. It asks the kernel for
// that one socket over NETLINK_SOCK_DIAG (what ss(8) uses: a hash lookup,
// ~20 µs); if netlink is not available it reads /proc/net/tcp{,6}, which
// the kernel builds by walking its whole connection hash table (1-4 ms
// here, more on a machine with a bigger table).
func (c *peerChecker) check(local, remote *net.TCPAddr) error {
	uid, err := diagOwner(remote, local)
	if err != nil {
		uid, err = procOwner(remote, local)
	}
	if errors.Is(err, errNoSocket) {
		return fmt.Errorf("%w: no socket %v -> %v", ErrPeerUnknown, remote, local)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrPeerUnknown, err)
	}
	if uid != c.uid {
		return &PeerError{Owner: "uid " + strconv.Itoa(uid), Err: fmt.Errorf("%w: client %v runs as uid %d, the bridge as uid %d", ErrForeignUser, remote, uid, c.uid)}
	}
	return nil
}

// procOwner finds the owner of the socket client->server in
// /proc/net/tcp, then /proc/net/tcp6: a client may use an AF_INET6 socket
// connected to ::ffff:127.0.0.1, which the kernel lists there in its
// v4-mapped form.
func procOwner(client, server *net.TCPAddr) (int, error) {
	uid, err := socketOwner("/proc/net/tcp", procAddr4(client), procAddr4(server))
	if errors.Is(err, errNoSocket) {
		uid, err = socketOwner("/proc/net/tcp6", procAddr6(client), procAddr6(server))
	}
	return uid, err
}

// Netlink sock_diag (linux/sock_diag.h, linux/inet_diag.h).
const (
	sockDiagByFamily = 20 // SOCK_DIAG_BY_FAMILY
	diagReqSize      = 56 // struct inet_diag_req_v2
	diagMsgUID       = 64 // offset of idiag_uid in struct inet_diag_msg
	tcpTimeWait      = 6
)

// diagOwner asks the kernel for the one TCP socket whose local address is
// client and whose remote address is server, and returns its uid. An
// AF_INET lookup also finds an AF_INET6 socket connected to a v4-mapped
// address (the kernel delivers IPv4 packets to it by the same lookup).
func diagOwner(client, server *net.TCPAddr) (int, error) {
	c4, s4 := client.IP.To4(), server.IP.To4()
	family, csrc, sdst := byte(syscall.AF_INET), []byte(c4), []byte(s4)
	if c4 == nil || s4 == nil {
		family, csrc, sdst = syscall.AF_INET6, client.IP.To16(), server.IP.To16()
		if csrc == nil || sdst == nil {
			return 0, fmt.Errorf("sock_diag: bad address %v -> %v", client, server)
		}
	}
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, syscall.NETLINK_INET_DIAG)
	if err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	defer syscall.Close(fd)
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &syscall.Timeval{Sec: 2}); err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	// nlmsghdr, then inet_diag_req_v2 {family, protocol, ext, pad, states,
	// sockid {sport, dport (big-endian), src[16], dst[16], if, cookie[2]}}.
	req := make([]byte, syscall.NLMSG_HDRLEN+diagReqSize)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], sockDiagByFamily)
	ne.PutUint16(req[6:], syscall.NLM_F_REQUEST)
	ne.PutUint32(req[8:], 1) // seq
	r := req[syscall.NLMSG_HDRLEN:]
	r[0], r[1] = family, syscall.IPPROTO_TCP
	ne.PutUint32(r[4:], ^uint32(0)&^(1<<tcpTimeWait)) // every state but TIME_WAIT
	binary.BigEndian.PutUint16(r[8:], uint16(client.Port))
	binary.BigEndian.PutUint16(r[10:], uint16(server.Port))
	copy(r[12:28], csrc)
	copy(r[28:44], sdst)
	ne.PutUint32(r[48:], ^uint32(0)) // INET_DIAG_NOCOOKIE
	ne.PutUint32(r[52:], ^uint32(0))
	if err := syscall.Sendto(fd, req, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	buf := make([]byte, 8192)
	n, _, err := syscall.Recvfrom(fd, buf, 0)
	if err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	for _, m := range msgs {
		switch m.Header.Type {
		case syscall.NLMSG_ERROR:
			if len(m.Data) >= 4 {
				if e := syscall.Errno(-int32(ne.Uint32(m.Data))); e == syscall.ENOENT {
					return 0, errNoSocket
				} else if e != 0 {
					return 0, fmt.Errorf("sock_diag: %w", e)
				}
			}
		case sockDiagByFamily:
			if len(m.Data) < diagMsgUID+4 {
				return 0, fmt.Errorf("sock_diag: short answer (%d bytes)", len(m.Data))
			}
			if m.Data[1] == tcpTimeWait {
				return 0, errNoSocket
			}
			return int(ne.Uint32(m.Data[diagMsgUID:])), nil
		}
	}
	return 0, fmt.Errorf("sock_diag: no answer")
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
