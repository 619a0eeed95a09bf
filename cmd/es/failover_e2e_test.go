package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/sync/client"
)

// TestCompanionBadServerList: es companion refuses a server list that
// ParseServers refuses, naming the entry, before it opens anything.
func TestCompanionBadServerList(t *testing.T) {
	for _, c := range []struct{ list, says string }{
		{"http://127.0.0.1:1,http://127.0.0.1:1/", `server 2 "http://127.0.0.1:1": the same server as entry 1`},
		{"http://127.0.0.1:1,,http://127.0.0.1:2", "server 2 \"\": empty entry"},
		{"http://127.0.0.1:1,127.0.0.1:2", `server 2 "127.0.0.1:2": want a URL`},
		{"http://127.0.0.1:1,http://%zz", `server 2 "http://%zz": want a URL`},
		{"http://127.0.0.1:1,example.com", `server 2 "example.com": want a URL`},
		{",", "empty entry"},
	} {
		home := filepath.Join(t.TempDir(), "home")
		code, out, errs := es(t, "companion", "--home", home, "--port", "0", "--server", c.list)
		if code != 2 || !strings.Contains(errs, c.says) {
			t.Errorf("--server %q: exit %d, stderr %q; want 2 and %q", c.list, code, errs, c.says)
		}
		if strings.Contains(out, "press Ctrl+C") {
			t.Errorf("--server %q: the companion started", c.list)
		}
		if _, err := os.Stat(home); err == nil {
			t.Errorf("--server %q: the home was created", c.list)
		}
	}
}

// TestFailoverE2E: two real es serve processes hold the same dataset
// state and seqs (the second runs on a copy of the first's home, taken
// while the first was stopped); a companion is given a dead URL, then
// the first, then the second. It connects to the first (past the dead
// one), and when the first is killed with SIGKILL it continues on the
// second: no snapshot downloaded again, every row once, and rows posted
// to the survivor arrive.
func TestFailoverE2E(t *testing.T) {
	skipE2E(t)
	a := newE2EServer(t, filepath.Join(t.TempDir(), "a"))
	cookStocks(t, a.home)
	a.start("127.0.0.1:0")
	var rows []tickRow
	for i := range 40 {
		rows = append(rows, tickRowN(i))
	}
	if _, err := a.post("stocks", rows[:20]); err != nil {
		t.Fatal(err)
	}
	for i := 20; i < 40; i++ {
		if _, err := a.post("stocks", rows[i:i+1]); err != nil {
			t.Fatal(err)
		}
	}
	ha := a.head("stocks")
	a.p.kill() // stopped: its home is copied as it is on disk
	b := &e2eServer{t: t, home: filepath.Join(t.TempDir(), "b"), write: a.write, read: a.read, httpc: a.httpc, startTimeout: a.startTimeout}
	if err := os.CopyFS(b.home, os.DirFS(a.home)); err != nil {
		t.Fatal(err)
	}
	a.start(a.addr)
	b.start("127.0.0.1:0")
	if hb := b.head("stocks"); hb != ha {
		t.Fatalf("the copy's head %+v, the original's %+v", hb, ha)
	}
	// A loopback port with nothing listening: a dial is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()

	c := newE2ECompanion(t, "companion", dead+","+a.url+","+b.url, a.read)
	c.start()
	c.waitState("stocks", ha.Snapshot, ha.Seq, 60*time.Second)
	// The metrics file is written as things happen: the one written at
	// the failover can be read before the download's count reaches it.
	m := c.waitMetrics("the first server in use", 10*time.Second, func(m client.Metrics) bool {
		return m.Server == a.url && m.DownloadRebases >= 1
	})
	if m.DownloadRebases != 1 || m.Failovers < 1 {
		t.Fatalf("on the first server: %d downloads, %d failovers; want 1 and >= 1 (past the dead URL)", m.DownloadRebases, m.Failovers)
	}
	failovers := m.Failovers

	a.p.kill()
	m = c.waitMetrics("a failover to the second server", 30*time.Second, func(m client.Metrics) bool {
		return m.Server == b.url && m.Sessions >= 2
	})
	var last uint64
	for i := 40; i < 60; i++ {
		if last, err = b.post("stocks", []tickRow{tickRowN(i)}); err != nil {
			t.Fatal(err)
		}
	}
	c.waitState("stocks", ha.Snapshot, last, 30*time.Second)
	b.p.kill() // quiet, for the read-only comparison of its home
	checkSameDataset(t, b.home, c, "stocks", []string{"MSFT", "TICK.0", "TICK.1", "TICK.2", "TICK.3", "TICK.4"})
	m = c.waitMetrics("final metrics", 10*time.Second, func(client.Metrics) bool { return true })
	if m.DownloadRebases != 1 || len(m.Downloads) != 1 {
		t.Fatalf("after the failover: %d downloads started, %d completed; want the first only", m.DownloadRebases, len(m.Downloads))
	}
	if m.Failovers <= failovers {
		t.Fatalf("failovers %d, was %d before the kill", m.Failovers, failovers)
	}
	got := esGet(t, c.home, "TICK.4")
	for i := 4; i < 60; i += 5 {
		r := tickRowN(i)
		if !strings.Contains(got, r.Period+",") {
			t.Fatalf("row %d (%v) missing from the companion:\n%s", i, r, lastBytes(got, 400))
		}
	}
}
