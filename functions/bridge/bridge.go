package bridge

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/energyscope/energyscope/functions"
)

// DefaultPort is the bridge's port unless configured: the add-in's
// manifest names it, so it should stay the same across restarts.
const DefaultPort = 17825

// Files in the home directory.
const (
	// ConfigFile tells local clients where the bridge is and how to
	// authenticate: {"url", "token", "ca"}, mode 0600.
	ConfigFile = "bridge.json"
	// CertsDir holds the CA and the server certificate.
	CertsDir = "bridge"
)

// Limits.
const (
	DefaultMaxBody       = 8 << 20
	DefaultMaxCalls      = 100_000
	DefaultMaxBatchCells = 5_000_000
	DefaultTimeout       = 30 * time.Second
	DefaultPollInterval  = 10 * time.Millisecond
)

// Options configure Start. Use DefaultOptions and change what you need.
type Options struct {
	// Home is the directory that holds bridge/ (certificates) and
	// bridge.json. Required.
	Home string
	// Port to listen on, on 127.0.0.1. 0 picks a free port.
	Port int
	// AllowOrigins are browser origins besides the bridge's own that may
	// call the API (e.g. "https://addin.example.com"), exactly as browsers
	// send them: scheme://host[:port], no path.
	AllowOrigins []string
	// Token for clients without an Origin; empty: the one in bridge.json,
	// or a new random one.
	Token string
	// Status reports datasets for /v1/status and gates the polling
	// fallback; nil reports none.
	Status StatusSource
	// Changes reports changed series for ES.Live; nil polls the subscribed
	// series every PollInterval (only when Status says something changed,
	// if Status is set).
	Changes      ChangeFeed
	PollInterval time.Duration
	// MaxBody (bytes), MaxCalls (per request), MaxBatchCells (cells in one
	// response) and Timeout (per request) bound a request.
	MaxBody       int64
	MaxCalls      int
	MaxBatchCells int
	Timeout       time.Duration
	// Now is the engine's clock ("today"); nil is time.Now. Certificates
	// always use the real clock.
	Now func() time.Time
	// Logger receives errors and the start-up line; nil discards.
	Logger *slog.Logger
	// NoConfigFile skips writing bridge.json (tests that run several
	// bridges on one home).
	NoConfigFile bool
}

// DefaultOptions returns the defaults for home.
func DefaultOptions(home string) Options {
	return Options{
		Home:          home,
		Port:          DefaultPort,
		PollInterval:  DefaultPollInterval,
		MaxBody:       DefaultMaxBody,
		MaxCalls:      DefaultMaxCalls,
		MaxBatchCells: DefaultMaxBatchCells,
		Timeout:       DefaultTimeout,
	}
}

