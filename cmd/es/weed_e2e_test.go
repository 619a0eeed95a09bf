package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/internal/testpg"
	"github.com/energyscope/energyscope/internal/testweed"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/lake"
)

// TestServeWeedLake: a real es serve whose lake is SeaweedFS on loopback
// (internal/testweed): its Iceberg REST catalog (--catalog, the
// credential from ES_CATALOG_CREDENTIAL) and an s3:// warehouse
// (--warehouse, --s3-endpoint, the AWS_* credentials). A server with a
// wrong catalog credential reports its catalog unreachable and refuses
// PUTs. Two PUTs of a
// dataset are two vintages whose files lie in the bucket and nowhere in
// the home but the download cache; GET answers the current one and
// ?asof= the older (by es snapshot id and by time); es vintages with the
// same flags lists both; a companion syncs the dataset; after a SIGKILL
// and with the download cache removed, the restarted server serves the
// same snapshot downloaded from the lake, the as-of read included; the
// companion follows a third PUT.
func TestServeWeedLake(t *testing.T) {
	skipE2E(t)
	w := testweed.Start(t)
	w.Setenv(t) // the es children inherit the environment
	lakeArgs := []string{"--catalog", w.Catalog, "--warehouse", w.RESTWarehouse(), "--s3-endpoint", w.S3}

	// A wrong catalog credential: the server starts, says in /healthz that
	// its catalog is unreachable and why, refuses a PUT with 503, and
	// nothing reaches the bucket.
	t.Setenv(lake.EnvCatalogCredential, w.AccessKey+":wrong")
	bad := newE2EServer(t, t.TempDir())
	bad.extraArgs = lakeArgs
	bad.start("127.0.0.1:0")
	var health server.Health
	if _, b, err := bad.do("GET", "/healthz", bad.read, "", nil); err != nil || json.Unmarshal(b, &health) != nil {
		t.Fatalf("healthz: %v %s", err, b)
	}
	if health.Lake == nil || health.Lake.Catalog != server.CatalogUnreachable || health.Lake.Error == "" {
		t.Fatalf("healthz with a wrong catalog credential: %+v", health.Lake)
	}
	t.Logf("wrong credential: /healthz lake.error %q", health.Lake.Error)
	if code, b, err := bad.do("PUT", "/v1/datasets/stocks?series_col=symbol&period_col=date&value_col=price&frequency=M", bad.write, "text/csv", []byte("symbol,date,price\nMSFT,2000-01-01,1\n")); err != nil || code != 503 {
		t.Fatalf("PUT with a wrong catalog credential: %d %v %s, want 503", code, err, b)
	}
	if objs, err := w.Objects(w.TableBucket, ""); err != nil || len(objs) != 0 {
		t.Fatalf("bucket after the refused PUT: %v %v", objs, err)
	}
	bad.p.kill()
	t.Setenv(lake.EnvCatalogCredential, w.Credential())

	home := t.TempDir()
	s := newE2EServer(t, home)
	s.extraArgs = lakeArgs
	s.start("127.0.0.1:0")

	csv, err := os.ReadFile("../../server/cook/samples/stocks.csv")
	if err != nil {
		t.Fatal(err)
	}
	put := func(scale float64) headJSON {
		t.Helper()
		var b bytes.Buffer
		for i, line := range strings.Split(strings.TrimSpace(string(csv)), "\n") {
			if i > 0 {
				f := strings.Split(line, ",")
				v, err := strconv.ParseFloat(f[2], 64)
				if err != nil {
					t.Fatal(err)
				}
				line = fmt.Sprintf("%s,%s,%g", f[0], f[1], v*scale)
			}
			b.WriteString(line + "\n")
		}
		code, body, err := s.do("PUT", "/v1/datasets/stocks?series_col=symbol&period_col=date&value_col=price&frequency=M", s.write, "text/csv", b.Bytes())
		if err != nil || code != 200 {
			t.Fatalf("PUT: %d %v %s", code, err, body)
		}
		return s.head("stocks")
	}
	get := func(query string) (values map[string]float64, vintage string) {
		t.Helper()
		req, err := http.NewRequest("GET", s.url+"/v1/series/MSFT?from=2000-01-01&to=2001-12-31"+query, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+s.read)
		req.Header.Set("Accept", "application/json")
		resp, err := s.httpc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET MSFT%s: %s %v %s", query, resp.Status, err, b)
		}
		var out struct {
			Points []struct {
				Period string  `json:"period"`
				Value  float64 `json:"value"`
			} `json:"points"`
			Vintage *struct {
				Snapshot string `json:"snapshot"`
			} `json:"vintage"`
		}
		if err := json.Unmarshal(b, &out); err != nil || len(out.Points) == 0 {
			t.Fatalf("GET MSFT%s: %v %s", query, err, lastBytes(string(b), 400))
		}
		values = map[string]float64{}
		for _, p := range out.Points {
			values[p.Period] = p.Value
		}
		if out.Vintage != nil {
			vintage = out.Vintage.Snapshot
		}
		return values, vintage
	}
	same := func(what string, got, want map[string]float64, scale float64) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d points, want %d", what, len(got), len(want))
		}
		for p, v := range want {
			if g := got[p]; g != v*scale {
				t.Fatalf("%s: %s = %v, want %v", what, p, g, v*scale)
			}
		}
	}

	h1 := put(1)
	v1, _ := get("")
	h2 := put(2)
	if h2.Snapshot == h1.Snapshot {
		t.Fatalf("the second PUT did not make a new snapshot: %+v", h2)
	}
	cur, _ := get("")
	same("after the second PUT", cur, v1, 2)
	byID, vin := get("&asof=" + h1.Snapshot)
	same("as of the first snapshot", byID, v1, 1)
	if vin != h1.Snapshot {
		t.Fatalf("as-of answer names vintage %q, want %s", vin, h1.Snapshot)
	}

	// The lake: es vintages (a separate process, the same flags) lists both
	// PUTs; as of the first one's commit time answers its values.
	var vs []lake.Vintage
	out := mustES(t, append([]string{"vintages", "--home", home, "--dataset", "stocks", "--json"}, lakeArgs...)...)
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		t.Fatalf("es vintages --json: %v\n%s", err, out)
	}
	if len(vs) != 2 || vs[0].Snapshot != h1.Snapshot || vs[1].Snapshot != h2.Snapshot {
		t.Fatalf("vintages %+v, want %s then %s", vs, h1.Snapshot, h2.Snapshot)
	}
	byTime, _ := get("&asof=" + vs[0].CommittedAt.Format(time.RFC3339Nano))
	same("as of the first commit's time", byTime, v1, 1)
	// es get --asof reads the remote lake itself (beside the running
	// server): the first vintage's January 2000.
	jan := fmt.Sprint(v1["2000-01-01"])
	if got := mustES(t, append([]string{"get", "--home", home, "--asof", h1.Snapshot, "MSFT", "2000-01", "2000-01"}, lakeArgs...)...); !strings.Contains(got, ","+jan+"\n") {
		t.Fatalf("es get --asof %s MSFT 2000-01:\n%s\nwant the value %s", h1.Snapshot, got, jan)
	}
	// Its files are in the bucket: data, manifests, metadata and one
	// Puffin file per vintage; the home has no warehouse.
	objs, err := w.Objects(w.TableBucket, "")
	if err != nil {
		t.Fatal(err)
	}
	puffins := 0
	for _, o := range objs {
		if strings.HasSuffix(o, ".puffin") || strings.HasSuffix(o, ".stats") {
			puffins++
		}
	}
	if puffins != 2 {
		t.Fatalf("bucket holds %d Puffin files, want 2: %v", puffins, objs)
	}
	if _, err := os.Stat(filepath.Join(home, lake.Dir, lake.WarehouseDir)); !os.IsNotExist(err) {
		t.Fatalf("the home has a local warehouse: %v", err)
	}

	c := newE2ECompanion(t, "companion", s.url, s.read)
	c.start()
	c.waitState("stocks", h2.Snapshot, h2.Seq, 60*time.Second)

	// A crash; the cache gone: the restart downloads from the lake.
	s.p.kill()
	if err := os.RemoveAll(filepath.Join(home, lake.Dir, lake.CacheDir)); err != nil {
		t.Fatal(err)
	}
	s.start(s.addr)
	if h := s.head("stocks"); h.Snapshot != h2.Snapshot || h.Epoch != h2.Epoch {
		t.Fatalf("after the restart serving %+v, want %+v", h, h2)
	}
	cur, _ = get("")
	same("after the restart", cur, v1, 2)
	byID, _ = get("&asof=" + h1.Snapshot)
	same("as of the first snapshot after the restart", byID, v1, 1)
	if ents, _ := os.ReadDir(filepath.Join(home, lake.Dir, lake.CacheDir)); len(ents) == 0 {
		t.Fatal("the restarted server serves without having downloaded from the lake")
	}

	h3 := put(3)
	c.waitState("stocks", h3.Snapshot, h3.Seq, 60*time.Second)
	if got := mustES(t, "get", "--home", c.home, "MSFT", "2000-01", "2000-01"); !strings.Contains(got, fmt.Sprint(v1["2000-01-01"]*3)) {
		t.Fatalf("the companion's es get MSFT after the third PUT:\n%s\nwant %v", got, v1["2000-01-01"]*3)
	}
}

