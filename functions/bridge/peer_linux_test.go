package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nobody is the other OS user of the two-user test.
const nobody = 65534

// runPeerChild runs the test binary as the peer child (peer_test.go),
// as cred's user (nil: this process's), against b.
func runPeerChild(t *testing.T, b *testBridge, cred *syscall.Credential) []peerAnswer {
	t.Helper()
	ca, err := os.ReadFile(b.Certs().CAPath())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// /proc/self/exe: the test binary sits in a directory only root may
	// enter; the magic link opens it without walking that path.
	cmd := exec.CommandContext(ctx, "/proc/self/exe", "-test.run=^$")
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), peerChildEnv+"="+mustJSON(t, map[string]string{"url": b.URL(), "token": b.Token(), "ca": string(ca)}))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("peer child (credential %+v): %v\n%s%s", cred, err, out, stderr.Bytes())
	}
	var got []peerAnswer
	if err := json.Unmarshal(out, &got); err != nil || len(got) != 2 {
		t.Fatalf("peer child output: %v\n%s", err, out)
	}
	return got
}

// TestBridgeRefusesOtherUser is the shared-terminal-server case with two
// users: a client of the bridge's own user is served, the same client run
// as nobody, with the correct token, is refused (403 on every request,
// the add-in page and its token included). It needs root to start a
// process as another user: CI runs as root; elsewhere it is skipped.
func TestBridgeRefusesOtherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		if ciRequired() {
			t.Fatal("CI=true: this test must run as root, to start a client as another user")
		}
		t.Skip("needs root to run a client as another user")
	}
	b := startBridge(t, sampleHome(t), nil)

	own := runPeerChild(t, b, nil)
	if own[0].Status != 200 || !strings.Contains(own[0].Body, `"datasets"`) {
		t.Fatalf("own user, /v1/status: %+v", own[0])
	}
	if own[1].Status != 200 || !strings.Contains(own[1].Body, b.Token()) {
		t.Fatalf("own user, taskpane.html: %d %s", own[1].Status, own[1].Err)
	}
	m0 := b.Metrics()

	other := runPeerChild(t, b, &syscall.Credential{Uid: nobody, Gid: nobody})
	for _, a := range other {
		if a.Status != 403 || strings.Contains(a.Body, b.Token()) || !strings.Contains(a.Body, "another user") {
			t.Errorf("nobody, %s: status %d err %q body %.300s", a.Path, a.Status, a.Err, a.Body)
		}
	}
	if m0.PeersRefused != 0 || m0.PeersChecked < 1 {
		t.Errorf("after the own user's calls: %+v", m0)
	}
	// Each refusal closed its connection: two connections, two refusals.
	if m := b.Metrics(); m.PeersRefused != 2 {
		t.Errorf("after nobody's calls: %+v, want 2 refused", m)
	}
}

