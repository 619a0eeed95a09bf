package bridge

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// The peer child: TestMain runs peerChild instead of the tests when
// peerChildEnv is set. It is the client of the same-user tests, started as
// another OS user (peer_linux_test.go): it calls the bridge with the
// correct token and prints what it got as JSON.
const peerChildEnv = "ES_BRIDGE_PEER_CHILD"

type peerAnswer struct {
	Path   string `json:"path"`
	Status int    `json:"status"`
	Body   string `json:"body"`
	Err    string `json:"err"`
}

// peerChild reads {"url","token","ca"} (ca: PEM) from peerChildEnv.
func peerChild() int {
	var in struct{ URL, Token, CA string }
	if err := json.Unmarshal([]byte(os.Getenv(peerChildEnv)), &in); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(in.CA)) {
		fmt.Fprintln(os.Stderr, "bad CA")
		return 2
	}
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	var out []peerAnswer
	for _, p := range []string{"/v1/status", "/addin/taskpane.html"} {
		a := peerAnswer{Path: p}
		req, _ := http.NewRequest("GET", in.URL+p, nil)
		req.Header.Set("Authorization", "Bearer "+in.Token)
		resp, err := c.Do(req)
		if err != nil {
			a.Err = err.Error()
		} else {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			a.Status, a.Body = resp.StatusCode, string(b)
		}
		out = append(out, a)
	}
	json.NewEncoder(os.Stdout).Encode(out)
	return 0
}

// TestPeerCheckOncePerConnection: the OS user is looked up once per
// connection, not per request (a keep-alive connection's later requests
// cost nothing), and a connection of the bridge's own user is served.
func TestPeerCheckOncePerConnection(t *testing.T) {
	b := startBridge(t, sampleHome(t), nil)
	for range 20 {
		if resp, out := b.do(t, "GET", "/v1/status", nil, b.auth()); resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, out)
		}
	}
	want := Metrics{}
	if PeerCheck {
		want.PeersChecked = 1
	}
	if got := b.Metrics(); got != want {
		t.Fatalf("after 20 requests on one connection: %+v, want %+v", got, want)
	}
	// A second connection is checked on its own.
	b.client.Transport.(*http.Transport).CloseIdleConnections()
	b.do(t, "GET", "/addin/functions.js", nil, nil)
	if PeerCheck {
		want.PeersChecked = 2
	}
	if got := b.Metrics(); got != want {
		t.Fatalf("after a second connection: %+v, want %+v", got, want)
	}
}

// TestAddinPageToken: the add-in gets the token from the page it runs in,
// with no step by the user; the page is never stored by a cache.
func TestAddinPageToken(t *testing.T) {
	b := startBridge(t, sampleHome(t), nil)
	resp, out := b.do(t, "GET", "/addin/taskpane.html", nil, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("taskpane.html: %d", resp.StatusCode)
	}
	if want := `<meta name="es-bridge-token" content="` + b.Token() + `">`; !strings.Contains(string(out), want) {
		t.Fatalf("taskpane.html lacks %s", want)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" || resp.Header.Get("ETag") != "" {
		t.Errorf("taskpane.html: Cache-Control %q, ETag %q", cc, resp.Header.Get("ETag"))
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Error("taskpane.html readable cross-origin")
	}
	// The other files carry no secret and are cached as before.
	resp, out = b.do(t, "GET", "/addin/functions.js", nil, nil)
	if resp.StatusCode != 200 || resp.Header.Get("ETag") == "" || strings.Contains(string(out), b.Token()) {
		t.Errorf("functions.js: %d, ETag %q", resp.StatusCode, resp.Header.Get("ETag"))
	}
}
