// Package testpg starts a real PostgreSQL server for tests: Debian's
// postgresql package (scripts/install-deps.sh installs it), a fresh
// cluster on loopback run as the postgres user, removed after the test.
// It needs root (runuser): under CI=true it always runs, elsewhere the
// test skips without root or the package.
package testpg

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Server is one started cluster with a database "es".
type Server struct {
	t         *testing.T
	bin, data string
	opts, log string
	// URI connects to the database "es" (pgx/libpq form).
	URI string
}

// Start initialises and starts a cluster, creates the database "es" and
// stops and removes it when the test ends.
func Start(t *testing.T) *Server {
	t.Helper()
	bin := "/usr/lib/postgresql/15/bin"
	if os.Getenv("CI") != "true" {
		if _, err := os.Stat(bin + "/initdb"); err != nil || os.Geteuid() != 0 {
			t.Skip("needs root and Debian's postgresql package (scripts/install-deps.sh); CI=true runs it")
		}
	}
	dir, err := os.MkdirTemp("", "es-pg-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	p := &Server{t: t, bin: bin, data: filepath.Join(dir, "data"), log: filepath.Join(dir, "log"),
		opts: fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", port, dir),
		URI:  fmt.Sprintf("postgres://postgres@127.0.0.1:%d/es?sslmode=disable", port)}
	p.run(bin+"/initdb", "-D", p.data, "-A", "trust", "-U", "postgres")
	p.Start()
	t.Cleanup(func() {
		exec.Command("runuser", "-u", "postgres", "--", bin+"/pg_ctl", "-D", p.data, "-m", "immediate", "stop").Run()
		os.RemoveAll(dir)
	})
	p.run(bin+"/createdb", "-h", "127.0.0.1", "-p", fmt.Sprint(port), "-U", "postgres", "es")
	return p
}

func (p *Server) run(args ...string) {
	p.t.Helper()
	cmd := exec.Command("runuser", append([]string{"-u", "postgres", "--"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		p.t.Fatalf("%v: %v\n%s", args, err, out)
	}
}

// Start starts the stopped cluster again (-l: the server must not
// inherit our output pipes, or CombinedOutput would wait for it).
func (p *Server) Start() {
	p.run(p.bin+"/pg_ctl", "-D", p.data, "-l", p.log, "-o", p.opts, "-w", "start")
}

// Stop stops it at once (a crash, as far as clients can tell).
func (p *Server) Stop() { p.run(p.bin+"/pg_ctl", "-D", p.data, "-m", "immediate", "-w", "stop") }
