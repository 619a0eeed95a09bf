package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/energyscope/energyscope/internal/testpg"
	"github.com/energyscope/energyscope/server"
)

// TestServeCatalogDownAtStart: a real es serve whose PostgreSQL catalog
// is down when it starts keeps serving its lake-backed dataset from the
// vintage it recorded (its Puffin file in the file:// warehouse), says in
// /healthz that the catalog is unreachable, refuses a PUT with 503
// changing nothing, and publishes again once the catalog is back.
func TestServeCatalogDownAtStart(t *testing.T) {
	pg := testpg.Start(t)
	home := t.TempDir()
	mustES(t, "cook", "--home", home, "--dataset", "stocks", "--in", "../../server/cook/samples/stocks.csv",
		"--series-col", "symbol", "--period-col", "date", "--value-col", "price", "--frequency", "M")
	s := newE2EServer(t, home)
	s.extraArgs = []string{"--catalog", pg.URI}
	s.start("127.0.0.1:0") // migrates the cooked snapshot into the lake: served from there
	series := func() string {
		t.Helper()
		code, b, err := s.do("GET", "/v1/series/MSFT?from=2020-01-01&to=2030-01-01", s.read, "", nil)
		if err != nil || code != 200 {
			t.Fatalf("GET series: %d %v %s", code, err, b)
		}
		return string(b)
	}
	health := func() server.Health {
		t.Helper()
		_, b, err := s.do("GET", "/healthz", s.read, "", nil)
		var h server.Health
		if err != nil || json.Unmarshal(b, &h) != nil {
			t.Fatalf("healthz: %v %s", err, b)
		}
		return h
	}
	want, head := series(), s.head("stocks")
	if h := health(); h.Lake == nil || h.Lake.Catalog != server.CatalogReachable {
		t.Fatalf("healthz before: %+v", h)
	}
	s.p.kill()

	pg.Stop()
	s.start(s.addr)
	if got := series(); got != want {
		t.Fatalf("with the catalog down at start: %s, want %s", got, want)
	}
	if h2 := s.head("stocks"); h2.Snapshot != head.Snapshot || h2.Epoch != head.Epoch {
		t.Fatalf("serving %+v, was %+v", h2, head)
	}
	h := health()
	if h.Damaged != 0 || len(h.Datasets) != 1 || h.Datasets[0].State != server.HealthOK || h.Lake == nil || h.Lake.Catalog != server.CatalogUnreachable ||
		h.Datasets[0].Vintage == nil || h.Datasets[0].Vintage.Snapshot != head.Snapshot {
		t.Fatalf("healthz with the catalog down: %+v (lake %+v)", h, h.Lake)
	}
	if _, err := s.post("stocks", []tickRow{{Series: "MSFT", Period: "2026-11-01", Value: 500}}); err != nil {
		t.Fatalf("ingest with the catalog down (it does not need it): %v", err)
	}
	if code, b, err := s.do("POST", "/v1/datasets/stocks/compact", s.write, "", nil); err != nil || code != 503 || !strings.Contains(string(b), "lake") {
		t.Fatalf("compact with the catalog down: %d %v %s, want 503 naming the lake", code, err, b)
	}
	if h2 := s.head("stocks"); h2.Snapshot != head.Snapshot {
		t.Fatalf("the failed compaction changed the snapshot: %+v", h2)
	}

	pg.Start()
	if code, b, err := s.do("POST", "/v1/datasets/stocks/compact", s.write, "", nil); err != nil || code != 200 {
		t.Fatalf("compact with the catalog back: %d %v %s", code, err, b)
	}
	if h := health(); h.Lake.Catalog != server.CatalogReachable || h.Datasets[0].Vintage == nil || h.Datasets[0].Vintage.Snapshot != s.head("stocks").Snapshot {
		t.Fatalf("healthz with the catalog back: %+v (lake %+v)", h, h.Lake)
	}
	s.p.kill()
}
