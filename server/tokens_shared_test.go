package server

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/energyscope/energyscope/server/deltalog"
)

// sharedKV opens the tokens bucket of a fresh embedded NATS node through
// n connections (n servers or es token commands).
func sharedKV(t *testing.T, n int) []*deltalog.KV {
	t.Helper()
	node, err := deltalog.StartNode(deltalog.NodeOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Shutdown)
	var out []*deltalog.KV
	for range n {
		l, err := deltalog.Connect(node.ClientURL(), deltalog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		kv, err := l.KV(context.Background(), SharedTokensBucket)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, kv)
	}
	return out
}

// TestSharedTokens: tokens in the shared store. Adds and removals made at
// the same moment through several connections all hold (compare-and-swap,
// retried); a Tokens loaded earlier sees them at its next
// ReloadIfChanged; a value that does not parse keeps the tokens loaded
// before and is reported once.
func TestSharedTokens(t *testing.T) {
	kvs := sharedKV(t, 5)
	server, err := LoadSharedTokens(kvs[0])
	if err != nil || !server.Empty() {
		t.Fatalf("an empty store: %v, empty %v", err, server.Empty())
	}
	seed, err := LoadSharedTokens(kvs[1])
	if err != nil {
		t.Fatal(err)
	}
	old, err := seed.Add("old", ScopeRead)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	plain := make([]string, 4)
	errs := make([]error, 5)
	for i := range 4 {
		tk, err := LoadSharedTokens(kvs[1+i])
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			plain[i], errs[i] = tk.Add(fmt.Sprintf("w%d", i), ScopeWrite)
		}()
	}
	wg.Add(1)
	go func() { defer wg.Done(); errs[4] = seed.Remove("old") }()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	if changed, err := server.ReloadIfChanged(); !changed || err != nil {
		t.Fatalf("reload after the updates: %v %v", changed, err)
	}
	if changed, _ := server.ReloadIfChanged(); changed {
		t.Fatal("a second reload without a change reports one")
	}
	if n := len(server.List()); n != 4 {
		t.Fatalf("%d tokens after 4 adds and 1 removal, want 4: %+v", n, server.List())
	}
	for i, p := range plain {
		if name, ok := server.Check(p, ScopeWrite); !ok || name != fmt.Sprintf("w%d", i) {
			t.Fatalf("token %d: %q %v", i, name, ok)
		}
	}
	if name, _ := server.Check(old, ScopeRead); name != "" {
		t.Fatal("the removed token still checks")
	}
	// A hand-written value that does not parse.
	_, rev, _ := kvs[2].Get(context.Background(), SharedTokensKey)
	if _, err := kvs[2].Put(context.Background(), SharedTokensKey, []byte("{not json"), rev); err != nil {
		t.Fatal(err)
	}
	if changed, err := server.ReloadIfChanged(); changed || err == nil {
		t.Fatalf("reload of a bad value: changed %v, err %v; want an error", changed, err)
	}
	if _, err := server.ReloadIfChanged(); err != nil {
		t.Fatalf("the bad value is reported again: %v", err)
	}
	if _, ok := server.Check(plain[0], ScopeWrite); !ok {
		t.Fatal("a bad value dropped the tokens loaded before")
	}
	if _, err := seed.Add("x", ScopeRead); err == nil {
		t.Fatal("an add over a value that does not parse succeeded (it would drop the tokens)")
	}
}
