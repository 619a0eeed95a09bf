package server_test

// Vintages end to end: a real lake (SQLite catalog in a temporary home),
// a real server publishing every snapshot into it, its HTTP API over a
// real listener, and a real sync client following a rollback.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/energyscope/energyscope/internal/wiring"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/cook"
	"github.com/energyscope/energyscope/server/lake"
	"github.com/energyscope/energyscope/sync/client"
	"github.com/energyscope/energyscope/sync/protocol"
)

var vintageOpts = cook.InputOptions{SeriesCol: "series", PeriodCol: "date", ValueCol: "value", Frequency: "D"}

// vintageCSV is the source of vintage i: series A over 10 days revised
// each vintage (day d = 100*i + d), B only from vintage 2 on, and day 9
// of A only from vintage 3 on.
func vintageCSV(t testing.TB, i int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("series,date,value\n")
	for d := range 10 {
		if d == 9 && i < 3 {
			continue
		}
		fmt.Fprintf(&b, "A,2026-09-%02d,%d\n", d+1, 100*i+d)
	}
	if i >= 2 {
		for d := range 3 {
			fmt.Fprintf(&b, "B,2026-09-%02d,%d\n", d+1, -i)
		}
	}
	p := filepath.Join(t.TempDir(), "v.csv")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type lakeFixture struct {
	t    *testing.T
	home string
	lk   *lake.Lake
	srv  *server.Server
	hs   *httptest.Server
}

func newLakeFixture(t *testing.T, o server.Options) *lakeFixture {
	t.Helper()
	f := &lakeFixture{t: t, home: t.TempDir()}
	lk, err := lake.Open(context.Background(), lake.Options{Home: f.home})
	if err != nil {
		t.Fatal(err)
	}
	f.lk = lk
	o.Home, o.Lake, o.CompactRows, o.CompactBytes = f.home, lk, -1, -1
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	f.srv, err = server.New(o)
	if err != nil {
		t.Fatal(err)
	}
	f.hs = httptest.NewServer(f.srv.Handler())
	t.Cleanup(func() {
		f.hs.CloseClientConnections()
		f.hs.Close()
		f.srv.Close()
		lk.Close()
	})
	return f
}

// get GETs path and decodes a JSON answer into v (if not nil); it
// returns the status and the body.
func (f *lakeFixture) get(path string, v any) (int, string) {
	f.t.Helper()
	req, _ := http.NewRequest("GET", f.hs.URL+path, nil)
	req.Header.Set("Accept", "application/json")
	return f.do(req, v)
}

func (f *lakeFixture) post(path, body string, v any) (int, string) {
	f.t.Helper()
	req, _ := http.NewRequest("POST", f.hs.URL+path, strings.NewReader(body))
	return f.do(req, v)
}

func (f *lakeFixture) do(req *http.Request, v any) (int, string) {
	f.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(b, v); err != nil {
			f.t.Fatalf("%s %s: %v: %s", req.Method, req.URL, err, b)
		}
	}
	return resp.StatusCode, string(b)
}

type seriesJSON struct {
	Series  string `json:"series"`
	Dataset string `json:"dataset"`
	Points  []struct {
		Period string  `json:"period"`
		Value  float64 `json:"value"`
	} `json:"points"`
	Vintage *lake.Vintage `json:"vintage"`
}

func (s seriesJSON) String() string { return fmt.Sprint(s.Points) }

// served is what GET /v1/series/{id} answered while a vintage was current.
type served struct {
	v    lake.Vintage
	a, b seriesJSON
	bOK  bool
}

func (f *lakeFixture) vintages() []lake.Vintage {
	f.t.Helper()
	var vs []lake.Vintage
	if code, body := f.get("/v1/datasets/pet/vintages", &vs); code != 200 {
		f.t.Fatalf("vintages: %d %s", code, body)
	}
	return vs
}

