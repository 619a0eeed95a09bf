package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/energyscope/energyscope/internal/wiring"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/sync/client"
)

func TestParseServers(t *testing.T) {
	got, err := client.ParseServers(" http://127.0.0.1:1/ ,https://b.example.com:8443,http://c/base/")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"http://127.0.0.1:1", "https://b.example.com:8443", "http://c/base"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("ParseServers = %q, want %q", got, want)
	}
	for _, c := range []struct {
		list  string
		index int // -1: no *ServerListError (an empty list)
		says  string
	}{
		{"", -1, "no server"},
		{"  ", -1, "no server"},
		{"http://a,,http://b", 1, "empty entry"},
		{"http://a,", 1, "empty entry"},
		{"http://a,http://b,HTTP://A/", 2, "the same server as entry 1"},
		{"http://a:1,http://a:1", 1, "the same server as entry 1"},
		{"ftp://a", 0, "want a URL"},
		{"a.example.com", 0, "want a URL"},
		{"http://a,http://%zz", 1, "want a URL"},
		{"127.0.0.1:2", 0, "want a URL"},
		{"http://a?x=1", 0, "without user, query or fragment"},
		{"http://u:p@a", 0, "without user, query or fragment"},
	} {
		_, err := client.ParseServers(c.list)
		if !errors.Is(err, client.ErrServerList) {
			t.Errorf("ParseServers(%q) = %v, want ErrServerList", c.list, err)
			continue
		}
		if !strings.Contains(err.Error(), c.says) {
			t.Errorf("ParseServers(%q) says %q, want it to say %q", c.list, err, c.says)
		}
		var le *client.ServerListError
		if errors.As(err, &le) != (c.index >= 0) || (le != nil && le.Index != c.index) {
			t.Errorf("ParseServers(%q): %#v, want entry index %d", c.list, le, c.index)
		}
	}
}

// gate is a loopback TCP proxy in front of a server: kill closes its
// listener and every connection (dials are then refused, as for a
// killed process), revive listens again on the same address, drop cuts
// the connections only.
type gate struct {
	t      testing.TB
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool
}

func newGate(t testing.TB, target string) *gate {
	g := &gate{t: t, target: strings.TrimPrefix(target, "http://"), addr: "127.0.0.1:0", conns: map[net.Conn]bool{}}
	g.revive()
	t.Cleanup(g.kill)
	return g
}

func (g *gate) url() string { return "http://" + g.addr }

func (g *gate) revive() {
	g.t.Helper()
	ln, err := net.Listen("tcp", g.addr)
	if err != nil {
		g.t.Fatal(err)
	}
	g.mu.Lock()
	g.ln, g.addr = ln, ln.Addr().String()
	g.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go g.pipe(c)
		}
	}()
}

func (g *gate) pipe(c net.Conn) {
	s, err := net.Dial("tcp", g.target)
	if err != nil {
		c.Close()
		return
	}
	g.mu.Lock()
	g.conns[c], g.conns[s] = true, true
	g.mu.Unlock()
	go func() { io.Copy(s, c); s.Close(); c.Close() }()
	io.Copy(c, s)
	c.Close()
	s.Close()
	g.mu.Lock()
	delete(g.conns, c)
	delete(g.conns, s)
	g.mu.Unlock()
}

func (g *gate) drop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for c := range g.conns {
		c.Close()
	}
}

func (g *gate) kill() {
	g.mu.Lock()
	if g.ln != nil {
		g.ln.Close()
		g.ln = nil
	}
	g.mu.Unlock()
	g.drop()
}

