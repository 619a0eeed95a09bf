package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/deltalog"
	"github.com/energyscope/energyscope/server/lake"
)

// postKey posts one row per value of rows (series KILL.<batch>) under an
// idempotency key and returns the seqs the server acknowledged.
func (s *e2eServer) postKey(ds, key string, batch, n int) (first, last uint64, err error) {
	var b strings.Builder
	b.WriteString(`{"rows":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"series_id":"KILL.%d","period":"2031-01-%02d","value":%d,"frequency":"D"}`, batch%7, i+1, batch*1000+i)
	}
	b.WriteString(`]}`)
	code, body, err := s.doKey("POST", "/v1/datasets/"+ds+"/rows", key, []byte(b.String()))
	if err != nil {
		return 0, 0, err
	}
	if code != 200 {
		return 0, 0, fmt.Errorf("post rows: %d %s", code, body)
	}
	var ack struct {
		FirstSeq uint64 `json:"first_seq"`
		LastSeq  uint64 `json:"last_seq"`
	}
	err = json.Unmarshal(body, &ack)
	return ack.FirstSeq, ack.LastSeq, err
}

func (s *e2eServer) doKey(method, path, key string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(method, s.url+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.write)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(server.IdempotencyHeader, key)
	resp, err := s.httpc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// TestServeKill9MidIngest (issue 13): kill -9 of es serve, with its
// embedded JetStream node, while a writer posts batches under
// idempotency keys. After each restart the writer retries the batch that
// was in flight with its key. At the end the delta log holds every
// acknowledged batch once, at the seqs it was acknowledged with, the
// retried ones once, seqs contiguous; the server serves the last rows
// after another restart (replayed from the log).
func TestServeKill9MidIngest(t *testing.T) {
	home := t.TempDir()
	cookStocks(t, home)
	srv := newE2EServer(t, home)
	srv.start("127.0.0.1:0")
	defer func() { srv.p.kill() }()

	const rounds, perBatch = 5, 20
	type ackd struct{ first, last uint64 }
	acked := map[int]ackd{} // batch -> seqs
	batch := 0
	for round := range rounds {
		var mu sync.Mutex
		stop := make(chan struct{})
		done := make(chan int) // the batch in flight when the server died
		go func() {
			for {
				select {
				case <-stop:
					done <- -1
					return
				default:
				}
				f, l, err := srv.postKey("stocks", fmt.Sprintf("kill-%d", batch), batch, perBatch)
				if err != nil {
					done <- batch
					return
				}
				mu.Lock()
				acked[batch] = ackd{f, l}
				mu.Unlock()
				batch++
			}
		}()
		// Let some batches through, then kill -9 mid-stream.
		deadline := time.Now().Add(20 * time.Second)
		for {
			mu.Lock()
			n := len(acked)
			mu.Unlock()
			if n >= (round+1)*15 || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		srv.p.kill()
		inFlight := <-done
		close(stop)
		if inFlight < 0 {
			t.Fatal("the writer stopped before the kill")
		}
		srv.start(srv.addr)
		// The retry of the batch in flight, with its key: stored at most once.
		f, l, err := srv.postKey("stocks", fmt.Sprintf("kill-%d", inFlight), inFlight, perBatch)
		if err != nil {
			t.Fatalf("round %d: retry of batch %d: %v", round, inFlight, err)
		}
		acked[inFlight] = ackd{f, l}
		// A second retry answers the same seqs.
		if f2, l2, err := srv.postKey("stocks", fmt.Sprintf("kill-%d", inFlight), inFlight, perBatch); err != nil || f2 != f || l2 != l {
			t.Fatalf("round %d: second retry: %d..%d, %v; first %d..%d", round, f2, l2, err, f, l)
		}
		batch = inFlight + 1
	}
	srv.p.kill()

	// The log, read with no server running: every acknowledged batch
	// once at its seqs, contiguous from 1.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := server.ReadHomeLog(ctx, home, "stocks", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(acked)*perBatch {
		t.Fatalf("the log holds %d records, %d batches of %d were acknowledged", len(recs), len(acked), perBatch)
	}
	seen := map[int]int{}
	for i, r := range recs {
		if r.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d: not contiguous", i, r.Seq)
		}
		b := int(r.Value) / 1000
		seen[b]++
		a, ok := acked[b]
		if !ok || r.Seq < a.first || r.Seq > a.last || math.Mod(r.Value, 1000) != float64(r.Seq-a.first) {
			t.Fatalf("seq %d holds batch %d row %v; the batch was acknowledged as %+v (ok %v)", r.Seq, b, math.Mod(r.Value, 1000), a, ok)
		}
	}
	for b := range acked {
		if seen[b] != perBatch {
			t.Fatalf("batch %d: %d records in the log, want %d", b, seen[b], perBatch)
		}
	}
	// Restarted, the server serves the rows from the log.
	srv.start(srv.addr)
	last := batch - 1
	code, body, err := srv.do("GET", fmt.Sprintf("/v1/series/KILL.%d?from=2031-01-01&to=2031-01-31", last%7), srv.read, "", nil)
	if err != nil || code != 200 || !strings.Contains(string(body), fmt.Sprintf("2031-01-%02d,%d\n", perBatch, last*1000+perBatch-1)) {
		t.Fatalf("KILL.%d after the restart: %d %v %s", last%7, code, err, body)
	}
	if _, err := os.Stat(home + "/datasets/stocks/wal"); err == nil {
		t.Fatal("the server wrote a write-ahead log")
	}
}