// publish makes n vintages: a PUT each, and one compaction of live rows
// after the second (a vintage of the same epoch); it returns what the
// server served after each.
func (f *lakeFixture) publish(n int) []served {
	f.t.Helper()
	var out []served
	record := func() {
		vs := f.vintages()
		s := served{v: vs[len(vs)-1]}
		if code, body := f.get("/v1/series/A", &s.a); code != 200 {
			f.t.Fatalf("get A: %d %s", code, body)
		}
		code, _ := f.get("/v1/series/B", &s.b)
		s.bOK = code == 200
		if h, _, _ := f.srv.Head("pet"); h.Snapshot != s.v.Snapshot {
			f.t.Fatalf("the lake's newest vintage %s is not the served snapshot %s", s.v.Snapshot, h.Snapshot)
		}
		out = append(out, s)
		time.Sleep(3 * time.Millisecond) // distinct commit times
	}
	for i := range n {
		if _, err := f.srv.Replace("pet", []string{vintageCSV(f.t, i)}, vintageOpts); err != nil {
			f.t.Fatal(err)
		}
		record()
		if i == 1 {
			day := time.Date(2026, 9, 5, 0, 0, 0, 0, time.UTC).Unix()
			if _, _, err := f.srv.Ingest("pet", []format.Record{{Op: format.Upsert, SeriesID: "A", Period: day, Value: 4242}}); err != nil {
				f.t.Fatal(err)
			}
			if _, err := f.srv.Compact("pet"); err != nil {
				f.t.Fatal(err)
			}
			record()
		}
	}
	return out
}