// loopbackPair connects dial to a fresh 127.0.0.1 listener and returns the
// server's end.
func loopbackPair(t *testing.T, dial func(port int) (func(), error)) net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done, err := dial(ln.Addr().(*net.TCPAddr).Port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(done)
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestPeerOwnerLinux looks up real sockets, by sock_diag and by /proc: an
// AF_INET client (in /proc/net/tcp) and an AF_INET6 client connected to
// ::ffff:127.0.0.1 (in /proc/net/tcp6), as this process's uid; a checker
// for another uid refuses them; a connection that does not exist is
// unknown.
func TestPeerOwnerLinux(t *testing.T) {
	me, err := newPeerChecker()
	if err != nil {
		t.Fatal(err)
	}
	other := &peerChecker{uid: me.uid + 1}
	v4 := loopbackPair(t, func(port int) (func(), error) {
		c, err := net.Dial("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return nil, err
		}
		return func() { c.Close() }, nil
	})
	v6 := loopbackPair(t, func(port int) (func(), error) {
		fd, err := syscall.Socket(syscall.AF_INET6, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		sa := &syscall.SockaddrInet6{Port: port, Addr: [16]byte{10: 0xff, 11: 0xff, 12: 127, 15: 1}}
		if err := syscall.Connect(fd, sa); err != nil {
			syscall.Close(fd)
			return nil, err
		}
		return func() { syscall.Close(fd) }, nil
	})
	for name, c := range map[string]net.Conn{"tcp4": v4, "v4-mapped tcp6": v6} {
		local, remote := c.LocalAddr().(*net.TCPAddr), c.RemoteAddr().(*net.TCPAddr)
		for how, owner := range map[string]func(client, server *net.TCPAddr) (int, error){"sock_diag": diagOwner, "/proc": procOwner} {
			if uid, err := owner(remote, local); err != nil || uid != me.uid {
				t.Errorf("%s, %s: uid %d, %v; want %d", name, how, uid, err, me.uid)
			}
			// The server's own end is not the client's.
			if _, err := owner(&net.TCPAddr{IP: remote.IP, Port: remote.Port ^ 1}, local); !errors.Is(err, errNoSocket) {
				t.Errorf("%s, %s: no such socket: %v", name, how, err)
			}
		}
		if err := me.check(local, remote); err != nil {
			t.Errorf("%s: own uid: %v", name, err)
		}
		if err := other.check(local, remote); !errors.Is(err, ErrForeignUser) {
			t.Errorf("%s: other uid: %v, want ErrForeignUser", name, err)
		}
		gone := &net.TCPAddr{IP: remote.IP, Port: remote.Port ^ 1}
		if err := me.check(local, gone); !errors.Is(err, ErrPeerUnknown) {
			t.Errorf("%s: no such socket: %v, want ErrPeerUnknown", name, err)
		}
	}
}

// TestParseSocketOwner: the line format of /proc/net/tcp, a TIME_WAIT
// entry of the same address (owned by nobody) skipped, the server's own
// end (addresses swapped) not mistaken for the client's.
func TestParseSocketOwner(t *testing.T) {
	const table = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:45B1 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:45B1 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 4243 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:D431 0100007F:45B1 06 00000000:00000000 03:00000F47 00000000     0        0 0 3 0000000000000000
   3: 0100007F:D431 0100007F:45B1 01 00000000:00000000 00:00000000 00000000  1000        0 4244 1 0000000000000000 20 4 30 10 -1
`
	client := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 0xD431}
	if string(procAddr4(client)) != "0100007F:D431" && string(procAddr4(client)) != "7F000001:D431" {
		t.Fatalf("procAddr4 %s", procAddr4(client))
	}
	if got := string(procAddr6(client)); !strings.HasSuffix(got, ":D431") || len(got) != 37 || !strings.Contains(got, "FFFF") {
		t.Fatalf("procAddr6 %s", got)
	}
	uid, err := parseSocketOwner([]byte(table), []byte("0100007F:D431"), []byte("0100007F:45B1"))
	if err != nil || uid != 1000 {
		t.Fatalf("client socket: uid %d, %v; want 1000", uid, err)
	}
	if _, err := parseSocketOwner([]byte(table), []byte("0100007F:D432"), []byte("0100007F:45B1")); !errors.Is(err, errNoSocket) {
		t.Fatalf("absent socket: %v", err)
	}
	if _, err := parseSocketOwner([]byte(strings.Replace(table, "  1000 ", "  x100 ", 1)), []byte("0100007F:D431"), []byte("0100007F:45B1")); err == nil {
		t.Fatal("bad uid accepted")
	}
}

// BenchmarkPeerLookup: the same-user check of one connection, paid once
// per connection, not per request: check (sock_diag) and the /proc
// fallback.
func BenchmarkPeerLookup(b *testing.B) {
	me, err := newPeerChecker()
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	local, remote := s.LocalAddr().(*net.TCPAddr), s.RemoteAddr().(*net.TCPAddr)
	b.Run("check", func(b *testing.B) {
		for b.Loop() {
			if err := me.check(local, remote); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("proc", func(b *testing.B) {
		for b.Loop() {
			if _, err := procOwner(remote, local); err != nil {
				b.Fatal(err)
			}
		}
	})
}
