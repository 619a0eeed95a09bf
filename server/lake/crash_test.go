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
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// TestMain lets the crash test re-run this test binary as a publishing
// child.
func TestMain(m *testing.M) {
	if home := os.Getenv("ES_LAKE_CRASH_CHILD"); home != "" {
		crashChild(home)
		return
	}
	if home := os.Getenv("ES_LAKE_COOK_CRASH_CHILD"); home != "" {
		cookCrashChild(home)
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

// cookCrashChild publishes a cooked snapshot of the sample set, then
// cooks a second one and kills itself just before its catalog commit:
// the container is written and fsynced in the warehouse, and nothing
// references it.
func cookCrashChild(home string) {
	ctx := context.Background()
	l, err := Open(ctx, Options{Home: home})
	if err != nil {
		os.Exit(3)
	}
	tab := crashTable()
	if _, _, err := l.PublishCooked(ctx, "stocks", cookInto("stocks", tab, format.WriteOptions{}), nil); err != nil {
		os.Exit(4)
	}
	l.beforeCommit = func() {
		p, _ := os.FindProcess(os.Getpid())
		p.Kill()
		select {}
	}
	l.PublishCooked(ctx, "stocks", cookInto("stocks", scaled(tab, 2), format.WriteOptions{CoversThroughSeq: 3}), nil)
	os.Exit(5)
}

// TestCrashBetweenCookAndCommit: a process killed between writing a
// cooked publish's Puffin container and its commit. The lake opens on
// the first vintage, which serves and verifies; the orphaned container
// is never a vintage's, and Expire's orphan cleanup removes it and its
// data file, leaving exactly what the metadata references.
func TestCrashBetweenCookAndCommit(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "ES_LAKE_COOK_CRASH_CHILD="+home)
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != -1 && ee.ExitCode() != 1 {
		t.Fatalf("child: %v (want killed)", err)
	}
	l, err := Open(ctx, Options{Home: home, OrphanMinAge: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	vs, err := l.Vintages(ctx, "stocks")
	if err != nil || len(vs) != 1 {
		t.Fatalf("vintages %+v, %v: want the one committed", vs, err)
	}
	tbl, err := l.Table(ctx, "stocks")
	if err != nil {
		t.Fatal(err)
	}
	var puffins int
	for _, f := range warehouseFiles(t, home) {
		if filepath.Ext(f) == ".puffin" {
			puffins++
		}
	}
	if puffins != 2 {
		t.Fatalf("%d Puffin files in the warehouse, want the committed one and the killed publish's", puffins)
	}
	s, err := l.OpenSnapshot(ctx, "stocks", vs[0], snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sameAnswers(t, s, writeSnapshot(t, "stocks", crashTable(), format.WriteOptions{}))
	s.Close()
	if err := l.Verify(ctx, "stocks", vs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Expire(ctx, "stocks", 1000, time.Hour); err != nil {
		t.Fatal(err)
	}
	tbl, _ = l.Table(ctx, "stocks")
	checkNoOrphans(t, home, tbl)
}

// crashTable is a small table of two daily series.
func crashTable() *format.Table {
	t := &format.Table{Series: []format.SeriesMeta{{ID: "A", Frequency: format.Daily}, {ID: "B", Frequency: format.Daily}}}
	for i := range 400 {
		t.Append(uint32(i%2), int64(1700006400+86400*(i/2)), float64(i))
	}
	return t
}
