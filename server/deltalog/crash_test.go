package deltalog

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

func nightly() bool { return os.Getenv("ES_NIGHTLY") == "1" }

// An embedded node acknowledges only what is fsynced: a child process
// appends to an embedded node and reports each acknowledgement; it is
// killed with SIGKILL after a random number of them; the node restarted
// on the same directory holds every acknowledged batch at its seqs, no
// batch twice, seqs contiguous. Each round's writer starts again from
// its last acknowledged batch + 1 on the same log, so a batch in flight
// at the kill is retried under its key by the next round (stored once).
// 5 rounds; 50 with ES_NIGHTLY=1.
func TestEmbeddedKill9(t *testing.T) {
	rounds := 5
	if nightly() {
		rounds = 50
	}
	const size = 200
	dir := t.TempDir()
	acked := map[int][2]uint64{}
	next := 0
	for r := range rounds {
		c := startChild(t, childEnv+"=writer", "ES_DELTALOG_DIR="+dir,
			fmt.Sprintf("ES_DELTALOG_N=%d", size), fmt.Sprintf("ES_DELTALOG_FROM=%d", next))
		want := 3 + rand.IntN(40)
		for range want {
			var i int
			var f, la uint64
			line := c.waitLine(t, "ack ", 20*time.Second)
			if _, err := fmt.Sscanf(line, "ack %d %d %d", &i, &f, &la); err != nil {
				t.Fatalf("round %d: %q: %v", r, line, err)
			}
			acked[i] = [2]uint64{f, la}
			next = max(next, i+1)
		}
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond) // kill between or during appends
		c.kill()
		// Acks printed before the kill count too.
		for line := range c.lines {
			var i int
			var f, la uint64
			if _, err := fmt.Sscanf(line, "ack %d %d %d", &i, &f, &la); err == nil {
				acked[i] = [2]uint64{f, la}
				next = max(next, i+1)
			}
		}
		n, err := StartNode(NodeOptions{Dir: dir})
		if err != nil {
			t.Fatalf("round %d: restart: %v", r, err)
		}
		l, err := n.Connect(Options{})
		if err != nil {
			n.Shutdown()
			t.Fatal(err)
		}
		got := checkLog(t, l, "pet", size, acked)
		if got < len(acked)*size {
			t.Fatalf("round %d: %d records for %d acknowledged batches", r, got, len(acked))
		}
		l.Close()
		n.Shutdown()
	}
	t.Logf("%d rounds, %d batches acknowledged", rounds, len(acked))
}