func (o Options) withDefaults() Options {
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.MaxCalls <= 0 {
		o.MaxCalls = DefaultMaxCalls
	}
	if o.MaxBatchCells <= 0 {
		o.MaxBatchCells = DefaultMaxBatchCells
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

func (o Options) validate() error {
	if o.Home == "" {
		return errors.New("bridge: Options.Home is required")
	}
	if o.Port < 0 || o.Port > 65535 {
		return fmt.Errorf("bridge: port %d out of range", o.Port)
	}
	for _, a := range o.AllowOrigins {
		if a == "" || a == "null" || a == "*" || strings.Count(a, "/") != 2 || !strings.Contains(a, "://") {
			return fmt.Errorf("bridge: allowed origin %q: want scheme://host[:port]", a)
		}
	}
	return nil
}

// Config is bridge.json: how a local client reaches the bridge.
type Config struct {
	URL   string `json:"url"`
	Token string `json:"token"`
	CA    string `json:"ca"` // path of the CA certificate (PEM)
}

// ReadConfig reads <home>/bridge.json.
func ReadConfig(home string) (Config, error) {
	var c Config
	b, err := os.ReadFile(filepath.Join(home, ConfigFile))
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%s: %w", ConfigFile, err)
	}
	return c, nil
}

// Server is a running bridge.
type Server struct {
	opts    Options
	eng     *functions.Engine
	certs   atomic.Pointer[Certs]
	token   string
	ln      net.Listener
	srv     *http.Server
	origin  string          // https://127.0.0.1:PORT
	hosts   map[string]bool // Host header values accepted
	origins map[string]bool // Origin header values accepted (own + AllowOrigins)
	own     map[string]bool // the bridge's own origins
	addin   *addinFiles
	live    *hub
	peers   *peerChecker // the same-user check (peer.go)

	peersChecked atomic.Int64
	peersRefused atomic.Int64
	refusals     refusalLog

	stop     chan struct{}
	wg       sync.WaitGroup
	shutOnce sync.Once
	served   chan error
}

// Start creates the certificates if needed, listens on 127.0.0.1:Port,
// writes bridge.json and serves until Shutdown.
func Start(src functions.Source, o Options) (*Server, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	certs, err := EnsureCerts(filepath.Join(o.Home, CertsDir), time.Now())
	if err != nil {
		return nil, err
	}
	token := o.Token
	if token == "" {
		if c, err := ReadConfig(o.Home); err == nil && len(c.Token) >= 32 {
			token = c.Token
		} else if token, err = newToken(); err != nil {
			return nil, err
		}
	}
	peers, err := newPeerChecker()
	if err != nil {
		return nil, err
	}
	ln, err := listenLoopback(o.Port)
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	s := &Server{
		opts:     o,
		eng:      &functions.Engine{Src: src, Now: o.Now, MaxCells: min(functions.DefaultMaxCells, o.MaxBatchCells)},
		token:    token,
		peers:    peers,
		ln:       ln,
		refusals: refusalLog{every: refusalSummaryEvery},
		origin:   "https://127.0.0.1:" + strconv.Itoa(port),
		stop:     make(chan struct{}),
		served:   make(chan error, 1),
	}
	s.certs.Store(certs)
	p := strconv.Itoa(port)
	s.hosts = map[string]bool{"127.0.0.1:" + p: true, "localhost:" + p: true, "[::1]:" + p: true}
	s.own = map[string]bool{"https://127.0.0.1:" + p: true, "https://localhost:" + p: true, "https://[::1]:" + p: true}
	s.origins = map[string]bool{}
	for k := range s.own {
		s.origins[k] = true
	}
	for _, a := range o.AllowOrigins {
		s.origins[strings.ToLower(strings.TrimRight(a, "/"))] = true
	}
	if s.addin, err = newAddinFiles(s.origin, token); err != nil {
		ln.Close()
		return nil, err
	}
	s.live = newHub(s.eng, o, s.stop)
	if !o.NoConfigFile {
		cfg, _ := json.MarshalIndent(Config{URL: s.origin, Token: token, CA: certs.CAPath()}, "", "  ")
		if err := writeFileAtomic(filepath.Join(o.Home, ConfigFile), append(cfg, '\n'), 0o600); err != nil {
			ln.Close()
			return nil, fmt.Errorf("write %s: %w", ConfigFile, err)
		}
	}
	s.srv = &http.Server{
		Handler:           s.routes(),
		ConnContext:       s.connContext,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug),
		// HTTP/1.1 only: websockets (gorilla) need the HTTP/1.1 upgrade, and
		// a non-nil empty map turns off net/http's automatic HTTP/2.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		TLSConfig: &tls.Config{
			MinVersion: tls.VersionTLS12,
			NextProtos: []string{"http/1.1"},
			// Small first records help a response's first bytes through TCP
			// slow start on a real network. On loopback they only cost a
			// write per ~1.4 KB over a connection's first 128 KB: the first
			// twenty one-year ES.Get answers would each take five syscalls.
			DynamicRecordSizingDisabled: true,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				return &s.certs.Load().Leaf, nil
			},
		},
	}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		err := s.srv.ServeTLS(ln, "", "")
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.served <- err
	}()
	go func() {
		defer s.wg.Done()
		s.renewLoop()
	}()
	s.live.start(&s.wg)
	o.Logger.Info("bridge listening", "url", s.origin, "ca", certs.CAPath())
	return s, nil
}

// listenLoopback listens on 127.0.0.1 only, and checks it did.
func listenLoopback(port int) (net.Listener, error) {
	ln, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("bridge: listen on 127.0.0.1:%d: %w", port, err)
	}
	if a, ok := ln.Addr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("bridge: refusing to serve on non-loopback address %v", ln.Addr())
	}
	return ln, nil
}

func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// renewLoop replaces the server certificate before it expires, for a
// companion that runs for months.
func (s *Server) renewLoop() {
	t := time.NewTicker(12 * time.Hour)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			c, err := EnsureCerts(filepath.Join(s.opts.Home, CertsDir), time.Now())
			if err != nil {
				s.opts.Logger.Error("renew bridge certificate", "err", err)
				continue
			}
			if len(c.Created) > 0 {
				s.opts.Logger.Info("renewed bridge certificate", "created", c.Created)
			}
			s.certs.Store(c)
		}
	}
}

// URL is the bridge's origin, https://127.0.0.1:PORT.
func (s *Server) URL() string { return s.origin }

// Addr is the listener's address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Token is the bearer token for clients without an Origin.
func (s *Server) Token() string { return s.token }

