package client_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/sync/client"
)

// openStaged counts this process's open files inside a download's
// staging directory (format.StagingPrefix) of home.
func openStaged(t *testing.T, home string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, fd := range fds {
		p, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(p, home) && strings.Contains(p, "/"+format.StagingPrefix) {
			n++
		}
	}
	return n
}

// TestEndedSessionLetsGoOfStagedFiles: a session that ends in the middle
// of a download (here the engine is stopped) closes the .partial file it
// was writing; the staged bytes stay for the next stage to resume. The
// old engine left the file open until the garbage collector found it (on
// Windows an open handle also blocks removing the staging directory).
func TestEndedSessionLetsGoOfStagedFiles(t *testing.T) {
	r := startRig(t, bigServerHome(t, 600_000), nil)
	home := t.TempDir()
	st := openCompStore(t, home)
	c := startComp(t, st, nil, client.Options{Server: r.hs.URL, BandwidthLimit: 4 << 20})
	waitFor(t, 30*time.Second, "a download under way", func() bool {
		held, _ := localcache.StagedBytes(home, "big")
		return held > 0 && openStaged(t, home) > 0
	})
	c.stop()
	if n := openStaged(t, home); n != 0 {
		t.Fatalf("%d staged files still open after the session ended", n)
	}
	if held, partial := localcache.StagedBytes(home, "big"); held == 0 || partial == 0 {
		t.Fatalf("the staged bytes went with the session: held %d, partial %d", held, partial)
	}
}
