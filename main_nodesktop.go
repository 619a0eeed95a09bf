//go:build !desktop

package main

import (
	"fmt"
	"os"
)

// Without the desktop tag there is no window: say how to build one. This
// keeps `go build ./...`, `go vet ./...` and `go test ./...` free of GTK
// and WebKit.
func main() {
	fmt.Fprintln(os.Stderr, "energyscope: built without the desktop tag; build the app with\n"+
		"  go build -tags desktop,production,webkit2_41 -o bin/energyscope .   (Linux)\n"+
		"  GOOS=windows go build -tags desktop,production -ldflags -H=windowsgui -o bin/energyscope.exe .")
	os.Exit(2)
}
