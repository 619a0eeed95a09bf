package bridge

import (
	"crypto/tls"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

const oneCall = `{"calls":[{"fn":"ES.Latest","args":["MSFT"]}]}`

// TestSecurity runs every refusal against a running bridge.
func TestSecurity(t *testing.T) {
	const friend = "https://addin.example.com"
	b := startBridge(t, sampleHome(t), func(o *Options) { o.AllowOrigins = []string{friend} })
	port := strconv.Itoa(b.Addr().(*net.TCPAddr).Port)
	own := b.URL()
	tok := "Bearer " + b.Token()

	cases := []struct {
		name   string
		method string
		path   string
		hdr    map[string]string
		want   int
	}{
		{"token", "POST", "/v1/calc", map[string]string{"Authorization": tok}, 200},
		{"token, lower-case scheme", "POST", "/v1/calc", map[string]string{"Authorization": "bearer " + b.Token()}, 200},
		{"no token", "POST", "/v1/calc", nil, 401},
		{"no token, status", "GET", "/v1/status", nil, 401},
		{"wrong token", "POST", "/v1/calc", map[string]string{"Authorization": "Bearer nope"}, 401},
		{"token prefix", "POST", "/v1/calc", map[string]string{"Authorization": tok[:len(tok)-1]}, 401},
		{"basic auth", "POST", "/v1/calc", map[string]string{"Authorization": "Basic " + b.Token()}, 401},
		{"cross-site fetch without origin", "GET", "/v1/status", map[string]string{"Sec-Fetch-Site": "cross-site"}, 401},
		// Browser headers are no credential: any local program can send them.
		{"same-origin browser without token", "POST", "/v1/calc", map[string]string{"Origin": own}, 401},
		{"same-origin localhost without token", "POST", "/v1/calc", map[string]string{"Origin": "https://localhost:" + port, "Host": "localhost:" + port}, 401},
		{"same-origin navigation without token", "GET", "/v1/status", map[string]string{"Sec-Fetch-Site": "same-origin"}, 401},
		{"same-origin fetch without token", "POST", "/v1/calc", map[string]string{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}, 401},
		{"loopback origin without token, status", "GET", "/v1/status", map[string]string{"Origin": "https://[::1]:" + port}, 401},
		{"allowed origin without token", "POST", "/v1/calc", map[string]string{"Origin": friend}, 401},
		{"same-origin browser", "POST", "/v1/calc", map[string]string{"Origin": own, "Authorization": tok}, 200},
		{"same-origin localhost", "POST", "/v1/calc", map[string]string{"Origin": "https://localhost:" + port, "Host": "localhost:" + port, "Authorization": tok}, 200},
		{"same-origin navigation", "GET", "/v1/status", map[string]string{"Sec-Fetch-Site": "same-origin", "Authorization": tok}, 200},
		{"allowed origin", "POST", "/v1/calc", map[string]string{"Origin": friend, "Authorization": tok}, 200},
		{"foreign origin", "POST", "/v1/calc", map[string]string{"Origin": "https://evil.example"}, 403},
		{"foreign origin with token", "POST", "/v1/calc", map[string]string{"Origin": "https://evil.example", "Authorization": tok}, 403},
		{"http origin of the bridge", "POST", "/v1/calc", map[string]string{"Origin": "http://127.0.0.1:" + port}, 403},
		{"other port", "POST", "/v1/calc", map[string]string{"Origin": "https://127.0.0.1:1"}, 403},
		{"null origin", "POST", "/v1/calc", map[string]string{"Origin": "null"}, 403},
		{"foreign origin, status", "GET", "/v1/status", map[string]string{"Origin": "https://evil.example"}, 403},
		{"rebinding host", "POST", "/v1/calc", map[string]string{"Host": "evil.example:" + port, "Authorization": tok}, 421},
		{"rebinding host, same origin", "POST", "/v1/calc", map[string]string{"Host": "evil.example:" + port, "Origin": "https://evil.example:" + port}, 421},
		{"host without port", "GET", "/v1/status", map[string]string{"Host": "127.0.0.1", "Authorization": tok}, 421},
		{"host other port", "GET", "/v1/status", map[string]string{"Host": "127.0.0.1:1", "Authorization": tok}, 421},
		{"rebinding host, addin files", "GET", "/addin/functions.js", map[string]string{"Host": "evil.example:" + port}, 421},
		{"ipv6 host", "GET", "/v1/status", map[string]string{"Host": "[::1]:" + port, "Authorization": tok}, 200},
		{"addin files need no token", "GET", "/addin/taskpane.html", nil, 200},
		{"unknown addin file", "GET", "/addin/../bridge.json", nil, 404},
		{"GET calc", "GET", "/v1/calc", map[string]string{"Authorization": tok}, 405},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body []byte
			if c.method == "POST" {
				body = []byte(oneCall)
			}
			resp, out := b.do(t, c.method, c.path, body, c.hdr)
			if resp.StatusCode != c.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.want, out)
			}
			if c.want == 403 && resp.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("refused origin got CORS header %q", resp.Header.Get("Access-Control-Allow-Origin"))
			}
			if c.want == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if c.want == 200 && c.hdr["Origin"] == friend && resp.Header.Get("Access-Control-Allow-Origin") != friend {
				t.Errorf("allowed origin: Access-Control-Allow-Origin %q", resp.Header.Get("Access-Control-Allow-Origin"))
			}
		})
	}
}

