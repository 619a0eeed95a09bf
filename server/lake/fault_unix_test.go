//go:build unix

package lake

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
)

// TestPublishReadsSurviveATruncatedFile: Publish reads the snapshot's
// files through a mapping; a file truncated under it (a disk error, an
// operator) is an error (ErrBadSnapshot, or the format readers' CorruptionError), not a
// crash (SIGBUS).
func TestPublishReadsSurviveATruncatedFile(t *testing.T) {
	dir := cookSample(t, "stocks", format.WriteOptions{})
	src, err := readSnapshotFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer src.close()
	if err := os.Truncate(filepath.Join(dir, format.DataFile), 0); err != nil {
		t.Fatal(err)
	}
	bad := func(err error) bool {
		return errors.Is(err, ErrBadSnapshot) || errors.As(err, new(*format.CorruptionError))
	}
	if err := writeParquet(io.Discard, src); !bad(err) {
		t.Fatalf("writeParquet over a truncated data.arrow: %v, want ErrBadSnapshot or a CorruptionError", err)
	}
	if _, err := writePuffinTo(new(bytes.Buffer), "x.puffin", src); !bad(err) {
		t.Fatalf("writePuffinTo over a truncated data.arrow: %v, want ErrBadSnapshot", err)
	}
	if err := src.verify(dir); !bad(err) {
		t.Fatalf("verify over a truncated data.arrow: %v, want ErrBadSnapshot", err)
	}
}
