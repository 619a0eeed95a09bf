package lake

// The PostgreSQL catalog against a real PostgreSQL server from Debian's
// postgresql package (scripts/install-deps.sh installs it), started on
// loopback as the postgres user and stopped after. It needs root (runuser);
// under CI=true it always runs, elsewhere it skips without root or the
// package.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
)

func startPostgres(t *testing.T) string {
	t.Helper()
	bin := "/usr/lib/postgresql/15/bin"
	if os.Getenv("CI") != "true" {
		if _, err := os.Stat(bin + "/initdb"); err != nil || os.Geteuid() != 0 {
			t.Skip("needs root and Debian's postgresql package (scripts/install-deps.sh); CI=true runs it")
		}
	}
	dir, err := os.MkdirTemp("", "es-pg-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	data := filepath.Join(dir, "data")
	run := func(args ...string) {
		cmd := exec.Command("runuser", append([]string{"-u", "postgres", "--"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	run(bin+"/initdb", "-D", data, "-A", "trust", "-U", "postgres")
	// -l: the server must not inherit our output pipes (CombinedOutput
	// would wait for it to exit).
	run(bin+"/pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", port, dir), "-w", "start")
	t.Cleanup(func() {
		exec.Command("runuser", "-u", "postgres", "--", bin+"/pg_ctl", "-D", data, "-m", "immediate", "stop").Run()
		os.RemoveAll(dir)
	})
	run(bin+"/createdb", "-h", "127.0.0.1", "-p", fmt.Sprint(port), "-U", "postgres", "es")
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/es?sslmode=disable", port)
}

func TestPostgresCatalog(t *testing.T) {
	ctx := context.Background()
	uri := startPostgres(t)
	home := t.TempDir()
	wh := "file://" + filepath.Join(home, Dir, WarehouseDir)
	open := func() *Lake {
		l, err := Open(ctx, Options{CatalogURI: uri, Warehouse: wh})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	l := open()
	tab := sampleTable(t, "stocks")
	dir1 := writeSnapshot(t, "stocks", tab, format.WriteOptions{})
	v1 := mustPublish(t, l, "stocks", dir1)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for w := range 3 {
		lw := open()
		dirs := []string{
			writeSnapshot(t, "stocks", scaled(tab, float64(2+2*w)), format.WriteOptions{CoversThroughSeq: uint64(1 + 2*w)}),
			writeSnapshot(t, "stocks", scaled(tab, float64(3+2*w)), format.WriteOptions{CoversThroughSeq: uint64(2 + 2*w)}),
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, d := range dirs {
				if _, err := lw.Publish(ctx, "stocks", d); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	vs, err := l.Vintages(ctx, "stocks")
	if err != nil || len(vs) != 7 {
		t.Fatalf("%d vintages, %v; want 7", len(vs), err)
	}
	tbl, _ := l.Table(ctx, "stocks")
	sameRows(t, "older vintage", scanRows(t, tbl, v1.IcebergSnapshot), snapshotRows(t, dir1))
	checkNoOrphans(t, home, tbl)
	if v, err := l.Resolve(ctx, "stocks", time.Now().UTC().Format(time.RFC3339Nano)); err != nil || v.IcebergSnapshot != vs[6].IcebergSnapshot {
		t.Fatalf("as-of now: %+v, %v", v, err)
	}
}