// checkCookedVintage: the lake's current vintage of dataset is the
// snapshot the home's CURRENT names, cooked straight into its Puffin file
// (the writer's order: the manifest last), with no directory of it in
// the home.
func checkCookedVintage(t *testing.T, home, dataset string) {
	t.Helper()
	ctx := context.Background()
	l, err := lake.Open(ctx, lake.DefaultOptions(home))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	v, err := l.Current(ctx, dataset)
	if err != nil {
		t.Fatal(err)
	}
	dsDir := filepath.Join(home, "datasets", dataset)
	if id, err := format.ReadCurrent(dsDir); err != nil || id != v.Snapshot {
		t.Fatalf("CURRENT %s (%v), the lake's head %s", id, err, v.Snapshot)
	}
	if _, err := os.Stat(filepath.Join(dsDir, format.SnapshotsDir, v.Snapshot)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a directory of %s in the home: %v", v.Snapshot, err)
	}
	si, err := l.Artifacts(ctx, dataset, v)
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := si.Blob(format.ManifestFile)
	for _, b := range si.Blobs {
		if b.Offset > mb.Offset {
			t.Fatalf("%s lies after the manifest in %s: copied from a directory, not cooked in place", b.File, si.Location)
		}
	}
}

// TestServerHomeCommands (issue 13): es put, get, compact and cook on a
// server home whose server is stopped go through its delta log (they
// start its embedded node): put logs rows at the log's next seqs, get
// shows them, compact folds them and trims, cook starts an epoch above
// every seq the log handed out (both cooked straight into the lake), and
// the server started again continues from there.
func TestServerHomeCommands(t *testing.T) {
	home := t.TempDir()
	cookStocks(t, home)
	srv := newE2EServer(t, home)
	srv.start("127.0.0.1:0")
	if last, err := srv.post("stocks", []tickRow{tickRowN(0)}); err != nil || last != 1 {
		t.Fatalf("post: %d, %v", last, err)
	}
	srv.p.kill() // its client-url file is stale now

	upd := filepath.Join(t.TempDir(), "upd.csv")
	os.WriteFile(upd, []byte("series_id,period,value\nMSFT,2031-02-01,42\n"), 0o644)
	if out := mustES(t, "put", "--home", home, "--dataset", "stocks", upd); !strings.Contains(out, "seq 2..2") {
		t.Fatalf("es put on a server home: %q", out)
	}
	if got := mustES(t, "get", "--home", home, "MSFT", "2031"); !strings.Contains(got, "2031-02-01,42\n") {
		t.Fatalf("es get after es put: %q", got)
	}
	if got := mustES(t, "get", "--home", home, "TICK.0"); !strings.Contains(got, "2030-01-01,0.25\n") {
		t.Fatalf("es get of the served row: %q", got)
	}
	if out := mustES(t, "compact", "--home", home); !strings.Contains(out, "covers seq 2 ") {
		t.Fatalf("es compact on a server home: %q", out)
	}
	checkCookedVintage(t, home, "stocks")
	if out := mustES(t, "put", "--home", home, "--dataset", "stocks", upd); !strings.Contains(out, "seq 3..3") {
		t.Fatalf("es put after the compaction: %q", out)
	}
	cookStocks(t, home) // a new epoch over the logged rows
	ep, _, seq, err := homeState(home, "stocks")
	if err != nil || ep != 2 || seq != 3 {
		t.Fatalf("after es cook: epoch %d seq %d, %v; want epoch 2 at seq 3 (every logged seq)", ep, seq, err)
	}
	checkCookedVintage(t, home, "stocks")
	if got := mustES(t, "get", "--home", home, "MSFT", "2031"); strings.Contains(got, "2031-02-01") {
		t.Fatalf("a row of the old epoch came back after es cook: %q", got)
	}
	srv.start(srv.addr)
	if last, err := srv.post("stocks", []tickRow{tickRowN(1)}); err != nil || last != 4 {
		t.Fatalf("post after es cook: %d, %v; want seq 4", last, err)
	}
}

