package main

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
)

// TestServeFormatVersionRefused: es serve --format-version takes 0 (this
// build's version) or a version this build writes; anything else exits 2
// naming the flag and leaves the home as it was.
func TestServeFormatVersionRefused(t *testing.T) {
	skipE2E(t)
	for _, bad := range []string{"-1", strconv.Itoa(format.FormatVersion + 1), "99", "two"} {
		home := t.TempDir()
		code, _, errs := es(t, "serve", "--home", home, "--no-auth", "--format-version", bad)
		if code != 2 || !strings.Contains(errs, "format-version") {
			t.Errorf("--format-version %s: exit %d, stderr %q; want 2 naming --format-version", bad, code, errs)
		}
		if ents, _ := os.ReadDir(home); len(ents) != 0 {
			t.Errorf("--format-version %s left %d entries in the home", bad, len(ents))
		}
	}
}