// TestServeWeedLakeDown: SeaweedFS (catalog and warehouse at once) killed
// under a running es serve: lookups keep answering from the mapped
// snapshot, /healthz says the catalog is unreachable, a PUT answers 503
// and changes nothing; a server restarted while SeaweedFS is still down
// serves the same snapshot from its verified download; once SeaweedFS is
// back the next PUT publishes and serves.
func TestServeWeedLakeDown(t *testing.T) {
	skipE2E(t)
	w := testweed.Start(t)
	w.Setenv(t)
	home := t.TempDir()
	s := newE2EServer(t, home)
	s.extraArgs = []string{"--catalog", w.Catalog, "--warehouse", w.RESTWarehouse(), "--s3-endpoint", w.S3}
	s.start("127.0.0.1:0")
	const query = "?series_col=symbol&period_col=date&value_col=price&frequency=M"
	put := func(body string) (int, []byte) {
		t.Helper()
		code, b, err := s.do("PUT", "/v1/datasets/stocks"+query, s.write, "text/csv", []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return code, b
	}
	series := func() string {
		t.Helper()
		code, b, err := s.do("GET", "/v1/series/MSFT?from=2000-01-01&to=2030-01-01", s.read, "", nil)
		if err != nil || code != 200 {
			t.Fatalf("GET MSFT: %d %v %s", code, err, b)
		}
		return string(b)
	}
	catalog := func() server.CatalogState {
		t.Helper()
		var h server.Health
		if _, b, err := s.do("GET", "/healthz", s.read, "", nil); err != nil || json.Unmarshal(b, &h) != nil || h.Lake == nil {
			t.Fatalf("healthz: %v %s", err, b)
		}
		return h.Lake.Catalog
	}
	if code, b := put("symbol,date,price\nMSFT,2000-01-01,10\nMSFT,2000-02-01,11\n"); code != 200 {
		t.Fatalf("PUT: %d %s", code, b)
	}
	want, head := series(), s.head("stocks")

	w.Kill()
	if got := series(); got != want {
		t.Fatalf("with SeaweedFS down: %s, want %s", got, want)
	}
	if st := catalog(); st != server.CatalogUnreachable {
		t.Fatalf("healthz lake.catalog %q with SeaweedFS down", st)
	}
	if code, b := put("symbol,date,price\nMSFT,2000-01-01,20\n"); code != 503 {
		t.Fatalf("PUT with SeaweedFS down: %d %s, want 503", code, b)
	}
	if h := s.head("stocks"); h.Snapshot != head.Snapshot || series() != want {
		t.Fatalf("the refused PUT changed what is served: %+v", h)
	}

	s.p.kill()
	s.start(s.addr)
	if got := series(); got != want {
		t.Fatalf("restarted with SeaweedFS down: %s, want %s", got, want)
	}
	if h := s.head("stocks"); h.Snapshot != head.Snapshot {
		t.Fatalf("restarted with SeaweedFS down: serving %+v, want %+v", h, head)
	}

	w.Restart()
	if code, b := put("symbol,date,price\nMSFT,2000-01-01,30\n"); code != 200 {
		t.Fatalf("PUT with SeaweedFS back: %d %s", code, b)
	}
	if got := series(); !strings.Contains(got, "30") || got == want {
		t.Fatalf("after the PUT with SeaweedFS back: %s", got)
	}
	if st := catalog(); st != server.CatalogReachable {
		t.Fatalf("healthz lake.catalog %q with SeaweedFS back", st)
	}
}

// TestServeWeedReplicas: two es serve processes, each with its own home,
// share one lake and nothing else: SeaweedFS's REST catalog and S3, or
// PostgreSQL (internal/testpg) as the catalog over SeaweedFS's S3. A PUT
// on one is served by the other within 5 s (it follows the lake's head and
// downloads the vintage from the bucket), with the same answer; then the
// other way round.
func TestServeWeedReplicas(t *testing.T) {
	skipE2E(t)
	t.Run("REST", func(t *testing.T) {
		w := testweed.Start(t)
		w.Setenv(t)
		weedReplicas(t, []string{"--catalog", w.Catalog, "--warehouse", w.RESTWarehouse(), "--s3-endpoint", w.S3})
	})
	t.Run("Postgres", func(t *testing.T) {
		w := testweed.Start(t)
		pg := testpg.Start(t)
		w.Setenv(t)
		weedReplicas(t, []string{"--catalog", pg.URI, "--warehouse", w.Warehouse("wh"), "--s3-endpoint", w.S3})
	})
}

func weedReplicas(t *testing.T, lakeArgs []string) {
	var rs []*e2eServer
	for range 2 {
		s := newE2EServer(t, t.TempDir())
		s.extraArgs = lakeArgs
		s.start("127.0.0.1:0")
		rs = append(rs, s)
	}
	series := func(s *e2eServer) string {
		t.Helper()
		code, b, err := s.do("GET", "/v1/series/MSFT?from=2000-01-01&to=2030-01-01", s.read, "", nil)
		if err != nil || code != 200 {
			t.Fatalf("GET MSFT: %d %v %s", code, err, b)
		}
		return string(b)
	}
	for i, v := range []string{"10", "20"} {
		from, to := rs[i], rs[1-i]
		cached := func() int {
			ents, _ := os.ReadDir(filepath.Join(to.home, lake.Dir, lake.CacheDir))
			return len(ents)
		}
		before := cached()
		code, b, err := from.do("PUT", "/v1/datasets/stocks?series_col=symbol&period_col=date&value_col=price&frequency=M", from.write, "text/csv",
			[]byte("symbol,date,price\nMSFT,2000-01-01,"+v+"\n"))
		if err != nil || code != 200 {
			t.Fatalf("PUT on replica %d: %d %v %s", i, code, err, b)
		}
		want := from.head("stocks")
		deadline := time.Now().Add(5 * time.Second)
		for {
			code, b, err := to.do("GET", "/v1/datasets", to.read, "", nil)
			if err == nil && code == 200 && strings.Contains(string(b), want.Snapshot) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %d does not serve %s 5 s after the PUT on replica %d: %s", 1-i, want.Snapshot, i, b)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if a, b := series(from), series(to); a != b || !strings.Contains(b, ","+v) {
			t.Fatalf("after the PUT on replica %d: replica %d answers %q, replica %d %q", i, i, a, 1-i, b)
		}
		if n := cached(); n <= before {
			t.Fatalf("replica %d serves %s without a download from the bucket (%d cached files, %d before)", 1-i, want.Snapshot, n, before)
		}
	}
}
