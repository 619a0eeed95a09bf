package server

// The lake's catalog going away under a running server: a real
// PostgreSQL server (Debian's postgresql package, as server/lake's
// TestPostgresCatalog) started on loopback as the postgres user, stopped
// and started again. It needs root (runuser): under CI=true it always
// runs, elsewhere it skips without root or the package.

import (
	"context"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/energyscope/energyscope/internal/testpg"
	"github.com/energyscope/energyscope/server/lake"
)

// TestLakeCatalogDown: with the catalog stopped, a PUT and a compaction
// fail with 503 naming the lake and change nothing (the rows ingested
// meanwhile stay served, the previous snapshot serves), /healthz says the
// catalog is unreachable; with it back, a compaction publishes them.
func TestLakeCatalogDown(t *testing.T) {
	pg := testpg.Start(t)
	home := t.TempDir()
	l, err := lake.Open(context.Background(), lake.Options{Home: home, CatalogURI: pg.URI})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tokens, err := LoadTokens(home + "/" + TokensFile)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, home: home}
	f.read, _ = tokens.Add("r", ScopeRead)
	f.write, _ = tokens.Add("w", ScopeWrite)
	if f.srv, err = New(Options{Home: home, Tokens: tokens, Lake: l, CompactRows: -1, CompactBytes: -1}); err != nil {
		t.Fatal(err)
	}
	f.hs = httptest.NewServer(f.srv.Handler())
	defer f.close()
	f.putStocks()
	v1 := checkLakeHead(t, l, f.srv.Store(), "stocks", 1)
	checkServedFromLake(t, f, "stocks")

	pg.Stop()
	if code, body := f.do("POST", "/v1/datasets/stocks/rows", f.write, "text/csv", strings.NewReader("series_id,period,value\nMSFT,2026-11-01,500.5\n"), ""); code != 200 {
		t.Fatalf("ingest with the catalog down: %d %s (ingest does not need it)", code, body)
	}
	body0, _ := os.ReadFile(stocksCSV)
	if code, body := f.do("PUT", "/v1/datasets/stocks?series_col=symbol&period_col=date&value_col=price&frequency=M", f.write, "text/csv", strings.NewReader(string(body0)), ""); code != 503 || !strings.Contains(body, "lake") {
		t.Fatalf("PUT with the catalog down: %d %s, want 503 naming the lake", code, body)
	}
	if code, body := f.do("POST", "/v1/datasets/stocks/compact", f.write, "", nil, ""); code != 503 || !strings.Contains(body, "lake") {
		t.Fatalf("compact with the catalog down: %d %s, want 503", code, body)
	}
	if _, id, seq, _ := f.srv.Store().State("stocks"); id != v1.Snapshot || seq != 1 {
		t.Fatalf("after the failures: serving %s seq %d, want %s seq 1", id, seq, v1.Snapshot)
	}
	if code, body := f.do("GET", "/v1/series/MSFT?from=2026-11-01&to=2026-11-30", f.read, "", nil, ""); code != 200 || !strings.Contains(body, "500.5") {
		t.Fatalf("the ingested row with the catalog down: %d %q", code, body)
	}
	checkServedFromLake(t, f, "stocks")
	h := f.health()
	if h.State != HealthDegraded || h.Lake == nil || h.Lake.Catalog != CatalogUnreachable || h.Lake.LastPublishError == "" ||
		h.Datasets[0].Vintage == nil || h.Datasets[0].Vintage.IcebergSnapshot != v1.IcebergSnapshot {
		t.Fatalf("healthz with the catalog down: %+v (lake %+v)", h, h.Lake)
	}

	pg.Start()
	if code, body := f.do("POST", "/v1/datasets/stocks/compact", f.write, "", nil, ""); code != 200 {
		t.Fatalf("compact with the catalog back: %d %s", code, body)
	}
	if v := checkLakeHead(t, l, f.srv.Store(), "stocks", 2); v.CoversSeq != 1 {
		t.Fatalf("the compaction after the outage covers %d, want 1", v.CoversSeq)
	}
	if h := f.health(); h.State != HealthOK || h.Lake.Catalog != CatalogReachable || h.Lake.LastPublishError != "" {
		t.Fatalf("healthz with the catalog back: %+v (lake %+v)", h, h.Lake)
	}
}
