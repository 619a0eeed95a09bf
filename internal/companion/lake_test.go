package companion_test

import (
	"context"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/internal/companion"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/cook"
	"github.com/energyscope/energyscope/server/cook/samples"
	"github.com/energyscope/energyscope/server/lake"
)

// TestCompanionAsOfRealLake: the whole path on a real lake-backed server
// (es serve's embedded SQLite catalog and file:// warehouse): three
// publishes are three vintages; the companion answers ES.Get asof= by a
// snapshot id, a tag and a time, and ES.Revisions, through its bridge over
// HTTPS, fetching what it does not hold over the sync connection.
func TestCompanionAsOfRealLake(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	lk, err := lake.Open(ctx, lake.DefaultOptions(home))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	srv, err := server.New(server.Options{Home: home, Lake: lk, CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	var opts cook.InputOptions
	for _, s := range samples.Sets {
		if s.Dataset == "stocks" {
			opts = s.Opts
		}
	}
	if _, err := srv.Replace("stocks", []string{"../../server/cook/samples/stocks.csv"}, opts); err != nil {
		t.Fatal(err)
	}
	for _, v := range []float64{1000, 2000} {
		// Commit times are the wall clock's: a second apart, so that a
		// time (whole seconds) falls between two vintages.
		time.Sleep(1100 * time.Millisecond)
		if _, _, err := srv.Ingest("stocks", []format.Record{{Op: format.Upsert, SeriesID: "MSFT", Period: jan2000, Value: v}}); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.Compact("stocks"); err != nil {
			t.Fatal(err)
		}
	}
	all, err := lk.Vintages(ctx, "stocks")
	if err != nil {
		t.Fatal(err)
	}
	var vs []lake.Vintage
	for _, v := range all {
		if v.Serving {
			vs = append(vs, v)
		}
	}
	if len(vs) != 3 {
		t.Fatalf("%d serving vintages, want 3: %+v", len(vs), all)
	}
	if err := lk.Tag(ctx, "stocks", vs[1], "q3-close"); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)

	c, err := companion.Start(companion.Config{Home: t.TempDir(), Port: 0, Server: hs.URL, Datasets: []string{"stocks"}})
	if err != nil {
		t.Fatal(err)
	}
	defer closeC(t, c)
	waitFor(t, "the current snapshot synced", func() bool {
		_, id, _, err := c.Store().State("stocks")
		return err == nil && id == vs[2].Snapshot
	})
	wantValue(t, c, 39.81, "MSFT", "2000-01", "2000-01", "asof="+vs[0].Snapshot)
	wantValue(t, c, 1000, "MSFT", "2000-01", "2000-01", "asof=q3-close")
	between := vs[1].CommittedAt.Truncate(time.Second).Add(time.Second)
	if !between.Before(vs[2].CommittedAt) {
		t.Fatalf("vintages too close: %v %v", vs[1].CommittedAt, vs[2].CommittedAt)
	}
	wantValue(t, c, 1000, "MSFT", "2000-01", "2000-01", "asof="+between.Format(time.RFC3339))
	wantValue(t, c, 2000, "MSFT", "2000-01", "2000-01", "asof="+vs[2].Snapshot)

	v, code, msg := calc(t, c, "ES.Revisions", "MSFT", "2000-01")
	if code != "" || len(v) != 4 || v[0][0] != "Vintage" {
		t.Fatalf("revisions: %v %s %s", v, code, msg)
	}
	for i, want := range []float64{39.81, 1000, 2000} {
		at := float64(vs[i].CommittedAt.Unix())/86400 + 25569
		// Within a second: comparing rounded decimals flips at a rounding
		// boundary (46357.3315625 vs 46357.331562499996).
		if got, ok := v[i+1][0].(float64); !ok || math.Abs(got-at) > 1.0/86400 || v[i+1][1] != want {
			t.Fatalf("revision %d: %v, want [%v %v]", i, v[i+1], at, want)
		}
	}

	_, code, msg = calc(t, c, "ES.Get", "MSFT", "asof=e9-s9-0123456789ab")
	if code != "#N/A" || !strings.HasPrefix(msg, "MSFT: vintage asof=e9-s9-0123456789ab: unknown vintage") {
		t.Fatalf("unknown vintage: %s %q", code, msg)
	}
	_, code, msg = calc(t, c, "ES.Get", "MSFT", "asof=2000-01-01")
	if code != "#N/A" || !strings.HasPrefix(msg, "MSFT: vintage asof=2000-01-01: before the first vintage") {
		t.Fatalf("before the first vintage: %s %q", code, msg)
	}
}
