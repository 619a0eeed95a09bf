package deltalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestKVCompareAndSwap: a key-value bucket over two connections (two
// replicas): Get of a missing key is nil, 0; Put is a compare-and-swap on
// the revision (a stale or a second create gets ErrRevision); eight
// writers adding one entry each through read-modify-Put loops all keep
// theirs; a second connection reads what the first wrote.
func TestKVCompareAndSwap(t *testing.T) {
	ctx := context.Background()
	n := startEmbedded(t, NodeOptions{})
	logs := [2]*Log{}
	for i := range logs {
		l, err := Connect(n.ClientURL(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		logs[i] = l
	}
	kv0, err := logs[0].KV(ctx, "es_test")
	if err != nil {
		t.Fatal(err)
	}
	kv1, err := logs[1].KV(ctx, "es_test")
	if err != nil {
		t.Fatal(err)
	}
	if v, rev, err := kv0.Get(ctx, "k"); v != nil || rev != 0 || err != nil {
		t.Fatalf("missing key: %q %d %v", v, rev, err)
	}
	r1, err := kv0.Put(ctx, "k", []byte("a"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv1.Put(ctx, "k", []byte("b"), 0); !errors.Is(err, ErrRevision) {
		t.Fatalf("a second create: %v, want ErrRevision", err)
	}
	if v, rev, err := kv1.Get(ctx, "k"); string(v) != "a" || rev != r1 || err != nil {
		t.Fatalf("read through the other connection: %q %d %v", v, rev, err)
	}
	r2, err := kv1.Put(ctx, "k", []byte("ab"), r1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv0.Put(ctx, "k", []byte("stale"), r1); !errors.Is(err, ErrRevision) {
		t.Fatalf("a put at a stale revision: %v, want ErrRevision", err)
	}
	if v, rev, _ := kv0.Get(ctx, "k"); string(v) != "ab" || rev != r2 {
		t.Fatalf("after the stale put: %q %d, want ab %d", v, rev, r2)
	}

	var wg sync.WaitGroup
	for w := range 8 {
		kv := []*KV{kv0, kv1}[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				v, rev, err := kv.Get(ctx, "k")
				if err != nil {
					t.Error(err)
					return
				}
				_, err = kv.Put(ctx, "k", append(v, byte('0'+w)), rev)
				if err == nil {
					return
				}
				if !errors.Is(err, ErrRevision) {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	v, _, _ := kv0.Get(ctx, "k")
	if len(v) != 2+8 {
		t.Fatalf("after 8 concurrent adds: %q, want ab and one digit per writer", v)
	}
	for w := range 8 {
		if bytes.IndexByte(v[2:], byte('0'+w)) < 0 {
			t.Fatalf("writer %d's add lost: %q", w, v)
		}
	}
}

// TestKVOnAFormingCluster: a bucket opened right after a 3-node cluster
// started (its meta leader not elected yet: requests are dropped, not
// answered) is made once the cluster answers, replicated on all three.
func TestKVOnAFormingCluster(t *testing.T) {
	var routes []string
	var ports []int
	for range 3 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, p)
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	nodes := make([]*Node, 3)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[i] = startEmbedded(t, NodeOptions{Name: fmt.Sprintf("kv%d", i), Cluster: &ClusterOptions{Port: ports[i], Routes: routes}})
		}()
	}
	wg.Wait()
	l, err := Connect(nodes[0].ClientURL(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	kv, err := l.KV(testCtx(t, 60*time.Second), "es_forming")
	if err != nil {
		t.Fatalf("a bucket on a forming cluster: %v", err)
	}
	ctx := testCtx(t, 30*time.Second)
	if _, err := kv.Put(ctx, "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if v, _, err := kv.Get(ctx, "k"); string(v) != "v" || err != nil {
		t.Fatalf("get: %q %v", v, err)
	}
	if l.Replicas() != 3 {
		t.Fatalf("replicas %d, want 3 on a cluster", l.Replicas())
	}
}
