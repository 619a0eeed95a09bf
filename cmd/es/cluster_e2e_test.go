package main

// Several es serve replicas as one service (issue 13; README "Running
// several servers"): real es serve processes on loopback.

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/server/deltalog"
)

// esChild runs this test binary as the es command (a real process) and
// returns its stdout; a non-zero exit fails the test.
func esChild(t *testing.T, args ...string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), e2eChildEnv+"=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("es %s: %v\nstderr: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// startNATS runs a single NATS JetStream node on loopback in this process
// (the es processes reach it over TCP) and returns its URL.
func startNATS(t *testing.T) string {
	t.Helper()
	n, err := deltalog.StartNode(deltalog.NodeOptions{Dir: t.TempDir(), Name: "es-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Shutdown)
	return n.ClientURL()
}

// TestSharedTokensE2E: two es serve processes take their tokens from the
// shared store (--tokens nats://...). A token added with es token add
// against the store is accepted by both within 5 s, a token removed is
// refused by both within 5 s, without a restart.
func TestSharedTokensE2E(t *testing.T) {
	skipE2E(t)
	nats := startNATS(t)
	admin := strings.TrimSpace(esChild(t, "token", "add", "--tokens", nats, "--name", "admin", "--scope", "write"))
	var srvs []*e2eServer
	for _, name := range []string{"a", "b"} {
		s := &e2eServer{t: t, home: filepath.Join(t.TempDir(), name), httpc: &http.Client{Timeout: 30 * time.Second}, startTimeout: 60 * time.Second,
			extraArgs: []string{"--tokens", nats}, write: admin, read: admin}
		s.start("127.0.0.1:0")
		srvs = append(srvs, s)
	}
	status := func(s *e2eServer, token string) int {
		code, _, err := s.do("GET", "/v1/datasets", token, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		return code
	}
	for _, s := range srvs {
		if code := status(s, admin); code != 200 {
			t.Fatalf("%s with the first token: %d", s.url, code)
		}
	}
	waitAll := func(what string, token string, want int) time.Duration {
		t.Helper()
		start := time.Now()
		for _, s := range srvs {
			for status(s, token) != want {
				if time.Since(start) > 5*time.Second {
					t.Fatalf("%s: %s still answers %d, want %d after 5 s", what, s.url, status(s, token), want)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		return time.Since(start)
	}

	late := strings.TrimSpace(esChild(t, "token", "add", "--tokens", nats, "--name", "late", "--scope", "read"))
	if code := status(srvs[0], "es_not-a-token"); code != http.StatusUnauthorized {
		t.Fatalf("an unknown token: %d, want 401", code)
	}
	t.Logf("added token accepted by both after %v", waitAll("token added", late, 200))
	ls := esChild(t, "token", "ls", "--tokens", nats)
	if !strings.Contains(ls, "admin") || !strings.Contains(ls, "late") {
		t.Fatalf("es token ls of the shared store:\n%s", ls)
	}
	esChild(t, "token", "rm", "--tokens", nats, "--name", "late")
	t.Logf("removed token refused by both after %v", waitAll("token removed", late, http.StatusUnauthorized))
	if code := status(srvs[1], admin); code != 200 {
		t.Fatalf("the remaining token after the removal: %d", code)
	}
}
