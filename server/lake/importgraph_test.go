package lake

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDesktopDoesNotLinkTheLake: the desktop app (root main package, with
// and without the desktop build tags, also for Windows), package app and
// the companion must not import iceberg-go or this package (20-40 MB, and
// the companion never writes the lake). It fails as soon as someone
// imports server/lake, or anything that does, from there.
func TestDesktopDoesNotLinkTheLake(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go tool is needed for this test: %v", err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	const self = "github.com/energyscope/energyscope/server/lake"
	forbidden := []string{"github.com/apache/iceberg-go", self}
	for _, c := range []struct {
		name string
		env  []string
		args []string
	}{
		{"untagged", nil, []string{".", "./app", "./internal/companion"}},
		{"desktop", nil, []string{"-tags", "desktop,production,webkit2_41", ".", "./app"}},
		{"windows desktop", []string{"GOOS=windows"}, []string{"-tags", "desktop,production", ".", "./app"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, c.args...)...)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), c.env...)
			out, err := cmd.Output()
			if err != nil {
				var stderr string
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = string(ee.Stderr)
				}
				t.Fatalf("go list: %v\n%s", err, stderr)
			}
			deps := strings.Fields(string(out))
			if len(deps) < 50 {
				t.Fatalf("go list returned only %d packages: %v", len(deps), deps)
			}
			for _, d := range deps {
				for _, f := range forbidden {
					if d == f || strings.HasPrefix(d, f+"/") {
						t.Errorf("%v imports %s: keep the lake out of the desktop app and the companion", c.args, d)
					}
				}
			}
		})
	}
	// Sanity: the check sees this package where it is meant to be used.
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./server/lake")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "github.com/apache/iceberg-go\n") {
		t.Fatalf("go list of server/lake does not show iceberg-go (err %v): the check would not see it either", err)
	}
}
