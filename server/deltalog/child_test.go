package deltalog

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Child processes of the crash and cluster tests are this test binary
// started again with childEnv set to their role:
//
//	node:   ES_DELTALOG_NODE holds NodeOptions (JSON); starts the node,
//	        prints "ready", runs until killed.
//	writer: an embedded node in ES_DELTALOG_DIR; appends batchOf(i,
//	        ES_DELTALOG_N) to dataset "pet" under key keyOf(i) for i from
//	        ES_DELTALOG_FROM on, printing "ack i first last" after each
//	        acknowledgement, until killed.
const (
	childEnv = "ES_DELTALOG_CHILD"
	nodeEnv  = "ES_DELTALOG_NODE"
)

func runChild(role string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	// The parent holds our stdin open: its end (the parent died, even by
	// a kill or a test timeout) ends us, so no node outlives a test run.
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(3)
	}()
	switch role {
	case "node":
		var o NodeOptions
		if err := json.Unmarshal([]byte(os.Getenv(nodeEnv)), &o); err != nil {
			return fail(err)
		}
		if _, err := StartNode(o); err != nil {
			return fail(err)
		}
		fmt.Println("ready")
		select {}
	case "writer":
		n, err := StartNode(NodeOptions{Dir: os.Getenv("ES_DELTALOG_DIR")})
		if err != nil {
			return fail(err)
		}
		l, err := n.Connect(Options{})
		if err != nil {
			return fail(err)
		}
		ctx := context.Background()
		if err := l.Create(ctx, "pet", CreateOptions{}); err != nil {
			return fail(err)
		}
		size, _ := strconv.Atoi(os.Getenv("ES_DELTALOG_N"))
		from, _ := strconv.Atoi(os.Getenv("ES_DELTALOG_FROM"))
		out := bufio.NewWriter(os.Stdout)
		for i := from; ; i++ {
			f, la, err := l.Append(ctx, "pet", batchOf(i, size), keyOf(i))
			if err != nil {
				return fail(err)
			}
			fmt.Fprintf(out, "ack %d %d %d\n", i, f, la)
			out.Flush() // the parent must see every ack before a kill
		}
	}
	return fail(fmt.Errorf("unknown role %q", role))
}

// child is a running child process with its stdout lines on a channel.
type child struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *strings.Builder
	stdin  io.WriteCloser // held open for the child's life (a collected pipe would close it)
}

func startChild(t testing.TB, env ...string) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	c := &child{cmd: cmd, lines: make(chan string, 1024), stderr: &strings.Builder{}}
	cmd.Stderr = c.stderr
	if c.stdin, err = cmd.StdinPipe(); err != nil { // closed when this process exits
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() { c.kill() })
	return c
}

// kill sends SIGKILL (TerminateProcess on Windows) and reaps the child.
func (c *child) kill() {
	if c.cmd.ProcessState != nil {
		return
	}
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

// waitLine waits for a line starting with prefix.
func (c *child) waitLine(t testing.TB, prefix string, d time.Duration) string {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited before %q: %s", prefix, c.stderr.String())
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			t.Fatalf("no %q from the child in %v: %s", prefix, d, c.stderr.String())
		}
	}
}
