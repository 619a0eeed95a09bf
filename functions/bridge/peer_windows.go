package bridge

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"unsafe"

	"golang.org/x/sys/windows"
)

const peerCheckSupported = true

// iphlpapi's GetExtendedTcpTable is not wrapped by x/sys/windows.
var procGetExtendedTcpTable = windows.NewLazySystemDLL("iphlpapi.dll").NewProc("GetExtendedTcpTable")

const (
	tcpTableOwnerPidAll = 5 // TCP_TABLE_OWNER_PID_ALL
	tcpStateTimeWait    = 11
	tcpRow4Size         = 24 // MIB_TCPROW_OWNER_PID: six DWORDs
	tcpRow6Size         = 56 // MIB_TCP6ROW_OWNER_PID
)

// peerChecker knows the bridge's own user.
type peerChecker struct {
	sid *windows.SID // the bridge process's user
	pid uint32
}

func newPeerChecker() (*peerChecker, error) {
	u, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return nil, fmt.Errorf("bridge: the process's own user: %w", err)
	}
	sid, err := u.User.Sid.Copy()
	if err != nil {
		return nil, fmt.Errorf("bridge: the process's own user: %w", err)
	}
	return &peerChecker{sid: sid, pid: windows.GetCurrentProcessId()}, nil
}

// check finds the process that owns the client's end of the connection
// local<-remote (the bridge's view: the client's local address is the
// bridge's remote) and compares the user of its token with the bridge's.
// A process of another user cannot even be opened for query by an
// ordinary user: that is a refusal too (ErrPeerUnknown).
func (c *peerChecker) check(local, remote *net.TCPAddr) error {
	pid, err := owningPID(local, remote)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrPeerUnknown, err)
	}
	if pid == c.pid {
		return nil
	}
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, pid)
	if err != nil {
		return fmt.Errorf("%w: open process %d: %v", ErrPeerUnknown, pid, err)
	}
	defer windows.CloseHandle(h)
	var tok windows.Token
	if err := windows.OpenProcessToken(h, windows.TOKEN_QUERY, &tok); err != nil {
		return fmt.Errorf("%w: token of process %d: %v", ErrPeerUnknown, pid, err)
	}
	defer tok.Close()
	u, err := tok.GetTokenUser()
	if err != nil {
		return fmt.Errorf("%w: user of process %d: %v", ErrPeerUnknown, pid, err)
	}
	if !windows.EqualSid(u.User.Sid, c.sid) {
		return &PeerError{Owner: u.User.Sid.String(), Err: fmt.Errorf("%w: client %v is process %d of %s, the bridge runs as %s", ErrForeignUser, remote, pid, u.User.Sid, c.sid)}
	}
	return nil
}

// owningPID finds the client socket (local address = the bridge's remote,
// remote address = the bridge's local) in the IPv4 table, then the IPv6
// one (a dual-stack socket connected to ::ffff:127.0.0.1).
func owningPID(local, remote *net.TCPAddr) (uint32, error) {
	if remote.IP.To4() != nil {
		t, err := tcpTable(windows.AF_INET)
		if err != nil {
			return 0, err
		}
		if pid, ok := findRow4(t, remote, local); ok {
			return pid, nil
		}
	}
	t, err := tcpTable(windows.AF_INET6)
	if err != nil {
		return 0, err
	}
	if pid, ok := findRow6(t, remote, local); ok {
		return pid, nil
	}
	return 0, fmt.Errorf("no socket %v -> %v in the TCP tables", remote, local)
}

// tcpTable returns GetExtendedTcpTable(TCP_TABLE_OWNER_PID_ALL) for the
// address family: a DWORD count, then the rows.
func tcpTable(family uint32) ([]byte, error) {
	if err := procGetExtendedTcpTable.Find(); err != nil {
		return nil, err
	}
	size := uint32(16 << 10)
	for range 8 {
		buf := make([]byte, size)
		r, _, _ := procGetExtendedTcpTable.Call(uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&size)),
			0, uintptr(family), tcpTableOwnerPidAll, 0)
		switch windows.Errno(r) {
		case 0:
			return buf[:min(int(size), len(buf))], nil
		case windows.ERROR_INSUFFICIENT_BUFFER:
			size += 4 << 10 // the table may grow before the next call
			continue
		default:
			return nil, fmt.Errorf("GetExtendedTcpTable: %w", windows.Errno(r))
		}
	}
	return nil, errors.New("GetExtendedTcpTable: the table keeps growing")
}

// rows returns the table's rows of rowSize bytes each, bounded by the
// buffer whatever the count claims.
func rows(t []byte, rowSize int) (n int, body []byte) {
	if len(t) < 4 {
		return 0, nil
	}
	n = int(binary.LittleEndian.Uint32(t))
	body = t[4:]
	return min(n, len(body)/rowSize), body
}

// port reads a DWORD port: network byte order in its low 16 bits.
func port(b []byte) int { return int(b[0])<<8 | int(b[1]) }

// findRow4 walks MIB_TCPROW_OWNER_PID rows: dwState, dwLocalAddr,
// dwLocalPort, dwRemoteAddr, dwRemotePort, dwOwningPid; addresses in
// network byte order.
func findRow4(t []byte, local, remote *net.TCPAddr) (uint32, bool) {
	l4, r4 := local.IP.To4(), remote.IP.To4()
	n, body := rows(t, tcpRow4Size)
	for i := range n {
		r := body[i*tcpRow4Size : (i+1)*tcpRow4Size]
		if binary.LittleEndian.Uint32(r[0:]) == tcpStateTimeWait {
			continue
		}
		if port(r[8:]) == local.Port && port(r[16:]) == remote.Port && net.IP(r[4:8]).Equal(l4) && net.IP(r[12:16]).Equal(r4) {
			return binary.LittleEndian.Uint32(r[20:]), true
		}
	}
	return 0, false
}

// findRow6 walks MIB_TCP6ROW_OWNER_PID rows: ucLocalAddr[16],
// dwLocalScopeId, dwLocalPort, ucRemoteAddr[16], dwRemoteScopeId,
// dwRemotePort, dwState, dwOwningPid.
func findRow6(t []byte, local, remote *net.TCPAddr) (uint32, bool) {
	n, body := rows(t, tcpRow6Size)
	for i := range n {
		r := body[i*tcpRow6Size : (i+1)*tcpRow6Size]
		if binary.LittleEndian.Uint32(r[48:]) == tcpStateTimeWait {
			continue
		}
		if port(r[20:]) == local.Port && port(r[44:]) == remote.Port && net.IP(r[0:16]).Equal(local.IP) && net.IP(r[24:40]).Equal(remote.IP) {
			return binary.LittleEndian.Uint32(r[52:]), true
		}
	}
	return 0, false
}
