package server

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// TestTokensConcurrentUpdates: es token add/rm run as separate processes,
// each with the tokens file as it loaded it. Run at the same moment, no
// change may be lost: each loads before any writes (as N processes
// started together do), then all add (and one removes) at once.
func TestTokensConcurrentUpdates(t *testing.T) {
	path := filepath.Join(t.TempDir(), TokensFile)
	seed, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := seed.Add("old", ScopeRead); err != nil {
		t.Fatal(err)
	}
	const n = 16
	procs := make([]*Tokens, n+1)
	for i := range procs {
		if procs[i], err = LoadTokens(path); err != nil {
			t.Fatal(err)
		}
	}
	plains := make([]string, n)
	errs := make([]error, n+1)
	var start, wg sync.WaitGroup
	start.Add(1)
	for i := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start.Wait()
			if i == n {
				errs[i] = procs[i].Remove("old")
				return
			}
			plains[i], errs[i] = procs[i].Add(fmt.Sprintf("t%02d", i), ScopeWrite)
		}()
	}
	start.Done()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	got, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tk := range got.List() {
		names[tk.Name] = true
	}
	if len(names) != n || names["old"] {
		t.Errorf("tokens file holds %d tokens %v, want the %d added and not the removed one", len(names), names, n)
	}
	for i, p := range plains {
		if name, ok := got.Check(p, ScopeWrite); !ok || name != fmt.Sprintf("t%02d", i) {
			t.Errorf("token t%02d: Check = %q, %v", i, name, ok)
		}
	}
}