// TestAsOfOverHTTP: for each of 7 vintages (6 PUTs and a compaction),
// GET ?asof= by es id, by commit time and by tag equals what GET answered
// while that vintage was current; revisions list every value a period
// had; bad requests get their statuses and change nothing.
func TestAsOfOverHTTP(t *testing.T) {
	f := newLakeFixture(t, server.Options{})
	pub := f.publish(6)
	if len(pub) != 7 {
		t.Fatalf("%d vintages", len(pub))
	}
	if code, body := f.post("/v1/datasets/pet/tags", `{"vintage":"`+pub[2].v.Snapshot+`","name":"october"}`, nil); code != 201 {
		t.Fatalf("tag: %d %s", code, body)
	}
	for i, p := range pub {
		whens := []string{p.v.Snapshot, p.v.CommittedAt.Format(time.RFC3339Nano)}
		if i == 2 {
			whens = append(whens, "october")
		}
		for _, w := range whens {
			var got seriesJSON
			if code, body := f.get("/v1/series/A?asof="+url.QueryEscape(w), &got); code != 200 {
				t.Fatalf("vintage %d asof %s: %d %s", i, w, code, body)
			}
			if got.String() != p.a.String() || got.Vintage == nil || got.Vintage.Snapshot != p.v.Snapshot {
				t.Errorf("vintage %d asof %s:\n got %v (vintage %+v)\nwant %v", i, w, got, got.Vintage, p.a)
			}
			code, _ := f.get("/v1/series/B?asof="+url.QueryEscape(w), &got)
			if (code == 200) != p.bOK || (p.bOK && got.String() != p.b.String()) {
				t.Errorf("vintage %d B asof %s: %d %v, want %v %v", i, w, code, got, p.bOK, p.b)
			}
		}
	}
	// CSV carries the vintage in a header.
	resp, err := http.Get(f.hs.URL + "/v1/series/A?asof=" + pub[0].v.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("ES-Vintage") != pub[0].v.Snapshot || !strings.HasPrefix(string(body), "period,value\n2026-09-01,0\n") {
		t.Errorf("CSV as of vintage 0: %q %q", resp.Header.Get("ES-Vintage"), body)
	}

	// Revisions of A on 2026-09-05 over the 7 vintages, and of day 10,
	// which only later vintages have.
	var rev server.RevisionsAnswer
	if code, body := f.get("/v1/series/A/revisions?period=2026-09-05", &rev); code != 200 {
		t.Fatalf("revisions: %d %s", code, body)
	}
	want := []float64{4, 104, 4242, 204, 304, 404, 504}
	if len(rev.Revisions) != len(want) {
		t.Fatalf("%d revisions: %+v", len(rev.Revisions), rev)
	}
	for i, r := range rev.Revisions {
		if !r.Present || r.Value != want[i] || r.Vintage.Snapshot != pub[i].v.Snapshot {
			t.Errorf("revision %d: %+v, want %v of %s", i, r, want[i], pub[i].v.Snapshot)
		}
	}
	if code, body := f.get("/v1/series/A/revisions?period=2026-09-10", &rev); code != 200 || rev.Revisions[2].Present || !rev.Revisions[4].Present {
		t.Errorf("revisions of day 10: %d %s", code, body)
	}

	// Errors, each with its status; the vintages stay as they were.
	before := f.vintages()
	for _, tc := range []struct {
		path string
		code int
		says string
	}{
		{"/v1/series/A?asof=2001-01-01", 404, pub[0].v.Snapshot},
		{"/v1/series/A?asof=no-such-tag", 404, "no-such-tag"},
		{"/v1/series/A?asof=e9-s9-0123456789ab", 404, "e9-s9-0123456789ab"},
		{"/v1/series/A?asof=2026-13-45", 400, "2026-13-45"},
		{"/v1/series/A?asof=", 400, "as-of"},
		{"/v1/series/NOPE?asof=2030-01-01", 404, "NOPE"},
		{"/v1/series/A/revisions?period=soon", 400, "soon"},
		{"/v1/series/NOPE/revisions?period=2026-09-05", 404, "NOPE"},
		{"/v1/datasets/gas/vintages", 404, "gas"},
		{"/v1/datasets/pet/rollback?to=e9-s9-0123456789ab", 404, "cannot roll back"},
	} {
		code, body := f.get(tc.path, nil)
		if strings.Contains(tc.path, "rollback") {
			code, body = f.post(tc.path, "", nil)
		}
		if code != tc.code || !strings.Contains(body, tc.says) {
			t.Errorf("%s: %d %s, want %d naming %q", tc.path, code, body, tc.code, tc.says)
		}
	}
	if code, body := f.post("/v1/datasets/pet/tags", `{"vintage":"`+pub[3].v.Snapshot+`","name":"october"}`, nil); code != 400 {
		t.Errorf("a tag used twice: %d %s", code, body)
	}
	if after := f.vintages(); len(after) != len(before) {
		t.Errorf("errors changed the vintages: %d -> %d", len(before), len(after))
	}
}

// TestVintagesWithoutLake: a server without a lake answers 503.
func TestVintagesWithoutLake(t *testing.T) {
	srv, err := server.New(server.Options{Home: t.TempDir(), CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	for _, p := range []string{"/v1/series/A?asof=2026-10-01", "/v1/datasets/pet/vintages", "/v1/series/A/revisions?period=2026-10-01"} {
		resp, err := http.Get(hs.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 503 {
			t.Errorf("%s: %d, want 503", p, resp.StatusCode)
		}
	}
	if _, err := srv.Rollback(context.Background(), "pet", "2026-10-01"); !errors.Is(err, server.ErrNoLake) {
		t.Errorf("rollback without a lake: %v", err)
	}
}

// TestRollbackIsANewEpochCompanionsFollow: rolling back makes the
// vintage's rows current again as a new epoch in one lake commit; the
// pending records are dropped (and counted); a connected companion ends
// on the new epoch with the vintage's values.
func TestRollbackIsANewEpochCompanionsFollow(t *testing.T) {
	f := newLakeFixture(t, server.Options{})
	pub := f.publish(4)
	st, err := localcache.Open(t.TempDir(), &localcache.Options{CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	eng := client.New(wiring.Sink{Store: st}, client.Options{Server: f.hs.URL, Name: t.Name()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { eng.Run(ctx); close(done) }()
	defer func() { cancel(); <-done; st.Close() }()
	head, _, _ := f.srv.Head("pet")
	waitFor(t, "initial sync", func() bool {
		_, id, _, err := st.State("pet")
		return err == nil && id == head.Snapshot
	})
	// Two live rows the rollback will drop.
	day := time.Date(2026, 9, 2, 0, 0, 0, 0, time.UTC).Unix()
	if _, _, err := f.srv.Ingest("pet", []format.Record{{Op: format.Upsert, SeriesID: "A", Period: day, Value: -1}, {Op: format.Upsert, SeriesID: "C", Period: day, Value: 7}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "live rows", func() bool { p, v, err := st.Copy("A", day, day); return err == nil && len(p) == 1 && v[0] == -1 })

	before := f.vintages()
	target := pub[1] // the second PUT
	var res server.RollbackResult
	if code, body := f.post("/v1/datasets/pet/rollback?to="+target.v.Snapshot, "", &res); code != 200 {
		t.Fatalf("rollback: %d %s", code, body)
	}
	after := f.vintages()
	if len(after) != len(before)+1 {
		t.Fatalf("rollback made %d commits, want 1", len(after)-len(before))
	}
	nv := after[len(after)-1]
	newHead, _, _ := f.srv.Head("pet")
	if nv.Snapshot != res.Manifest.SnapshotID || newHead.Snapshot != nv.Snapshot || newHead.Epoch != head.Epoch+1 || nv.Epoch != newHead.Epoch {
		t.Fatalf("rollback: new vintage %+v, head %+v (was epoch %d), result %+v", nv, newHead, head.Epoch, res.Manifest.SnapshotID)
	}
	if res.From.Snapshot != target.v.Snapshot || res.Dropped != 2 || res.Manifest.Rows != target.v.Rows {
		t.Errorf("result %+v (from %s, dropped %d, rows %d), want from %s, 2 dropped, %d rows", res, res.From.Snapshot, res.Dropped, res.Manifest.Rows, target.v.Snapshot, target.v.Rows)
	}
	var now seriesJSON
	f.get("/v1/series/A", &now)
	if now.String() != target.a.String() {
		t.Errorf("after the rollback A is %v, want vintage 1's %v", now, target.a)
	}
	if code, _ := f.get("/v1/series/C", nil); code != 404 {
		t.Errorf("the dropped series C still answers %d", code)
	}
	// The companion follows the new epoch.
	waitFor(t, "companion on the new epoch", func() bool {
		ep, id, _, err := st.State("pet")
		return err == nil && ep == newHead.Epoch && id == newHead.Snapshot
	})
	p, v, err := st.Copy("A", 0, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != len(target.a.Points) || v[1] != target.a.Points[1].Value {
		t.Errorf("companion A %v, want %v", v, target.a)
	}
	if _, err := st.Info("C"); !errors.Is(err, localcache.ErrNotFound) {
		t.Errorf("the companion still has the dropped series C: %v", err)
	}
	// As of the rolled-back-to vintage still answers it; as of now, the
	// new vintage (same rows).
	var asof seriesJSON
	f.get("/v1/series/A?asof="+target.v.Snapshot, &asof)
	if asof.String() != target.a.String() || asof.Vintage.Snapshot != target.v.Snapshot {
		t.Errorf("as of the target after the rollback: %v %+v", asof, asof.Vintage)
	}
}

// TestRetentionKeepsTagsAndCurrent: with --keep-vintages 2 the publishes
// expire older vintages, except a tagged one; a rollback to an expired
// vintage is refused with nothing changed.
func TestRetentionKeepsTagsAndCurrent(t *testing.T) {
	f := newLakeFixture(t, server.Options{KeepVintages: 2})
	pub := f.publish(1)
	if code, body := f.post("/v1/datasets/pet/tags", `{"vintage":"`+pub[0].v.Snapshot+`","name":"first"}`, nil); code != 201 {
		t.Fatalf("tag: %d %s", code, body)
	}
	pub = append(pub, f.publish(4)...) // 5 more: PUT, PUT, compaction, PUT, PUT
	waitFor(t, "expiry", func() bool {
		res, err := f.srv.ExpireVintages(context.Background(), "pet")
		return err == nil && len(res.Expired) == 0 && len(f.vintages()) == 3
	})
	vs := f.vintages()
	var ids []string
	for _, v := range vs {
		ids = append(ids, v.Snapshot)
	}
	head, _, _ := f.srv.Head("pet")
	if !slices.Contains(ids, pub[0].v.Snapshot) || !slices.Contains(ids, head.Snapshot) {
		t.Fatalf("kept %v: want the tagged %s and the current %s", ids, pub[0].v.Snapshot, head.Snapshot)
	}
	// Vintage 2 expired: as-of and rollback refuse it, nothing changes.
	expired := pub[2].v.Snapshot
	if slices.Contains(ids, expired) {
		t.Fatalf("vintage %s was kept: %v", expired, ids)
	}
	if code, body := f.get("/v1/series/A?asof="+expired, nil); code != 404 || !strings.Contains(body, expired) {
		t.Errorf("as of an expired vintage: %d %s", code, body)
	}
	if code, body := f.post("/v1/datasets/pet/rollback?to="+expired, "", nil); code != 404 || !strings.Contains(body, "cannot roll back") {
		t.Errorf("rollback to an expired vintage: %d %s", code, body)
	}
	if h, _, _ := f.srv.Head("pet"); h != head {
		t.Errorf("a refused rollback changed the head: %+v -> %+v", head, h)
	}
	if n := len(f.vintages()); n != 3 {
		t.Errorf("a refused rollback changed the vintages: %d", n)
	}
	// The tagged one still reads as it was served.
	var got seriesJSON
	if code, _ := f.get("/v1/series/A?asof=first", &got); code != 200 || got.String() != pub[0].a.String() {
		t.Errorf("as of the tagged vintage: %d %v, want %v", code, got, pub[0].a)
	}
}

// TestSyncVintageMessages: over a real websocket, a version 3 client
// resolves a vintage, fetches its files by the vintage's es id (streamed
// from the lake's mapping; each verifies against the manifest), asks for
// revisions, and gets typed errors with its request ids; a version 2
// client on the same server keeps working.
func TestSyncVintageMessages(t *testing.T) {
	f := newLakeFixture(t, server.Options{})
	pub := f.publish(3)
	wsURL := "ws" + strings.TrimPrefix(f.hs.URL, "http") + "/v1/sync"
	ws, _, err := websocket.DefaultDialer.Dial(wsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	send := func(m *protocol.Message) {
		t.Helper()
		if err := ws.WriteMessage(websocket.TextMessage, m.Encode()); err != nil {
			t.Fatal(err)
		}
	}
	// next reads until a control message of one of the types.
	next := func(types ...string) *protocol.Message {
		t.Helper()
		ws.SetReadDeadline(time.Now().Add(30 * time.Second))
		for {
			kind, b, err := ws.ReadMessage()
			if err != nil {
				t.Fatal(err)
			}
			if kind != websocket.TextMessage {
				continue
			}
			m, err := protocol.DecodeMessage(b)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(types, m.Type) {
				return m
			}
		}
	}
	send(&protocol.Message{Type: protocol.THello, Proto: []int{2, 3}, Client: "v3"})
	if w := next(protocol.TWelcome); w.Version != 3 {
		t.Fatalf("welcome version %d", w.Version)
	}
	old := pub[0].v // not the current snapshot: not in the store's retained files
	send(&protocol.Message{Type: protocol.TVintage, Req: 7, Dataset: "pet", AsOf: old.CommittedAt.Format(time.RFC3339Nano)})
	ans := next(protocol.TVintage, protocol.TError)
	if ans.Type != protocol.TVintage || ans.Req != 7 || ans.Vintage.Snapshot != old.Snapshot || ans.Manifest.SnapshotID != old.Snapshot {
		t.Fatalf("vintage answer %+v", ans)
	}
	// Fetch every file of the vintage and check it against the manifest.
	// The store no longer keeps that snapshot (Keep 2): its data.arrow
	// (the revised values) comes out of the lake.
	if fl, err := f.srv.OpenFile("pet", ans.Manifest.File(format.DataFile).SHA256); err == nil {
		fl.Close()
		t.Fatal("the store still has data.arrow of vintage 0: the fetch would not read the lake")
	}
	for _, fi := range ans.Manifest.Files {
		send(&protocol.Message{Type: protocol.TFetch, Dataset: "pet", Snapshot: old.Snapshot, File: fi.Name, SHA256: fi.SHA256})
		var data []byte
		ws.SetReadDeadline(time.Now().Add(30 * time.Second))
		for done := false; !done; {
			kind, b, err := ws.ReadMessage()
			if err != nil {
				t.Fatal(err)
			}
			if kind == websocket.BinaryMessage {
				if c, err := protocol.DecodeBinary(b); err == nil {
					if ch, ok := c.(*protocol.Chunk); ok && hex.EncodeToString(ch.SHA256[:]) == fi.SHA256 {
						data = append(data[:ch.Offset], ch.Data...)
					}
				}
				continue
			}
			m, err := protocol.DecodeMessage(b)
			if err != nil {
				t.Fatal(err)
			}
			switch m.Type {
			case protocol.TFileEnd:
				done = m.SHA256 == fi.SHA256
			case protocol.TError:
				t.Fatalf("fetch %s: %+v", fi.Name, m)
			}
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != fi.SHA256 || int64(len(data)) != fi.Size {
			t.Fatalf("%s: %d bytes, sha %x; manifest %d %s", fi.Name, len(data), sum, fi.Size, fi.SHA256)
		}
	}
	send(&protocol.Message{Type: protocol.TRevisions, Req: 8, Dataset: "pet", Series: "A", Period: "2026-09-05"})
	rev := next(protocol.TRevisions, protocol.TError)
	if rev.Req != 8 || len(rev.Revisions) != len(pub) || rev.Revisions[0].Value != 4 || rev.Revisions[len(pub)-1].Value != 204 {
		t.Fatalf("revisions answer %+v", rev)
	}
	for req, m := range map[uint64]*protocol.Message{
		11: {Type: protocol.TVintage, Dataset: "pet", AsOf: "2001-01-01"},
		12: {Type: protocol.TVintage, Dataset: "pet", AsOf: "no-such-tag"},
		13: {Type: protocol.TVintage, Dataset: "gas", AsOf: "2030-01-01"},
		14: {Type: protocol.TRevisions, Dataset: "pet", Series: "NOPE", Period: "2026-09-05"},
	} {
		m.Req = req
		send(m)
		e := next(protocol.TError)
		want := map[uint64]protocol.Code{11: protocol.ErrorBeforeFirstVintage, 12: protocol.ErrorUnknownVintage, 13: protocol.ErrorUnknownDataset, 14: protocol.ErrorUnknownSeries}[req]
		if e.Req != req || e.Code != want {
			t.Errorf("req %d: error %+v, want code %s", req, e, want)
		}
	}
	// A version 2 client on the same server: welcome 2 and a normal sync.
	ws2, _, err := websocket.DefaultDialer.Dial(wsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws2.Close()
	ws2.WriteMessage(websocket.TextMessage, (&protocol.Message{Type: protocol.THello, Proto: []int{2, 2}, Client: "v2", Subs: []protocol.Sub{{Dataset: "pet"}}}).Encode())
	ws2.SetReadDeadline(time.Now().Add(30 * time.Second))
	var types []string
	for len(types) < 2 {
		_, b, err := ws2.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		m, err := protocol.DecodeMessage(b)
		if err != nil {
			t.Fatal(err)
		}
		if m.Type == protocol.TWelcome && m.Version != 2 {
			t.Fatalf("version 2 client got version %d", m.Version)
		}
		types = append(types, m.Type)
	}
	if types[0] != protocol.TWelcome || types[1] != protocol.TSnapshot {
		t.Errorf("version 2 client got %v", types)
	}
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCatalogUnreachable: when the lake's catalog cannot be read (here:
// its connection closed underneath the server), listing, tagging and
// rolling back answer 503 naming the lake and change nothing, while the
// snapshot in service and an as-of read of a vintage already mapped keep
// answering.
func TestCatalogUnreachable(t *testing.T) {
	f := newLakeFixture(t, server.Options{})
	pub := f.publish(2)
	var before seriesJSON
	if code, _ := f.get("/v1/series/A?asof="+pub[0].v.Snapshot, &before); code != 200 {
		t.Fatalf("as of: %d", code)
	}
	head, _, _ := f.srv.Head("pet")
	f.lk.Close()
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/datasets/pet/vintages", ""},
		{"POST", "/v1/datasets/pet/tags", `{"vintage":"` + pub[0].v.Snapshot + `","name":"t"}`},
		{"POST", "/v1/datasets/pet/rollback?to=" + pub[0].v.Snapshot, ""},
	} {
		req, _ := http.NewRequest(tc.method, f.hs.URL+tc.path, strings.NewReader(tc.body))
		code, body := f.do(req, nil)
		if code != 503 || !strings.Contains(body, "lake") {
			t.Errorf("%s %s with the catalog gone: %d %s, want 503 naming the lake", tc.method, tc.path, code, body)
		}
	}
	if h, _, _ := f.srv.Head("pet"); h != head {
		t.Errorf("the head changed: %+v -> %+v", head, h)
	}
	var now seriesJSON
	if code, _ := f.get("/v1/series/A", &now); code != 200 || now.String() != pub[len(pub)-1].a.String() {
		t.Errorf("current read with the catalog gone: %d %v", code, now)
	}
	var again seriesJSON
	if code, body := f.get("/v1/series/A?asof="+pub[0].v.Snapshot, &again); code != 200 || again.String() != before.String() {
		t.Errorf("as of a mapped vintage with the catalog gone: %d %s", code, body)
	}
}
