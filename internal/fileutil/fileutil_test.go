package fileutil

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteFileCreatesAndReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	if err := WriteFile(path, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "two" {
		t.Fatalf("read %q, %v; want two", b, err)
	}
	if runtime.GOOS != "windows" {
		st, _ := os.Stat(path)
		if st.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v, want 0600", st.Mode().Perm())
		}
	}
	if names := listDir(t, dir); len(names) != 1 {
		t.Fatalf("directory holds %v, want only f.json", names)
	}
}

// A rename that fails (the target is a non-empty directory) leaves the
// target as it was and no temporary file behind.
func TestWriteFileFailedRenameLeavesTarget(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "target")
	if err := os.MkdirAll(filepath.Join(path, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("new"), 0o644); err == nil {
		t.Fatal("WriteFile over a non-empty directory succeeded")
	}
	if st, err := os.Stat(filepath.Join(path, "inside")); err != nil || !st.IsDir() {
		t.Fatalf("target changed: %v", err)
	}
	if names := listDir(t, dir); len(names) != 1 {
		t.Fatalf("directory holds %v, want only the target", names)
	}
}

func TestWriteFileMissingDir(t *testing.T) {
	err := WriteFile(filepath.Join(t.TempDir(), "no", "f"), []byte("x"), 0o644)
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err %v, want ErrNotExist", err)
	}
}

// A streamed write abandoned half-way (Close without Commit) leaves the
// old file intact and removes the temporary file.
func TestTempFileAbandonKeepsOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "book.xlsx")
	if err := WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := CreateTemp(path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Repeat([]byte("n"), 1<<16)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); !errors.Is(err, ErrDone) {
		t.Fatalf("Commit after Close: %v, want ErrDone", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("target %q, want old", b)
	}
	if names := listDir(t, dir); len(names) != 1 {
		t.Fatalf("directory holds %v, want only the target", names)
	}
	// And a committed one replaces it.
	f, err = CreateTemp(path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString("new")
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Fatalf("target %q, want new", b)
	}
}

func TestRenameDirectoryAcrossDirs(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	for _, d := range []string{filepath.Join(a, "x"), b} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteNew(filepath.Join(a, "x", "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Rename(filepath.Join(a, "x"), filepath.Join(b, "y")); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(b, "y", "f")); err != nil || string(got) != "data" {
		t.Fatalf("after rename: %q %v", got, err)
	}
	if err := SyncDir(filepath.Join(root, "missing")); err == nil && runtime.GOOS != "windows" {
		t.Fatal("SyncDir of a missing directory succeeded")
	}
}
