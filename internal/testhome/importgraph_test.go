package testhome_test

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/energyscope/energyscope/"

// goList runs go list in the module's root and returns its lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list %v: %v\n%s", args, err, stderr)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestImportGraph holds the arrows README's "Design notes" draws for the
// generator and the test helpers: internal/synth imports no project
// package but internal/calendar; internal/testhome reaches nothing that its
// users (the hub's, the sync client's, the functions', the companion's and
// the app's tests) sit below; and no package outside tests imports either
// helper.
func TestImportGraph(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go tool is needed for this test: %v", err)
	}
	var synthDeps []string
	for _, d := range goList(t, "-deps", "-f", "{{.ImportPath}}", "./internal/synth") {
		if strings.HasPrefix(d, module) {
			synthDeps = append(synthDeps, strings.TrimPrefix(d, module))
		}
	}
	slices.Sort(synthDeps)
	if want := []string{"internal/calendar", "internal/synth"}; !slices.Equal(synthDeps, want) {
		t.Errorf("internal/synth reaches %q, want only %q", synthDeps, want)
	}

	deps := goList(t, "-deps", "-f", "{{.ImportPath}}", "./internal/testhome")
	if !slices.Contains(deps, module+"server/cook") {
		t.Fatalf("go list of internal/testhome does not show server/cook: the check would see nothing (%d deps)", len(deps))
	}
	for _, d := range deps {
		p := strings.TrimPrefix(d, module)
		for _, above := range []string{"server", "server/hub", "sync/client", "functions", "internal/companion", "internal/testserver", "app"} {
			if p == above || strings.HasPrefix(p, above+"/") && !strings.HasPrefix(p, "server/cook") {
				t.Errorf("internal/testhome imports %s, which its users' tests sit below", p)
			}
		}
	}

	helpers := []string{module + "internal/testhome", module + "internal/testserver"}
	n := 0
	for _, line := range goList(t, "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		n++
		for _, imp := range f[1:] {
			if slices.Contains(helpers, imp) && f[0] != module+"internal/testserver" {
				t.Errorf("%s imports %s outside its tests", f[0], imp)
			}
		}
	}
	if n < 20 {
		t.Fatalf("go list ./... listed only %d packages", n)
	}
}