// Certs are the certificates in use.
func (s *Server) Certs() *Certs { return s.certs.Load() }

// Engine is the engine the bridge evaluates calls with.
func (s *Server) Engine() *functions.Engine { return s.eng }

// Shutdown stops accepting requests, closes websockets, and waits for
// requests in flight until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	s.shutOnce.Do(func() {
		close(s.stop)
		s.live.closeAll()
		err = s.srv.Shutdown(ctx)
		done := make(chan struct{})
		go func() { s.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
		}
	})
	return err
}

// Done returns the error the HTTP server stopped with (nil after Shutdown).
func (s *Server) Done() <-chan error { return s.served }

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/calc", s.api(s.handleCalc))
	mux.HandleFunc("GET /v1/status", s.api(s.handleStatus))
	mux.HandleFunc("GET /v1/live", s.api(s.live.handle))
	mux.HandleFunc("OPTIONS /v1/", s.preflight)
	mux.HandleFunc("GET /addin/", s.addin.serve)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/addin/taskpane.html", http.StatusFound)
	})
	return s.checkPeer(s.checkHost(mux))
}

// checkHost refuses requests addressed to any other name than the
// bridge's loopback names (DNS rebinding) before anything else runs.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hosts[strings.ToLower(r.Host)] {
			writeError(w, http.StatusMisdirectedRequest, "#N/A", "this server answers only to "+s.origin+" (Host "+clipHeader(r.Host)+" refused)")
			return
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

func clipHeader(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.Quote(s)
}

// allowedOrigin: the bridge's own origins and AllowOrigins.
func (s *Server) allowedOrigin(origin string) bool {
	return s.origins[strings.ToLower(origin)]
}

// authorize applies the Origin and token rules (see the package doc) and
// answers the request itself when it fails. Every call needs the token,
// whatever its headers: Origin and Sec-Fetch-* are what a browser says,
// and any local program can say the same.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) bool {
	if origin := r.Header.Get("Origin"); origin != "" {
		if !s.allowedOrigin(origin) {
			writeError(w, http.StatusForbidden, "#N/A", "origin "+clipHeader(origin)+" may not use the EnergyScope bridge; add it with --allow-origin")
			return false
		}
		if !s.own[strings.ToLower(origin)] {
			s.corsHeaders(w, origin)
		}
	}
	auth := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(auth) > len(prefix) && strings.EqualFold(auth[:len(prefix)], prefix) && s.tokenOK(auth[len(prefix):]) {
		return true
	}
	// A WebSocket client cannot set headers; it may offer the token as a
	// subprotocol "bearer.TOKEN" beside "es-live".
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(h, ",") {
			if t, ok := strings.CutPrefix(strings.TrimSpace(p), "bearer."); ok && s.tokenOK(t) {
				return true
			}
		}
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="EnergyScope bridge"`)
	if auth == "" {
		writeError(w, http.StatusUnauthorized, "#N/A", "missing token: send Authorization: Bearer <token from "+ConfigFile+">")
	} else {
		writeError(w, http.StatusUnauthorized, "#N/A", "wrong token: use the token in "+ConfigFile)
	}
	return false
}

func (s *Server) tokenOK(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(s.token)) == 1
}

func (s *Server) corsHeaders(w http.ResponseWriter, origin string) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
}

// api wraps an API handler with the authorization rules.
func (s *Server) api(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.authorize(w, r) {
			return
		}
		h(w, r)
	}
}

// preflight answers CORS and Private Network Access preflights, for
// allowed origins only: a refused one gets no Access-Control-* header.
func (s *Server) preflight(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	method := r.Header.Get("Access-Control-Request-Method")
	if origin == "" || method == "" {
		w.Header().Set("Allow", "GET, POST, OPTIONS")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if !s.allowedOrigin(origin) || (method != http.MethodGet && method != http.MethodPost) {
		w.WriteHeader(http.StatusForbidden)
		return
	}
	h := w.Header()
	s.corsHeaders(w, origin)
	h.Set("Access-Control-Allow-Methods", "GET, POST")
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
	h.Set("Access-Control-Max-Age", "600")
	if strings.EqualFold(r.Header.Get("Access-Control-Request-Private-Network"), "true") {
		h.Set("Access-Control-Allow-Private-Network", "true")
	}
	w.WriteHeader(http.StatusNoContent)
}

// writeError answers {"error":{"code","message"}} with status.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	b := append([]byte(`{"error":{"code":`), appendString(nil, code)...)
	b = append(b, `,"message":`...)
	b = appendString(b, msg)
	b = append(b, "}}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}
