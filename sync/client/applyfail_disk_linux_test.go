//go:build linux

package client_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/sync/client"
)

// setImmutable sets or clears the immutable inode flag of path (chattr
// +i): writes and truncation of the file fail with EPERM, also through a
// descriptor opened before. Needs root (CAP_LINUX_IMMUTABLE) and a file
// system that keeps the flag (ext4, xfs, btrfs); CI has both.
func setImmutable(t *testing.T, path string, on bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const immutable = 0x10 // FS_IMMUTABLE_FL, linux/fs.h
	fl, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err == nil {
		v := int(fl) &^ immutable
		if on {
			v |= immutable
		}
		err = unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, v)
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("chattr +i %s (CI runs as root on ext4): %v", path, err)
		}
		t.Skipf("cannot set the immutable flag here (needs root and ext4/xfs/btrfs): %v", err)
	}
}

// TestUnwritableWALRecoversWithoutRestart (issue 10, item 9, end to end
// over the real store): the companion's write-ahead log segment of one
// dataset becomes unwritable (chattr +i) for a few seconds. The engine
// marks that dataset with the store's own error and retries with backoff
// over the same connection; once the segment is writable again the store
// reopens its log at the next apply and the dataset catches up to exactly
// the server's data, without a restart of the store or the engine. Before,
// the store's log refused every append until the store was reopened, so
// the dataset never recovered.
func TestUnwritableWALRecoversWithoutRestart(t *testing.T) {
	r := newStocksRig(t, nil)
	home := t.TempDir() // not /dev/shm: the inode flag needs ext4
	st := openCompStore(t, home)
	c := startComp(t, st, nil, client.Options{Server: r.hs.URL, MinBackoff: 100 * time.Millisecond, MaxBackoff: 800 * time.Millisecond})
	head, _, _ := r.srv.Head("stocks")
	c.waitState(head.Snapshot, 0, 20*time.Second)
	waitFor(t, 20*time.Second, "stocks live", func() bool {
		d, ok := progressOf(c.eng, "stocks")
		return ok && d.State == client.StateLive
	})
	first := r.ingest(row("T", 0, 0))
	c.waitState(head.Snapshot, first, 20*time.Second)
	sessions := c.eng.Stats.Sessions.Load()

	walDir := filepath.Join(home, localcache.DatasetsDir, "stocks", localcache.WALDir)
	ents, err := os.ReadDir(walDir)
	if err != nil || len(ents) == 0 {
		t.Fatalf("companion's log: %v %v", ents, err)
	}
	seg := filepath.Join(walDir, ents[len(ents)-1].Name())
	setImmutable(t, seg, true)
	t.Cleanup(func() { setImmutable(t, seg, false) })
	window := time.Now()
	for i := 1; i <= 3; i++ {
		r.ingest(row("T", i, float64(i)))
	}
	waitFor(t, 10*time.Second, "stocks marked failing", func() bool {
		d, _ := progressOf(c.eng, "stocks")
		return d.State == client.StateApplyFailing && d.Failure != nil
	})
	if d, _ := progressOf(c.eng, "stocks"); !errors.Is(d.Failure, os.ErrPermission) {
		t.Fatalf("failure %v, want the store's EPERM", d.Failure)
	}
	time.Sleep(time.Until(window.Add(2 * time.Second)))
	setImmutable(t, seg, false)

	last := r.ingest(row("T", 9, 9))
	c.waitState(head.Snapshot, last, 20*time.Second)
	waitFor(t, 10*time.Second, "stocks live again", func() bool {
		d, _ := progressOf(c.eng, "stocks")
		return d.State == client.StateLive && d.Failure == nil
	})
	sameAsServer(t, r.srv, st, "T")
	if err := st.Damaged("stocks"); err != nil {
		t.Fatalf("stocks damaged after the recovery: %v", err)
	}
	if n := c.eng.Stats.Sessions.Load() - sessions; n != 0 {
		t.Errorf("%d reconnects during the failure, want 0", n)
	}
}
