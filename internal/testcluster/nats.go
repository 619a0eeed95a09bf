package testcluster

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/server/deltalog"
)

// nodeEnv holds a child node's deltalog.NodeOptions (JSON): the test
// binary started again with it runs that NATS node until killed.
const nodeEnv = "ES_TESTCLUSTER_NATS_NODE"

// RunNodeIfChild runs a NATS node and never returns when this process is
// a node child of StartNATS (call it first in TestMain or an init of the
// test binary); otherwise it returns at once.
func RunNodeIfChild() {
	spec := os.Getenv(nodeEnv)
	if spec == "" {
		return
	}
	// The parent holds our stdin open: its end (the parent died, even by
	// a kill or a test timeout) ends us, so no node outlives a test run.
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(3)
	}()
	var o deltalog.NodeOptions
	if err := json.Unmarshal([]byte(spec), &o); err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		os.Exit(2)
	}
	if _, err := deltalog.StartNode(o); err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	select {}
}

// NATS is a cluster of NATS JetStream nodes, each a child process (the
// test binary, RunNodeIfChild) on loopback, that a test kills with
// SIGKILL and restarts on the same ports and store.
type NATS struct {
	t     *testing.T
	opts  []deltalog.NodeOptions
	procs []*exec.Cmd
	done  []chan struct{}
	stdin []io.WriteCloser
}

// StartNATS starts an n-node cluster (n = 1: a single node) and waits for
// every node to take connections; they are killed when the test ends.
func StartNATS(t *testing.T, n int) *NATS {
	t.Helper()
	c := &NATS{t: t}
	dir := t.TempDir()
	var routes []string
	var routePorts []int
	for range n {
		rp, err := deltalog.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		routePorts = append(routePorts, rp)
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", rp))
	}
	for i := range n {
		cp, err := deltalog.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		o := deltalog.NodeOptions{Dir: filepath.Join(dir, fmt.Sprint(i)), Name: fmt.Sprintf("n%d", i+1), Port: cp}
		if n > 1 {
			o.Cluster = &deltalog.ClusterOptions{Name: "es", Port: routePorts[i], Routes: routes}
		}
		c.opts = append(c.opts, o)
		c.procs = append(c.procs, nil)
		c.done = append(c.done, nil)
		c.stdin = append(c.stdin, nil)
	}
	for i := range n {
		c.Start(i)
	}
	t.Cleanup(func() {
		for i := range c.procs {
			c.Kill(i)
		}
	})
	return c
}

// URL is node i's client URL.
func (c *NATS) URL(i int) string { return fmt.Sprintf("nats://127.0.0.1:%d", c.opts[i].Port) }

// URLs is every node's client URL, comma-separated (es serve --nats).
func (c *NATS) URLs() string {
	var u []string
	for i := range c.opts {
		u = append(u, c.URL(i))
	}
	return strings.Join(u, ",")
}

// Start starts node i (again, after Kill: the same ports and store) and
// waits until it takes connections.
func (c *NATS) Start(i int) {
	c.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		c.t.Fatal(err)
	}
	spec, _ := json.Marshal(c.opts[i])
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), nodeEnv+"="+string(spec))
	in, err := cmd.StdinPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := sc.Scan() && sc.Text() == "ready"
		ready <- ok
		io.Copy(io.Discard, out)
	}()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case ok := <-ready:
		if !ok {
			<-done
			c.t.Fatalf("NATS node %d did not start: %s", i, stderr.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		c.t.Fatalf("NATS node %d not ready within 60 s", i)
	}
	c.procs[i], c.done[i], c.stdin[i] = cmd, done, in
}

// Kill kills node i with SIGKILL (a crash) and waits for it to be gone.
func (c *NATS) Kill(i int) {
	if c.procs[i] == nil {
		return
	}
	c.procs[i].Process.Kill()
	<-c.done[i]
	c.stdin[i].Close()
	c.procs[i] = nil
}
