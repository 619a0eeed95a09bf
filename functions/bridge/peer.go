package bridge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// The same-user check. Loopback is shared by every account of a computer:
// on a terminal server many analysts run Excel side by side, and any of
// their processes can connect to 127.0.0.1:17825. The token keeps out
// whoever cannot read bridge.json; on Linux and Windows the bridge also
// asks the OS which user owns the client's end of each connection and
// refuses every request on a connection of another user (403, then the
// connection is closed), before the Host, Origin or token rules run and
// before any file (the add-in's pages carry the token) is served.
//
// The owner is looked up once per connection, when its first request
// arrives, by the connection's own goroutine: keep-alive requests after it
// cost a context lookup, and a slow lookup never holds up Accept.
// peer_linux.go asks sock_diag (else reads /proc/net/tcp{,6}) for the
// uid of the client's socket; peer_windows.go asks
// GetExtendedTcpTable for the owning process and compares its token's user
// SID; elsewhere (macOS, BSD) there is no check: the token alone guards
// the API (docs/excel.md says so).

// Errors of the same-user check.
var (
	// ErrForeignUser: the client's end of the connection belongs to
	// another OS user than the bridge's.
	ErrForeignUser = errors.New("bridge: the connecting process belongs to another OS user")
	// ErrPeerUnknown: the OS could not tell who owns the client's end of
	// the connection (it closed already, or the lookup failed). The bridge
	// refuses such connections too: it fails closed.
	ErrPeerUnknown = errors.New("bridge: cannot tell which OS user owns the connecting process")
)

// PeerError is a refusal of the same-user check whose client's OS user
// is known: Owner names it ("uid 1001" on Linux, a SID on Windows). Err
// wraps ErrForeignUser.
type PeerError struct {
	Owner string
	Err   error
}

func (e *PeerError) Error() string { return e.Err.Error() }
func (e *PeerError) Unwrap() error { return e.Err }

// PeerCheck reports whether this build checks the OS user of each
// connection (Linux and Windows); elsewhere only the token guards the API.
const PeerCheck = peerCheckSupported

// Metrics are the bridge's counters.
type Metrics struct {
	// PeersChecked counts connections whose OS user was looked up (one
	// lookup per connection, however many requests it carries); 0 where
	// PeerCheck is false.
	PeersChecked int64
	// PeersRefused counts connections refused by the same-user check
	// (ErrForeignUser or ErrPeerUnknown).
	PeersRefused int64
	// RefusalLogs counts the log records written about refused
	// connections: one for the first refusal of each client OS user (up to
	// maxRefusalOwners users; the rest as "unknown"), then at most one
	// summary per refusalSummaryEvery for all the refusals not logged
	// since. A local user looping connections cannot fill the log.
	RefusalLogs int64
}

// Metrics returns the bridge's counters.
func (s *Server) Metrics() Metrics {
	s.refusals.mu.Lock()
	defer s.refusals.mu.Unlock()
	return Metrics{PeersChecked: s.peersChecked.Load(), PeersRefused: s.peersRefused.Load(), RefusalLogs: s.refusals.logs}
}

// Limits of the refusal log (refusalLog).
const (
	refusalSummaryEvery = time.Minute
	maxRefusalOwners    = 64
)

// refusalLog rate-limits the warnings about refused connections.
type refusalLog struct {
	mu      sync.Mutex      // guards the fields below
	every   time.Duration   // at most one summary per every
	owners  map[string]bool // client users whose first refusal was logged
	pending int64           // refusals not logged since the last summary
	last    time.Time       // of the last summary (or the start)
	logs    int64           // records written (Metrics.RefusalLogs)
}

// logRefusal logs a refused connection: the first of each client user at
// once, later ones summed up at most once per l.every (when a refusal
// comes after that time; Metrics.PeersRefused counts them all).
func (s *Server) logRefusal(remote string, err error) {
	owner := "unknown"
	if pe, ok := errors.AsType[*PeerError](err); ok && pe.Owner != "" {
		owner = pe.Owner
	}
	l := &s.refusals
	now := time.Now()
	l.mu.Lock()
	if l.owners == nil {
		l.owners, l.last = map[string]bool{}, now
	}
	if !l.owners[owner] && (len(l.owners) < maxRefusalOwners || owner == "unknown") {
		l.owners[owner] = true
		l.logs++
		l.mu.Unlock()
		s.opts.Logger.Warn("bridge refused a connection of another user (later refusals are summed up)", "remote", remote, "user", owner, "err", err)
		return
	}
	l.pending++
	if now.Sub(l.last) < l.every {
		l.mu.Unlock()
		return
	}
	n, since := l.pending, l.last
	l.pending, l.last = 0, now
	l.logs++
	l.mu.Unlock()
	s.opts.Logger.Warn("bridge refused more connections", "refused", n, "since", since, "users", len(l.owners), "last_remote", remote, "last_err", err)
}

// peerKey is the context key of a connection's *peerState.
type peerKey struct{}

// peerState is one connection's verdict, computed by its first request.
type peerState struct {
	conn net.Conn
	once sync.Once
	err  error // set once by once
}

// connContext gives every accepted connection its peerState.
func (s *Server) connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, peerKey{}, &peerState{conn: c})
}

// peerErr is the connection's verdict: nil if its client runs as the
// bridge's user (or the check does not exist on this OS).
func (s *Server) peerErr(r *http.Request) error {
	p, _ := r.Context().Value(peerKey{}).(*peerState)
	if p == nil {
		return fmt.Errorf("%w: request without a connection", ErrPeerUnknown)
	}
	p.once.Do(func() {
		if !peerCheckSupported {
			return
		}
		s.peersChecked.Add(1)
		local, ok1 := p.conn.LocalAddr().(*net.TCPAddr)
		remote, ok2 := p.conn.RemoteAddr().(*net.TCPAddr)
		if !ok1 || !ok2 {
			p.err = fmt.Errorf("%w: not a TCP connection (%v)", ErrPeerUnknown, p.conn.RemoteAddr())
		} else {
			p.err = s.peers.check(local, remote)
		}
		if p.err != nil {
			s.peersRefused.Add(1)
			s.logRefusal(p.conn.RemoteAddr().String(), p.err)
		}
	})
	return p.err
}

// checkPeer refuses every request of a connection that fails the
// same-user check, and closes that connection after the answer.
func (s *Server) checkPeer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.peerErr(r); err != nil {
			w.Header().Set("Connection", "close")
			msg := "this EnergyScope bridge belongs to another user of this computer: start your own companion (es companion --port N) and sideload its manifest"
			if errors.Is(err, ErrPeerUnknown) {
				msg = "the EnergyScope bridge could not tell which user runs the connecting program, and refuses it"
			}
			writeError(w, http.StatusForbidden, "#N/A", msg)
			return
		}
		next.ServeHTTP(w, r)
	})
}
