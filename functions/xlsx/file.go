package xlsx

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/energyscope/energyscope/functions"
	"github.com/energyscope/energyscope/internal/fileutil"
)

// ExportFile writes the workbook for req to path, atomically: to a temporary file in
// the same directory, synced, then renamed over path (and the directory synced). On
// any error, including a failed check of the request or the data before anything is
// written, no file is left behind and an existing file at path is untouched.
// path must end in .xlsx; Summary.Path is its absolute form.
func ExportFile(path string, src functions.Source, req Request, progress func(done, total int)) (Summary, error) {
	if path == "" {
		return Summary{}, badRequest("no output file given")
	}
	if !strings.EqualFold(filepath.Ext(path), ".xlsx") {
		return Summary{}, badRequest("output %s: the name must end in .xlsx", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return Summary{}, err
	}
	dir := filepath.Dir(abs)
	if err := checkDir(dir); err != nil {
		return Summary{}, fmt.Errorf("cannot write %s: %w", path, err)
	}
	if st, err := os.Stat(abs); err == nil && st.IsDir() {
		return Summary{}, fmt.Errorf("cannot write %s: it is a directory", path)
	}
	if err := checkNotOpen(abs); err != nil {
		return Summary{}, err
	}
	p, err := prepare(src, req)
	if err != nil {
		return Summary{}, err
	}
	// 0644: a workbook is made to be shared, with the group and whoever opens the
	// folder (the temp file and the rename keep it whole until it is done).
	tmp, err := fileutil.CreateTemp(abs, 0o644)
	if err != nil {
		return Summary{}, fmt.Errorf("cannot write %s: %w", path, describeFSError(err))
	}
	defer tmp.Close() // removes the temporary file unless committed
	sum, err := p.write(tmp.File, progress)
	if err != nil {
		return Summary{}, fmt.Errorf("write %s: %w", path, describeFSError(err))
	}
	if err := tmp.Commit(); err != nil {
		if isLocked(err) {
			return Summary{}, openElsewhere(path)
		}
		return Summary{}, fmt.Errorf("replace %s: %w", path, describeFSError(err))
	}
	sum.Path = abs
	return sum, nil
}

// checkDir explains up front why a directory cannot take the output.
func checkDir(dir string) error {
	st, err := os.Stat(dir)
	if err == nil {
		if !st.IsDir() {
			return fmt.Errorf("%s is a file, not a directory", dir)
		}
		return nil
	}
	// Name the culprit: the nearest existing ancestor, if it is a file.
	for d := filepath.Dir(dir); d != filepath.Dir(d); d = filepath.Dir(d) {
		if s, err := os.Stat(d); err == nil {
			if !s.IsDir() {
				return fmt.Errorf("%s is a file, not a directory", d)
			}
			break
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("directory %s does not exist", dir)
	}
	return describeFSError(err)
}

// openElsewhere is the error for a file that another program (Excel) holds open.
func openElsewhere(path string) error {
	return fmt.Errorf("cannot replace %s: it is open in another program (Excel?) or read-only; close it and export again", path)
}

// describeFSError turns the common reasons into plain words, keeping the cause.
func describeFSError(err error) error {
	var pe *fs.PathError
	switch {
	case errors.Is(err, fs.ErrPermission):
		if errors.As(err, &pe) {
			return fmt.Errorf("permission denied on %s: %w", filepath.Dir(pe.Path), err)
		}
	case isNoSpace(err):
		return fmt.Errorf("the disk is full: %w", err)
	}
	return err
}
