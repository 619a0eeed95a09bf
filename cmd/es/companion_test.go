package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/energyscope/energyscope/functions/bridge"
)

// syncBuffer is a bytes.Buffer safe to read while a command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCompanion starts `es companion` on the sample stocks, asks the bridge
// for a value, and stops it with SIGINT.
func TestCompanion(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("sends SIGINT to itself")
	}
	home := t.TempDir()
	mustES(t, "cook", "--home", home, "--dataset", "stocks", "--in", "../../server/cook/samples/stocks.csv",
		"--series-col", "symbol", "--period-col", "date", "--value-col", "price")

	if code, _, _ := es(t, "companion", "--home", home, "--token", "x"); code != 2 {
		t.Fatalf("--token without --server: exit %d", code)
	}
	if code, _, _ := es(t, "companion", "--home", home, "--port", "-1"); code != 2 {
		t.Fatalf("--port -1: exit %d", code)
	}

	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(&env{stdout: &out, stderr: &errb}, []string{"companion", "--home", home, "--port", "0"})
	}()
	var cfg bridge.Config
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "press Ctrl+C") {
		select {
		case code := <-done:
			t.Fatalf("companion exited %d: %s %s", code, out.String(), errb.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("companion did not start: %s %s", out.String(), errb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cfg, err := bridge.ReadConfig(home)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), cfg.URL+"/addin/manifest.xml") {
		t.Errorf("output does not name the manifest: %s", out.String())
	}
	ca, err := os.ReadFile(cfg.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	req, _ := http.NewRequest("POST", cfg.URL+"/v1/calc", strings.NewReader(`{"calls":[{"fn":"ES.Get","args":["MSFT","2000-01","2000-01"]}]}`))
	req.Header.Set("Authorization", "Bearer "+cfg.Token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != `{"results":[{"value":[[36526,39.81]]}]}`+"\n" {
		t.Fatalf("calc: %d %s", resp.StatusCode, body)
	}
	client.CloseIdleConnections()

	// The home is locked while the companion runs: a second one refuses.
	if code, _, errs := es(t, "companion", "--home", home, "--port", "0"); code != 1 || !strings.Contains(errs, "in use") {
		t.Fatalf("second companion: exit %d %q", code, errs)
	}

	p, _ := os.FindProcess(os.Getpid())
	if err := p.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 || !strings.HasSuffix(out.String(), "stopped\n") {
			t.Fatalf("exit %d: %s %s", code, out.String(), errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("companion did not stop on SIGINT")
	}
	// Stopped cleanly: the home can be opened for writing again.
	mustES(t, "compact", "--home", home)
}

func TestTrust(t *testing.T) {
	home := t.TempDir()
	out := mustES(t, "trust", "--home", home, "--print")
	ca := filepath.Join(home, bridge.CertsDir, bridge.CAFile)
	for _, want := range []string{ca, "certutil -user -addstore Root", "security add-trusted-cert", "update-ca-certificates", "SHA-256:"} {
		if !strings.Contains(out, want) {
			t.Errorf("trust --print lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Copied") {
		t.Error("--print changed something")
	}
	// Without --print, into a scratch CA directory and with no
	// update-ca-certificates on PATH: never a failure.
	caDir := t.TempDir()
	t.Setenv("PATH", t.TempDir())
	out = mustES(t, "trust", "--home", home, "--ca-dir", caDir)
	if runtime.GOOS == "linux" && os.Geteuid() == 0 {
		if _, err := os.Stat(filepath.Join(caDir, trustedName)); err != nil || !strings.Contains(out, "update-ca-certificates not found") {
			t.Errorf("as root: %v\n%s", err, out)
		}
	} else if runtime.GOOS == "linux" && !strings.Contains(out, "Not root") {
		t.Errorf("not root:\n%s", out)
	}
}
