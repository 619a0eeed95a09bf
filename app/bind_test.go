package app_test

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"testing"
)

// TestBindingsMatchFrontend: what the window binds (App.Bind: one struct
// per view) is exactly what frontend/src/api.ts calls, view by view and
// method by method. A method bound and never called, or called on a view
// that does not have it, fails here rather than as an error sentence in
// the running window.
func TestBindingsMatchFrontend(t *testing.T) {
	ts, err := os.ReadFile(filepath.Join(repoRoot, "frontend", "src", "api.ts"))
	if err != nil {
		t.Fatal(err)
	}
	var called []string
	for _, m := range regexp.MustCompile(`call<[^>]+>\('(\w+)', '(\w+)'`).FindAllSubmatch(ts, -1) {
		called = append(called, string(m[1])+"."+string(m[2]))
	}
	if len(called) < 20 {
		t.Fatalf("api.ts: %d calls found; the pattern no longer matches it", len(called))
	}
	a := newTestApp(t)
	var bound []string
	for _, v := range a.App.Bind() {
		typ := reflect.TypeOf(v)
		if typ.Kind() != reflect.Pointer || typ.Elem().Kind() != reflect.Struct {
			t.Fatalf("bound %v: Wails binds pointers to structs", typ)
		}
		if typ.NumMethod() == 0 {
			t.Errorf("%s binds no method", typ.Elem().Name())
		}
		for i := range typ.NumMethod() {
			bound = append(bound, typ.Elem().Name()+"."+typ.Method(i).Name)
		}
	}
	slices.Sort(called)
	slices.Sort(bound)
	if !slices.Equal(slices.Compact(called), bound) {
		t.Fatalf("api.ts calls\n%q\nthe views bind\n%q", called, bound)
	}
}