// TestServeExternalNats: es serve --nats uses the given JetStream server
// for the delta log (no node in the home): the rows posted are in its
// stream at the seqs acknowledged, and a second server on another home
// with the same --nats serves them.
func TestServeExternalNats(t *testing.T) {
	node, err := deltalog.StartNode(deltalog.NodeOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Shutdown()
	homes := []string{t.TempDir(), t.TempDir()}
	var srvs []*e2eServer
	for _, home := range homes {
		cookStocks(t, home)
		s := newE2EServer(t, home)
		s.extraArgs = []string{"--nats", node.ClientURL()}
		s.start("127.0.0.1:0")
		defer s.p.kill()
		srvs = append(srvs, s)
	}
	last, err := srvs[0].post("stocks", []tickRow{tickRowN(0), tickRowN(1)})
	if err != nil || last != 2 {
		t.Fatalf("post: %d, %v", last, err)
	}
	if _, err := os.Stat(filepath.Join(homes[0], server.NatsDir)); err == nil {
		t.Fatal("es serve --nats started a node in its home")
	}
	l, err := deltalog.Connect(node.ClientURL(), deltalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := l.Read(ctx, "stocks", 1)
	if err != nil || len(recs) != 2 || recs[1].Seq != 2 || recs[1].SeriesID != "TICK.1" {
		t.Fatalf("the external log: %+v, %v", recs, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body, err := srvs[1].do("GET", "/v1/series/TICK.1", srvs[1].read, "", nil)
		if err == nil && code == 200 && strings.Contains(string(body), "2030-01-01,1.25\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second server does not serve the first's row: %d %v %s", code, err, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeLogWait: es serve --log-wait bounds how long the start waits
// for the delta log. A real JetStream node of a 3-node cluster whose
// peers never come up takes connections but answers no stream request
// (no quorum): with --log-wait 2s the server listens within seconds (the
// default would hold it 2 minutes) and serves the dataset's snapshot,
// reported damaged. A value that is not a positive duration is refused
// with exit 2 naming the flag, and the home is left as it was.
func TestServeLogWait(t *testing.T) {
	skipE2E(t)
	for _, bad := range []string{"0", "-5s", "soon"} {
		home := t.TempDir()
		code, _, errs := es(t, "serve", "--home", home, "--no-auth", "--log-wait", bad)
		if code != 2 || !strings.Contains(errs, "log-wait") {
			t.Errorf("--log-wait %s: exit %d, stderr %q; want 2 naming --log-wait", bad, code, errs)
		}
		if ents, _ := os.ReadDir(home); len(ents) != 0 {
			t.Errorf("--log-wait %s left %d entries in the home", bad, len(ents))
		}
	}

	var routes []string
	var ports []int
	for range 3 {
		p, err := deltalog.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, p)
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	node, err := deltalog.StartNode(deltalog.NodeOptions{Dir: t.TempDir(), Name: "n1",
		Cluster: &deltalog.ClusterOptions{Name: "es", Port: ports[0], Routes: routes}})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Shutdown()
	// The home first served over a log that answers (its records move
	// into the stream once), then over the node without quorum.
	ok, err := deltalog.StartNode(deltalog.NodeOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ok.Shutdown()
	home := t.TempDir()
	cookStocks(t, home)
	s := newE2EServer(t, home)
	s.extraArgs = []string{"--nats", ok.ClientURL()}
	s.start("127.0.0.1:0")
	s.p.kill()
	s.extraArgs = []string{"--nats", node.ClientURL(), "--log-wait", "2s"}
	s.startTimeout = 30 * time.Second // 2 minutes without the flag
	start := time.Now()
	s.start(s.addr)
	defer s.p.kill()
	t.Logf("listening after %v with the log not answering (--log-wait 2s)", time.Since(start))
	code, body, err := s.do("GET", "/healthz", s.read, "", nil)
	var h server.Health
	if err != nil || json.Unmarshal(body, &h) != nil || h.Damaged != 1 {
		t.Fatalf("healthz with the log not answering: %d %v %s", code, err, body)
	}
	if code, body, err := s.do("GET", "/v1/series/MSFT?from=2000-01-01&to=2000-01-31", s.read, "", nil); err != nil || code != 200 || !strings.Contains(string(body), "2000-01-01,39.81") {
		t.Fatalf("the snapshot with the log not answering: %d %v %s", code, err, body)
	}
}
