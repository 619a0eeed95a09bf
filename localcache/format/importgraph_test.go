package format

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReadPathLinksNoParquet: a binary that imports only the store's read
// path (localcache, localcache/snapshot, localcache/format) and the bench's
// store-only probe must not link arrow-go's Parquet packages, arrow/compute
// (whose init registers every compute kernel: several MiB of RSS before a
// snapshot is opened) or tailwrite, which links both. It fails as soon as
// someone imports one of them from the read path.
func TestReadPathLinksNoParquet(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go tool is needed for this test: %v", err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	const tailwrite = "github.com/energyscope/energyscope/localcache/format/tailwrite"
	forbidden := []string{
		"github.com/apache/arrow-go/v18/parquet",
		"github.com/apache/arrow-go/v18/arrow/compute",
		"github.com/apache/thrift",
		tailwrite,
	}
	deps := func(t *testing.T, dir string, args ...string) []string {
		t.Helper()
		cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, args...)...)
		cmd.Dir = dir
		cmd.Env = os.Environ()
		out, err := cmd.Output()
		if err != nil {
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("go list: %v\n%s", err, stderr)
		}
		d := strings.Fields(string(out))
		if len(d) < 20 {
			t.Fatalf("go list returned only %d packages: %v", len(d), d)
		}
		return d
	}
	bad := func(d string) bool {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		name string
		dir  string
		args []string
	}{
		{"store", root, []string{"./localcache", "./localcache/snapshot", "./localcache/format"}},
		{"bench probe", filepath.Join(root, "bench"), []string{"-tags", "probe", "."}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, d := range deps(t, c.dir, c.args...) {
				if bad(d) {
					t.Errorf("%v links %s: keep Parquet and arrow/compute out of the read path (the writer is in localcache/format/tailwrite)", c.args, d)
				}
			}
		})
	}
	// The binaries that write snapshots with a cold tier (the cook, the
	// server, the companion and the desktop app, which compact) link the
	// writer: without it their Write of a cold tier fails with
	// ErrNoTailWriter at run time.
	for _, c := range []struct {
		goos string
		args []string
	}{
		{"", []string{"./cmd/es"}},
		{"", []string{"./server"}},
		{"", []string{"./internal/companion"}},
		{"", []string{"./app"}},
		{"", []string{"-tags", "desktop,production,webkit2_41", "."}},
		{"windows", []string{"-tags", "desktop,production", "."}},
	} {
		t.Run(fmt.Sprint("writer ", c.goos, c.args), func(t *testing.T) {
			if c.goos != "" {
				t.Setenv("GOOS", c.goos)
			}
			if !slices.Contains(deps(t, root, c.args...), tailwrite) {
				t.Errorf("%v does not link %s: its Write of a cold tier would fail with ErrNoTailWriter", c.args, tailwrite)
			}
		})
	}
	// Sanity: the check sees the writer where it is linked.
	found := false
	for _, d := range deps(t, root, "./localcache/format/tailwrite") {
		if strings.HasPrefix(d, "github.com/apache/arrow-go/v18/arrow/compute") {
			found = true
		}
	}
	if !found {
		t.Fatal("tailwrite does not link arrow/compute: the check above proves nothing")
	}
}
