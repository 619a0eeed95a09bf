package fileutil

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// syncAllowed are the files outside this package that may call Sync
// themselves: the write-ahead log fsyncs frames appended to an open
// segment, which is a log append, not a file replacement.
var syncAllowed = map[string]bool{
	"localcache/delta/wal.go": true,
}

// TestOneOwnerOfDurableWrites holds the module to its rule: every fsync
// outside the write-ahead log's appends goes through this package, so
// that a writer cannot forget the directory fsync or fsync only some of
// its files (the sync client once moved CURRENT to a manifest it had
// never fsynced, and the server's token file was never fsynced).
func TestOneOwnerOfDurableWrites(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	fset := token.NewFileSet()
	var bad []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch {
			case rel == "internal/fileutil", rel == "bench", d.Name() == "node_modules", d.Name() == "testdata",
				rel != "." && strings.HasPrefix(d.Name(), "."):
				return filepath.SkipDir // bench is a module of its own
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || syncAllowed[rel] {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 0 {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Sync" {
				bad = append(bad, fset.Position(call.Pos()).String())
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("%s: fsync outside internal/fileutil; use fileutil.WriteFile, CreateTemp, SyncClose, Rename or SyncDir", b)
	}
}
