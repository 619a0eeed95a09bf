package lake

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/energyscope/energyscope/internal/fileutil"
	"github.com/energyscope/energyscope/localcache/format"
)

// The served-vintage record (FORMAT.md, "The lake"): a server keeps, per
// dataset, where the vintage it serves lies, in
// <home>/lake/served/<dataset>.json, written (atomically, fsynced) when a
// vintage goes in service. At start it maps that vintage with OpenServing
// without waiting for the catalog, which it opens at the same time and
// asks afterwards whether the head moved; a catalog that is down then
// costs the start nothing but the check.
const (
	ServedDir    = "served"
	servedFormat = "energyscope-served-vintage"
)

type servedRecord struct {
	Format  string        `json:"format"`
	Version int           `json:"version"`
	Dataset string        `json:"dataset"`
	Serving *ServingIndex `json:"serving"`
}

// ServedPath is the served-vintage record of dataset in home.
func ServedPath(home, dataset string) string {
	return filepath.Join(home, Dir, ServedDir, dataset+".json")
}

// WriteServed records si as the vintage dataset serves in home.
func WriteServed(home, dataset string, si *ServingIndex) error {
	if err := format.ValidDatasetName(dataset); err != nil {
		return err
	}
	b, err := json.Marshal(servedRecord{Format: servedFormat, Version: 1, Dataset: dataset, Serving: si})
	if err != nil {
		return err
	}
	p := ServedPath(home, dataset)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return fileutil.WriteFile(p, b, 0o644)
}

// ReadServed reads the served-vintage record of dataset in home
// (os.ErrNotExist when there is none); a record that does not parse or
// breaks the layout rules is a *format.CorruptionError.
func ReadServed(home, dataset string) (*ServingIndex, error) {
	if err := format.ValidDatasetName(dataset); err != nil {
		return nil, err
	}
	p := ServedPath(home, dataset)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var r servedRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, &format.CorruptionError{File: p, Offset: -1, Err: err}
	}
	if r.Format != servedFormat || r.Version != 1 || r.Dataset != dataset || r.Serving == nil {
		return nil, &format.CorruptionError{File: p, Offset: -1, Err: fmt.Errorf("not a served-vintage record of %s (format %q version %d dataset %q)", dataset, r.Format, r.Version, r.Dataset)}
	}
	if err := r.Serving.check(); err != nil {
		return nil, &format.CorruptionError{File: p, Offset: -1, Err: err}
	}
	return r.Serving, nil
}
