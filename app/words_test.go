package app

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/energyscope/energyscope/internal/wiring"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/sync/client"
)

// syncErr runs a real engine against server until it reports an error
// and returns it (Progress.Err).
func syncErr(t *testing.T, server string, d *websocket.Dialer) error {
	t.Helper()
	st, err := localcache.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng := client.New(wiring.Sink{Store: st}, client.Options{Server: server, Token: "es_x", Dialer: d, MinBackoff: time.Hour, MaxBackoff: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); eng.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if p := eng.Progress(); p.Err != nil {
			return p.Err
		}
	}
	t.Fatal("the engine reported no error")
	return nil
}

// TestSyncWords: the engine's errors become the same words as when they
// were matched by text, now by errors.Is/As on real failures.
func TestSyncWords(t *testing.T) {
	refusedURL := "http://" + refusedAddr(t)

	unauthorized := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "unknown token", http.StatusUnauthorized)
	}))
	defer unauthorized.Close()
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("<html>not a sync server</html>"))
	}))
	defer web.Close()
	// Accepts connections and never answers the upgrade.
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	go func() {
		for {
			c, err := mute.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()

	for _, c := range []struct {
		name, server string
		dialer       *websocket.Dialer
		want         string
	}{
		{"refused", refusedURL, nil, "Cannot reach the server (connection refused); working offline with the local data."},
		{"401", unauthorized.URL, nil, "The server refused the token; check it in Settings."},
		{"time-out", "http://" + mute.Addr().String(), &websocket.Dialer{HandshakeTimeout: 200 * time.Millisecond}, "The server does not answer (time-out); working offline with the local data."},
		{"web page", web.URL, nil, "The server at that URL does not speak EnergyScope sync; check the server URL in Settings."},
		{"bad url", "http://[::1", nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := syncErr(t, c.server, c.dialer)
			got := syncWords(err)
			if c.want == "" {
				c.want = sentence("sync: " + err.Error())
			}
			if got != c.want {
				t.Errorf("%v: words %q, want %q", err, got, c.want)
			}
		})
	}
	if syncWords(nil) != "" {
		t.Error("no error has words")
	}
}

// TestHomeLockedWords: a second writer on a home gets the sentence that
// says who holds it.
func TestHomeLockedWords(t *testing.T) {
	home := t.TempDir()
	st, err := localcache.Open(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = localcache.Open(home, nil)
	if err == nil {
		t.Fatal("a second writer opened the home")
	}
	if got, want := words(err), "Another EnergyScope program (an `es companion`, or a second window) is using the data folder. Close it, or choose another data folder in Settings."; got != want {
		t.Errorf("words(%v) = %q", err, got)
	}
}
