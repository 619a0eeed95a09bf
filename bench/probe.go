//go:build !probe

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// The fresh processes that measure open, RSS, lookups and the resident path
// run a "probe": this same program built with -tags probe, which leaves out
// DuckDB, the cook and the generator (files tagged !probe). Linking DuckDB's
// static library adds about 40 MB of file-backed RSS to every process
// before main (its static initializers touch that much of the binary), and
// the cook's Parquet and compute packages another 20 MB; a process that
// only serves carries neither. The cook and DuckDB children run the bench
// binary itself.

// buildProbe builds the probe into dir and returns its path. It runs `go
// build` in the bench module's directory (the working directory of `go run
// .`); GOFLAGS (e.g. -modfile) carry over.
func buildProbe(dir string) (string, error) {
	src, err := os.Getwd()
	if err != nil {
		return "", err
	}
	mod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil || !bytes.Contains(mod, []byte("module github.com/energyscope/energyscope/bench")) {
		return "", fmt.Errorf("run the bench from its module directory (cd bench && go run .): %s is not it", src)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "bench-probe")
	cmd := exec.Command(goBin, "build", "-tags", "probe", "-o", out, ".")
	cmd.Dir = src
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build probe: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
