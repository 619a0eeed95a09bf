package client_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestClientOwnsNoStoreFiles holds the engine to its side of the Sink:
// the store owns the files of a download (paths, staging, .partial files,
// fsyncs, the manifest) and the engine reaches them only through
// Sink.Stage. No non-test file of the package may import path/filepath or
// internal/fileutil, and the only use of os is the host name.
func TestClientOwnsNoStoreFiles(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		osName := ""
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			switch {
			case path == "path/filepath", path == "path", strings.HasSuffix(path, "/internal/fileutil"):
				t.Errorf("%s imports %s: the store owns the files of a download (Sink.Stage)", name, path)
			case path == "os":
				osName = "os"
				if im.Name != nil {
					osName = im.Name.Name
				}
			}
		}
		checked++
		if osName == "" {
			continue
		}
		full, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(full, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == osName && sel.Sel.Name != "Hostname" {
				t.Errorf("%s: os.%s: the store owns the files of a download (Sink.Stage)", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
	if checked < 5 {
		t.Fatalf("checked %d files; run from the package directory", checked)
	}
}