func TestPreflight(t *testing.T) {
	const friend = "https://addin.example.com"
	b := startBridge(t, sampleHome(t), func(o *Options) { o.AllowOrigins = []string{friend} })
	pre := func(origin, method string, pna bool) *http.Response {
		h := map[string]string{"Origin": origin, "Access-Control-Request-Method": method, "Access-Control-Request-Headers": "content-type,authorization"}
		if pna {
			h["Access-Control-Request-Private-Network"] = "true"
		}
		resp, _ := b.do(t, "OPTIONS", "/v1/calc", nil, h)
		return resp
	}
	// A foreign origin: refused, and no Access-Control-* header at all.
	resp := pre("https://evil.example", "POST", true)
	if resp.StatusCode != 403 {
		t.Errorf("foreign preflight: %d", resp.StatusCode)
	}
	for k := range resp.Header {
		if strings.HasPrefix(k, "Access-Control-") {
			t.Errorf("foreign preflight got %s: %s", k, resp.Header.Get(k))
		}
	}
	// An allowed origin, with Private Network Access.
	resp = pre(friend, "POST", true)
	if resp.StatusCode != 204 {
		t.Fatalf("allowed preflight: %d", resp.StatusCode)
	}
	for k, v := range map[string]string{
		"Access-Control-Allow-Origin":          friend,
		"Access-Control-Allow-Private-Network": "true",
		"Access-Control-Allow-Methods":         "GET, POST",
		"Access-Control-Allow-Headers":         "Authorization, Content-Type",
	} {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	// Without the PNA request header, no PNA answer.
	if resp := pre(friend, "POST", false); resp.Header.Get("Access-Control-Allow-Private-Network") != "" {
		t.Error("PNA header without PNA request")
	}
	// The bridge's own origin may preflight too (Excel on the web's iframe).
	if resp := pre(b.URL(), "POST", true); resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Private-Network") != "true" {
		t.Errorf("own-origin preflight: %d %v", resp.StatusCode, resp.Header)
	}
	if resp := pre(friend, "DELETE", false); resp.StatusCode != 403 {
		t.Errorf("DELETE preflight: %d", resp.StatusCode)
	}
}

// TestLoopbackOnly checks what the bridge listens on. (Connecting through
// a non-loopback interface address is deliberately not attempted: tests
// here send traffic only to loopback.)
func TestLoopbackOnly(t *testing.T) {
	b := startBridge(t, sampleHome(t), nil)
	a, ok := b.Addr().(*net.TCPAddr)
	if !ok || !a.IP.IsLoopback() || !a.IP.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Fatalf("listening on %v", b.Addr())
	}
	if !strings.HasPrefix(b.URL(), "https://127.0.0.1:") {
		t.Fatalf("URL %s", b.URL())
	}
	// The certificate names loopback only.
	leaf := b.Certs().Leaf.Leaf
	if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "localhost" || len(leaf.IPAddresses) != 2 {
		t.Fatalf("certificate names %v %v", leaf.DNSNames, leaf.IPAddresses)
	}
	for _, ip := range leaf.IPAddresses {
		if !ip.IsLoopback() {
			t.Errorf("certificate names %v", ip)
		}
	}
	// Plain HTTP is not served.
	c, err := net.Dial("tcp", b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
	buf := make([]byte, 64)
	n, _ := c.Read(buf)
	c.Close()
	if strings.Contains(string(buf[:n]), "200 OK") {
		t.Fatal("plain HTTP answered")
	}
	// HTTP/2 is off (websockets need HTTP/1.1 upgrades).
	conn, err := tls.Dial("tcp", b.Addr().String(), &tls.Config{RootCAs: b.pool, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := conn.ConnectionState().NegotiatedProtocol; p == "h2" {
		t.Errorf("negotiated %s", p)
	}
	conn.Close()
	// Options that are not loopback cannot be expressed, but bad ports are refused.
	if _, err := Start(nil, Options{Home: t.TempDir(), Port: 70000}); err == nil {
		t.Error("port 70000 accepted")
	}
	if _, err := Start(nil, Options{Home: t.TempDir(), AllowOrigins: []string{"*"}}); err == nil {
		t.Error("allow-origin * accepted")
	}
}

// TestLiveRefusals: the websocket obeys the same rules.
func TestLiveRefusals(t *testing.T) {
	b := startBridge(t, sampleHome(t), nil)
	wsURL := "wss" + strings.TrimPrefix(b.URL(), "https") + "/v1/live"
	d := websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: b.pool}}
	for _, c := range []struct {
		name string
		hdr  http.Header
		subp []string
		ok   bool
	}{
		{"foreign origin", http.Header{"Origin": {"https://evil.example"}}, nil, false},
		{"no token", nil, nil, false},
		{"wrong token subprotocol", nil, []string{"es-live", "bearer.nope"}, false},
		{"token subprotocol", nil, []string{"es-live", "bearer." + b.Token()}, true},
		{"token header", http.Header{"Authorization": {"Bearer " + b.Token()}}, nil, true},
		{"own origin without token", http.Header{"Origin": {b.URL()}}, []string{"es-live"}, false},
		{"same-origin without token", http.Header{"Sec-Fetch-Site": {"same-origin"}}, []string{"es-live"}, false},
		{"own origin, token subprotocol", http.Header{"Origin": {b.URL()}}, []string{"es-live", "bearer." + b.Token()}, true},
		{"foreign origin, token subprotocol", http.Header{"Origin": {"https://evil.example"}}, []string{"es-live", "bearer." + b.Token()}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := d
			d.Subprotocols = c.subp
			conn, resp, err := d.Dial(wsURL, c.hdr)
			if c.ok != (err == nil) {
				code := 0
				if resp != nil {
					code = resp.StatusCode
				}
				t.Fatalf("err %v (status %d), want ok=%v", err, code, c.ok)
			}
			if conn != nil {
				if len(c.subp) > 0 && conn.Subprotocol() != "es-live" {
					t.Errorf("subprotocol %q", conn.Subprotocol())
				}
				conn.Close()
			}
		})
	}
}
