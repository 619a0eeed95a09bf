package fileutil

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWriteFileFailedWriteKeepsOld makes the write itself fail (a file
// size limit, so write returns EFBIG after a partial write) in a child
// process, and checks that the old file is intact and no temporary file
// is left: the failure a full disk gives, without filling a disk.
func TestWriteFileFailedWriteKeepsOld(t *testing.T) {
	if path := os.Getenv("FILEUTIL_CHILD_PATH"); path != "" {
		lim := &syscall.Rlimit{Cur: 4096, Max: 4096}
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, lim); err != nil {
			t.Fatal(err)
		}
		err := WriteFile(path, bytes.Repeat([]byte("n"), 1<<20), 0o644)
		if err == nil {
			t.Fatal("a write past RLIMIT_FSIZE succeeded")
		}
		t.Logf("failed as expected: %v", err)
		return
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.json")
	if err := WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWriteFileFailedWriteKeepsOld$", "-test.v")
	cmd.Env = append(os.Environ(), "FILEUTIL_CHILD_PATH="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	} else if !bytes.Contains(out, []byte("failed as expected")) {
		t.Fatalf("child did not run the failing write:\n%s", out)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "old" {
		t.Fatalf("after a failed write the file holds %q (%v), want old", b, err)
	}
	if names := listDir(t, dir); len(names) != 1 {
		t.Fatalf("directory holds %v, want only the target", names)
	}
}
