package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server/lake"
)

// TestServeKill9MidCompaction (issue 12): kill -9 of es serve while a
// writer posts batches under idempotency keys and compactions run back
// to back (each cooks its snapshot straight into the lake's Puffin file
// and commits it). After each restart the batch in flight is retried
// with its key. At the end no acknowledged row is lost (the last batch of
// every series is served), the lake's current vintage is the snapshot the
// home serves, the home keeps no directory of it (it is mapped from the
// lake), and every vintage of the lake opens.
func TestServeKill9MidCompaction(t *testing.T) {
	skipE2E(t)
	home := t.TempDir()
	cookStocks(t, home)
	srv := newE2EServer(t, home)
	srv.start("127.0.0.1:0")
	defer func() { srv.p.kill() }()

	const rounds, perBatch = 3, 20
	r := rand.New(rand.NewPCG(12, 1))
	acked := map[int]bool{}
	compactions := 0
	batch := 0
	for round := range rounds {
		var mu sync.Mutex
		stop := make(chan struct{})
		var wg sync.WaitGroup
		inFlight := -1
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, _, err := srv.postKey("stocks", fmt.Sprintf("kill-%d", batch), batch, perBatch); err != nil {
					inFlight = batch
					return
				}
				mu.Lock()
				acked[batch] = true
				mu.Unlock()
				batch++
			}
		})
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				code, _, err := srv.do("POST", "/v1/datasets/stocks/compact", srv.write, "", nil)
				if err != nil {
					return
				}
				if code == 200 {
					mu.Lock()
					compactions++
					mu.Unlock()
				}
			}
		})
		// Let compactions run, then kill -9 at a random point of one.
		deadline := time.Now().Add(20 * time.Second)
		for {
			mu.Lock()
			n := compactions
			mu.Unlock()
			if n >= 2*(round+1) || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Duration(r.IntN(150)) * time.Millisecond)
		srv.p.kill()
		close(stop)
		wg.Wait()
		srv.start(srv.addr)
		if inFlight >= 0 {
			if _, _, err := srv.postKey("stocks", fmt.Sprintf("kill-%d", inFlight), inFlight, perBatch); err != nil {
				t.Fatalf("round %d: retry of batch %d: %v", round, inFlight, err)
			}
			acked[inFlight] = true
			batch = inFlight + 1
		}
	}
	if compactions < rounds {
		t.Fatalf("only %d compactions ran", compactions)
	}
	srv.p.kill()
	srv.start(srv.addr)

	// Every series' last acknowledged batch is served.
	last := map[int]int{}
	for b := range acked {
		if b >= last[b%7] {
			last[b%7] = b
		}
	}
	for k, b := range last {
		code, body, err := srv.do("GET", fmt.Sprintf("/v1/series/KILL.%d?from=2031-01-01&to=2031-01-31", k), srv.read, "", nil)
		for i := range perBatch {
			if want := fmt.Sprintf("2031-01-%02d,%d\n", i+1, b*1000+i); err != nil || code != 200 || !strings.Contains(string(body), want) {
				t.Fatalf("KILL.%d after the restarts: %d %v, want %q in\n%s", k, code, err, want, body)
			}
		}
	}

	// The lake and the home agree.
	var vs []lake.Vintage
	if err := json.Unmarshal([]byte(mustES(t, "vintages", "--home", home, "--dataset", "stocks", "--json")), &vs); err != nil {
		t.Fatal(err)
	}
	head := srv.head("stocks")
	if len(vs) < 2 || vs[len(vs)-1].Snapshot != head.Snapshot {
		t.Fatalf("the lake's vintages end at %+v, the home serves %s", vs[len(vs)-1], head.Snapshot)
	}
	if _, err := os.Stat(filepath.Join(home, "datasets", "stocks", format.SnapshotsDir, head.Snapshot)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the home keeps a directory of the snapshot it maps from the lake: %v", err)
	}
	for _, v := range vs {
		if !v.Serving {
			t.Fatalf("vintage %+v has no serving index", v)
		}
		if out := mustES(t, "get", "--home", home, "--asof", v.Snapshot, "MSFT", "2026"); out == "" {
			t.Fatalf("es get --asof %s: nothing", v.Snapshot)
		}
	}
	t.Logf("%d compactions, %d batches, %d vintages", compactions, len(acked), len(vs))
}