// replicaPair is two servers whose homes hold the same dataset state
// and seqs: the second opened on a copy of the first's home after the
// first closed (and then the first reopened), each behind a gate.
func replicaPair(t testing.TB, rows int) (a, b *server.Server, ga, gb *gate) {
	t.Helper()
	dir := t.TempDir()
	homeA, homeB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	open := func(home string) *server.Server {
		s, err := server.New(server.Options{Home: home, CompactRows: -1, CompactBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open(homeA)
	if _, err := s.Replace("stocks", []string{stocks}, stocksOpts); err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		if _, _, err := s.Ingest("stocks", []format.Record{row("TICK", i, float64(i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(homeB, os.DirFS(homeA)); err != nil {
		t.Fatal(err)
	}
	a, b = open(homeA), open(homeB)
	serve := func(s *server.Server) *gate {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		hs := &http.Server{Handler: s.Handler()}
		go hs.Serve(ln)
		t.Cleanup(func() { hs.Close(); s.Close() })
		return newGate(t, ln.Addr().String())
	}
	return a, b, serve(a), serve(b)
}

// TestFailoverResumesOnReplica: a list whose first server is dead still
// connects (to the second); when that one dies the engine moves to the
// third and resumes from its seq: no snapshot downloaded again, no gap,
// no duplicate, and rows ingested by the survivor arrive.
func TestFailoverResumesOnReplica(t *testing.T) {
	a, b, ga, gb := replicaPair(t, 20)
	dead := newGate(t, "127.0.0.1:1")
	dead.kill()
	st := openCompStore(t, t.TempDir())
	c := startComp(t, st, nil, client.Options{Server: dead.url() + "," + ga.url() + "," + gb.url(), MinBackoff: 50 * time.Millisecond})
	head, _, _ := a.Head("stocks")
	c.waitState(head.Snapshot, head.Seq, 20*time.Second)
	m := c.eng.Metrics()
	if m.Server != ga.url() || m.DownloadRebases != 1 {
		t.Fatalf("after the first sync: server %s (want %s), %d downloads (want 1)", m.Server, ga.url(), m.DownloadRebases)
	}
	if p := c.eng.Progress(); len(p.Servers) != 3 || p.Server != ga.url() || p.Failovers < 1 {
		t.Fatalf("progress: server %s of %q, %d failovers", p.Server, p.Servers, p.Failovers)
	}

	ga.kill()
	waitFor(t, 20*time.Second, "the engine online on the survivor", func() bool {
		p := c.eng.Progress()
		return p.Online && p.Server == gb.url()
	})
	_, last, err := b.Ingest("stocks", []format.Record{row("TICK", 100, 1.5), row("MSFT", 101, 2.5)})
	if err != nil {
		t.Fatal(err)
	}
	c.waitState(head.Snapshot, last, 20*time.Second)
	sameAsServer(t, b, st, "TICK", "MSFT")
	// Every seq above the snapshot exactly once.
	_, covers, recs, err := wiring.Sink{Store: st}.Pending("stocks")
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if r.Seq != covers+uint64(i)+1 {
			t.Fatalf("record %d has seq %d, want %d (a gap or a duplicate)", i, r.Seq, covers+uint64(i)+1)
		}
	}
	if covers+uint64(len(recs)) != last {
		t.Fatalf("%d records above %d, head %d", len(recs), covers, last)
	}
	m = c.eng.Metrics()
	if m.DownloadRebases != 1 || len(m.Downloads) != 1 {
		t.Fatalf("after the failover: %d downloads started, %d completed; want the first only", m.DownloadRebases, len(m.Downloads))
	}
	if m.Server != gb.url() || m.Failovers < 2 {
		t.Fatalf("metrics: server %s (want %s), %d failovers (want >= 2)", m.Server, gb.url(), m.Failovers)
	}
}

// BenchmarkFailoverToLive measures, with the engine's default backoff,
// the time from losing the server in use to being live again (welcome
// and catch-up done) in two ways, side by side in one run: "failover",
// the server killed (its listener closed: dials refused) so the engine
// moves to the replica; "reconnect", the connection cut while the server
// stays up, so the engine comes back to the same one. It reports the
// p50 and p99 in ms.
func BenchmarkFailoverToLive(b *testing.B) {
	_, _, ga, gb := replicaPair(b, 20)
	st, err := localcache.Open(b.TempDir(), &localcache.Options{CompactRows: -1, CompactBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	eng := client.New(wiring.Sink{Store: st}, client.Options{Server: ga.url() + "," + gb.url(), Name: "bench"})
	changed := make(chan struct{}, 1)
	eng.OnProgress(func(client.Progress) {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { eng.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	gates := map[string]*gate{ga.url(): ga, gb.url(): gb}
	// liveOn waits until the engine is live on server in a session after
	// the sessions'th.
	liveOn := func(server string, sessions int64) {
		deadline := time.After(30 * time.Second)
		for {
			p := eng.Progress()
			if p.Online && p.Server == server && eng.Metrics().Sessions > sessions && len(p.Datasets) == 1 && p.Datasets[0].State == client.StateLive {
				return
			}
			select {
			case <-changed:
			case <-time.After(time.Millisecond):
			case <-deadline:
				b.Fatalf("not live on %s within 30 s: %+v", server, p)
			}
		}
	}
	liveOn(ga.url(), 0)
	for _, mode := range []string{"failover", "reconnect"} {
		b.Run(mode, func(b *testing.B) {
			var ds []time.Duration
			for b.Loop() {
				cur := eng.Progress().Server
				next := cur
				if mode == "failover" {
					next = ga.url()
					if cur == ga.url() {
						next = gb.url()
					}
				}
				sessions := eng.Metrics().Sessions
				start := time.Now()
				if mode == "failover" {
					gates[cur].kill()
				} else {
					gates[cur].drop()
				}
				liveOn(next, sessions)
				ds = append(ds, time.Since(start))
				if mode == "failover" {
					gates[cur].revive()
				}
			}
			slices.Sort(ds)
			b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(ds[min(len(ds)-1, len(ds)*99/100)].Microseconds())/1000, "p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
	if m := eng.Metrics(); m.DownloadRebases != 1 {
		b.Fatalf("%d snapshot downloads; want the first only", m.DownloadRebases)
	}
}

// TestFailoverCyclesWithBackoff: when every server of the list refuses
// the session (each accepts the TCP connection and closes it), the
// engine tries them in the list's order, round after round, and waits
// the backoff between rounds: no reconnect storm. With every server
// answering the same, the engine never gets live and stays offline.
func TestFailoverCyclesWithBackoff(t *testing.T) {
	var mu sync.Mutex
	var order []int
	var urls []string
	for i := range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		urls = append(urls, "http://"+ln.Addr().String())
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				c.Close()
			}
		}()
	}
	st := openCompStore(t, t.TempDir())
	const step = 200 * time.Millisecond
	c := startComp(t, st, nil, client.Options{Server: strings.Join(urls, ","), MinBackoff: step, MaxBackoff: step})
	time.Sleep(2 * time.Second)
	c.stop()
	mu.Lock()
	defer mu.Unlock()
	for i, s := range order {
		if s != i%3 {
			t.Fatalf("dial %d went to server %d, want %d (the list's order, round after round): %v", i, s, i%3, order)
		}
	}
	// Rounds wait 0..step (full jitter), 100 ms on average: about 20
	// rounds, 60 dials in 2 s. Without a wait per round it would be
	// thousands.
	if len(order) < 3 || len(order) > 300 {
		t.Fatalf("%d dials in 2 s; want 3 to 300", len(order))
	}
	m := c.eng.Metrics()
	if m.Failovers != m.Reconnects || m.Sessions != 0 {
		t.Fatalf("failovers %d, reconnects %d, sessions %d: want every failed session a move to the next server and none made", m.Failovers, m.Reconnects, m.Sessions)
	}
	if p := c.eng.Progress(); p.Online {
		t.Fatalf("online with every server refusing: %+v", p)
	}
}

// TestFailoverToDivergedReplica: the replica gave the seqs above the
// copy to other records than the server the companion was on (two
// writers after the copy, the case a shared log rules out). After the
// failover the replica answers reset (diverged) as a restored server
// would: the companion drops its records above the copy, takes the
// replica's and follows it live, without downloading the snapshot.
func TestFailoverToDivergedReplica(t *testing.T) {
	a, b, ga, gb := replicaPair(t, 10)
	for i := range 5 {
		if _, _, err := a.Ingest("stocks", []format.Record{row("A", 20+i, float64(i))}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.Ingest("stocks", []format.Record{row("B", 20+i, float64(-i))}); err != nil {
			t.Fatal(err)
		}
	}
	st := openCompStore(t, t.TempDir())
	c := startComp(t, st, nil, client.Options{Server: ga.url() + "," + gb.url(), MinBackoff: 50 * time.Millisecond})
	head, _, _ := a.Head("stocks")
	c.waitState(head.Snapshot, head.Seq, 20*time.Second)
	if v, ok := value(st, "A", row("A", 24, 0).Period); !ok || v != 4 {
		t.Fatalf("A's row before the failover: %v %v", v, ok)
	}
	ga.kill()
	_, last, err := b.Ingest("stocks", []format.Record{row("B", 30, 7)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the replica's records", func() bool {
		_, _, seq, err := st.State("stocks")
		_, ok := value(st, "B", row("B", 30, 0).Period)
		return err == nil && seq == last && ok
	})
	sameAsServer(t, b, st, "B", "TICK")
	if v, ok := value(st, "A", row("A", 24, 0).Period); ok {
		t.Fatalf("the first server's row is still held after the reset: %v", v)
	}
	m := c.eng.Metrics()
	if m.Server != gb.url() || m.Diverged < 1 || m.DownloadRebases != 1 {
		t.Fatalf("server %s (want %s), %d diverged resets (want >= 1), %d downloads (want 1)", m.Server, gb.url(), m.Diverged, m.DownloadRebases)
	}
}
