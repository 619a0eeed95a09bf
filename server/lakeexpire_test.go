package server

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/energyscope/energyscope/server/lake"
)

// TestCloseDoesNotWaitOnExpiry: the retention pass a publish sets off
// runs on the server's context, so Close cancels it instead of waiting
// for it. The pass here blocks like a catalog that hangs (until its
// context ends, at most 20 s); Close must return well before that and
// the pass must have seen context.Canceled.
func TestCloseDoesNotWaitOnExpiry(t *testing.T) {
	f, _ := lakeFixture(t, t.TempDir(), Options{KeepVintages: 1})
	entered := make(chan struct{})
	ended := make(chan error, 1)
	f.srv.vint.beforeExpire = func(ctx context.Context) {
		close(entered)
		select {
		case <-ctx.Done():
			ended <- ctx.Err()
		case <-time.After(20 * time.Second):
			ended <- errors.New("the pass's context was not cancelled in 20 s")
		}
	}
	f.putStocks()
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the publish set off no retention pass")
	}
	f.hs.Close()
	closed := make(chan struct{})
	start := time.Now()
	go func() { f.srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		<-closed
		t.Fatalf("Close waited %v for a hanging retention pass", time.Since(start).Round(time.Second))
	}
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("the retention pass ended with %v, want context.Canceled (Close's)", err)
	}
}

// TestStartWithCatalogSilent: a catalog that accepts connections and
// never answers (packets dropped by a firewall, a hung database) does not
// hold server.New past lakeStartWait: the server serves its recorded
// vintage from the file:// warehouse and says the catalog is unreachable.
func TestStartWithCatalogSilent(t *testing.T) {
	home := t.TempDir()
	f, l := lakeFixture(t, home, Options{})
	f.putStocks()
	_, want := f.do("GET", "/v1/series/MSFT?from=2020-01-01&to=2030-01-01", f.read, "", nil, "")
	f.close()
	l.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	}()
	defer func(w time.Duration) { lakeStartWait = w }(lakeStartWait)
	lakeStartWait = 500 * time.Millisecond
	silent, err := lake.Open(context.Background(), lake.Options{Home: home, ConnectLater: true,
		CatalogURI: "postgres://es@" + ln.Addr().String() + "/es?sslmode=disable",
		Warehouse:  "file://" + filepath.ToSlash(filepath.Join(home, lake.Dir, lake.WarehouseDir))})
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	tokens, err := LoadTokens(home + "/" + TokensFile)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	srv, err := New(Options{Home: home, Tokens: tokens, Lake: silent, CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	g := &fixture{t: t, home: home, srv: srv, read: f.read, write: f.write}
	g.hs = httptest.NewServer(srv.Handler())
	defer g.close()
	if took > 20*time.Second {
		t.Fatalf("New took %v with a silent catalog", took)
	}
	if code, got := g.do("GET", "/v1/series/MSFT?from=2020-01-01&to=2030-01-01", g.read, "", nil, ""); code != 200 || got != want {
		t.Fatalf("with a silent catalog: %d %s, want %s", code, got, want)
	}
	checkServedFromLake(t, g, "stocks")
	// (503 while the replica part waits for the catalog: the body says why.)
	_, body := g.do("GET", "/healthz", g.read, "", nil, "")
	var h Health
	if err := json.Unmarshal([]byte(body), &h); err != nil || h.Lake == nil || h.Lake.Catalog != CatalogUnreachable || len(h.Datasets) != 1 || h.Datasets[0].State != HealthOK {
		t.Fatalf("healthz with a silent catalog: %v %s", err, body)
	}
}

// TestPublishDuringExpiryRunsAnotherPass: a publish while a retention
// pass runs gets a pass after it, so the retention holds after the last
// publish of a burst, not only after the next one (es serve
// --keep-vintages left one vintage too many when its last compaction
// landed during the pass of the one before). The vintages the lake keeps
// at the end are the retention's.
func TestPublishDuringExpiryRunsAnotherPass(t *testing.T) {
	f, l := lakeFixture(t, t.TempDir(), Options{KeepVintages: 1})
	entered := make(chan struct{}, 8)
	release := make(chan struct{})
	f.srv.vint.beforeExpire = func(ctx context.Context) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
	}
	f.putStocks() // vintage 1; its pass holds
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the publish set off no retention pass")
	}
	f.putStocks() // vintage 2, during the pass
	f.putStocks() // vintage 3, during the pass: the burst shares one more
	close(release)
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no retention pass after the publishes made during one")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		vs, err := l.Vintages(context.Background(), "stocks")
		if err != nil {
			t.Fatal(err)
		}
		if len(vs) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d vintages kept with KeepVintages 1", len(vs))
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-entered:
		t.Fatal("a third pass for one burst")
	case <-time.After(200 * time.Millisecond):
	}
}
