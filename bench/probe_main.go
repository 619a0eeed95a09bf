//go:build probe

package main

import (
	"flag"
	"fmt"
	"os"
)

// main of the probe build: child modes only (see probe.go).
func main() {
	var a childArgs
	childFlags(flag.CommandLine, &a)
	flag.Parse()
	if a.mode == "" {
		fmt.Fprintln(os.Stderr, "bench probe: only --child modes (run the bench with go run .)")
		os.Exit(2)
	}
	if err := runChild(a); err != nil {
		fmt.Fprintf(os.Stderr, "bench child %s: %v\n", a.mode, err)
		os.Exit(1)
	}
}
