package localcache_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
)

// publish cooks tb into home/datasets/<name> the way a cook or another
// process does (write to a temp dir, rename, move CURRENT) and returns
// the manifest and the snapshot directory.
func publish(t testing.TB, home, name string, tb *format.Table, o format.WriteOptions) (*format.Manifest, string) {
	t.Helper()
	dsDir := filepath.Join(home, localcache.DatasetsDir, name)
	tmp, err := format.TempSnapshotDir(dsDir)
	if err != nil {
		t.Fatal(err)
	}
	o.Dataset = name
	if o.Created.IsZero() {
		o.Created = time.Unix(1700000000, 0)
	}
	m, _, err := format.Write(tmp, tb, o)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := format.Publish(dsDir, tmp, m)
	if err != nil {
		t.Fatal(err)
	}
	return m, dir
}

// openStore opens home and closes the store at the end of the test.
func openStore(t testing.TB, home string) *localcache.Store {
	t.Helper()
	s, err := localcache.Open(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// mappedDirs reports which of dirs have a file mapped into this process.
// ok is false where /proc/self/maps does not exist (not Linux).
func mappedDirs(t testing.TB, dirs ...string) (mapped map[string]bool, ok bool) {
	t.Helper()
	if runtime.GOOS != "linux" {
		return nil, false
	}
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, false
	}
	mapped = map[string]bool{}
	for _, d := range dirs {
		mapped[d] = strings.Contains(string(b), d+string(filepath.Separator))
	}
	return mapped, true
}

// wantMapped fails unless dir is (or is not) mapped; a no-op off Linux.
func wantMapped(t testing.TB, dir string, want bool) {
	t.Helper()
	m, ok := mappedDirs(t, dir)
	if ok && m[dir] != want {
		t.Fatalf("%s mapped = %v, want %v", dir, m[dir], want)
	}
}

func utc(s string) int64 {
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02", "Jan 2 2006"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.Unix()
		}
	}
	panic("bad time " + s)
}
