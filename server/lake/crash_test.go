package lake

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
)

// TestMain lets the crash test re-run this test binary as a publishing
// child.
func TestMain(m *testing.M) {
	if home := os.Getenv("ES_LAKE_CRASH_CHILD"); home != "" {
		crashChild(home)
		return
	}
	os.Exit(m.Run())
}

// crashChild publishes the snapshot directories under home/src in a loop
// until it is killed.
func crashChild(home string) {
	ctx := context.Background()
	l, err := Open(ctx, Options{Home: home})
	if err != nil {
		os.Exit(3)
	}
	ents, _ := os.ReadDir(filepath.Join(home, "src"))
	for i := 0; ; i++ {
		if _, err := l.Publish(ctx, "stocks", filepath.Join(home, "src", ents[i%len(ents)].Name())); err != nil {
			os.Exit(4)
		}
	}
}

// TestCrashDuringPublish kills a publishing child process (SIGKILL) at
// random points, several times. After each kill the lake opens, every
// retained vintage's serving index extracts and verifies, the metadata
// references no missing file, and Expire's orphan cleanup removes what the
// killed attempt left, so that the warehouse holds exactly what the
// metadata references.
func TestCrashDuringPublish(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	tab := sampleTable(t, "stocks")
	for i := range 3 {
		d := writeSnapshot(t, "stocks", scaled(tab, float64(i+1)), format.WriteOptions{CoversThroughSeq: uint64(i)})
		if err := os.MkdirAll(filepath.Join(home, "src"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(d, filepath.Join(home, "src", strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(7, 7))
	for round := range 4 {
		cmd := exec.Command(os.Args[0], "-test.run", "^$")
		cmd.Env = append(os.Environ(), "ES_LAKE_CRASH_CHILD="+home)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(300+r.IntN(900)) * time.Millisecond)
		cmd.Process.Kill()
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != -1 {
			t.Fatalf("round %d: child ended on its own: %v", round, err)
		}
		l, err := Open(ctx, Options{Home: home, OrphanMinAge: time.Nanosecond})
		if err != nil {
			t.Fatalf("round %d: open after a crash: %v", round, err)
		}
		vs, err := l.Vintages(ctx, "stocks")
		if errors.Is(err, ErrNoDataset) {
			l.Close()
			continue // killed before the table existed
		}
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for _, v := range vs {
			if !v.Serving {
				t.Fatalf("round %d: vintage %+v without a serving index", round, v)
			}
			dst := filepath.Join(t.TempDir(), "x")
			if _, err := l.Extract(ctx, "stocks", v, dst); err != nil {
				t.Fatalf("round %d: extract %+v: %v", round, v, err)
			}
			if _, err := format.Verify(dst); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		tbl, err := l.Table(ctx, "stocks")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range referencedFiles(t, tbl) {
			if _, err := os.Stat(f); err != nil {
				t.Fatalf("round %d: the metadata references a missing file: %v", round, err)
			}
		}
		if len(vs) > 0 {
			if _, err := l.Expire(ctx, "stocks", 1000, time.Hour); err != nil {
				t.Fatalf("round %d: expire: %v", round, err)
			}
			tbl, _ = l.Table(ctx, "stocks")
			checkNoOrphans(t, home, tbl)
		}
		t.Logf("round %d: %d vintages", round, len(vs))
		l.Close()
	}
}
