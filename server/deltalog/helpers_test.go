package deltalog

import (
	"context"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
)

// TestMain runs a child process's part when the test binary is started
// as one (crash and cluster tests): a node, or a writer on an embedded
// node, killed with SIGKILL by the parent.
func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(runChild(role))
	}
	os.Exit(m.Run())
}

const day0 = 1767225600 // 2026-01-01 UTC

// batchOf is batch i of n records: values i*1e6 + j, so every record
// says which batch and position it came from.
func batchOf(i, n int) []format.Record {
	recs := make([]format.Record, n)
	for j := range recs {
		recs[j] = format.Record{
			Op:       format.Upsert,
			SeriesID: fmt.Sprintf("TEST.S%03d.D", j%97),
			Period:   day0 + int64(i%300)*86400,
			Value:    float64(i)*1e6 + float64(j),
		}
	}
	return recs
}

// origin decodes batchOf's value.
func origin(r format.Record) (batch, pos int) {
	return int(r.Value / 1e6), int(math.Mod(r.Value, 1e6))
}

func startEmbedded(t testing.TB, o NodeOptions) *Node {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	n, err := StartNode(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Shutdown)
	return n
}

func connectNode(t testing.TB, n *Node, o Options) *Log {
	t.Helper()
	l, err := n.Connect(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// checkLog reads all of dataset from seq 1 and checks the log against
// what writers were told: seqs contiguous from 1, every acknowledged
// batch at its seqs with its records, no batch twice, and a batch that
// was never acknowledged (in flight at a crash) at most once and whole.
// It returns the number of records.
func checkLog(t testing.TB, l *Log, dataset string, n int, acked map[int][2]uint64) int {
	t.Helper()
	recs, err := l.Read(testCtx(t, 30*time.Second), dataset, 1)
	if err != nil {
		t.Fatalf("read all: %v", err)
	}
	seen := map[int]uint64{} // batch -> first seq
	for k := 0; k < len(recs); {
		if recs[k].Seq != uint64(k)+1 {
			t.Fatalf("record %d has seq %d: seqs must be contiguous from 1", k, recs[k].Seq)
		}
		b, _ := origin(recs[k])
		if _, dup := seen[b]; dup {
			t.Fatalf("batch %d is in the log twice (again at seq %d)", b, recs[k].Seq)
		}
		seen[b] = recs[k].Seq
		if k+n > len(recs) {
			t.Fatalf("batch %d at seq %d is cut short", b, recs[k].Seq)
		}
		want := batchOf(b, n)
		for j, want := range want {
			if recs[k+j].Value != want.Value || recs[k+j].SeriesID != want.SeriesID || recs[k+j].Period != want.Period {
				t.Fatalf("seq %d: %+v, want batch %d record %d %+v", recs[k+j].Seq, recs[k+j], b, j, want)
			}
		}
		k += n
	}
	for b, r := range acked {
		f, ok := seen[b]
		if !ok {
			t.Fatalf("acknowledged batch %d (seqs %d..%d) is not in the log", b, r[0], r[1])
		}
		if f != r[0] || r[1] != r[0]+uint64(n)-1 {
			t.Fatalf("acknowledged batch %d: told %d..%d, the log has it from %d", b, r[0], r[1], f)
		}
	}
	return len(recs)
}
