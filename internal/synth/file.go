package synth

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// WriteFile writes the dataset to path, as CSV or Parquet by extension
// (.csv or .parquet, case-insensitive). It writes path+".tmp" and renames it
// into place, so path never holds a partial file.
func WriteFile(path string, o Options) (Stats, error) {
	var write func(io.Writer, Options) (Stats, error)
	switch strings.ToLower(filepath.Ext(path)) {
	case ".csv":
		write = WriteCSV
	case ".parquet":
		write = WriteParquet
	default:
		return Stats{}, fmt.Errorf("synth: %s: unknown extension (want .csv or .parquet)", path)
	}
	if err := o.Validate(); err != nil {
		return Stats{}, err
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return Stats{}, err
	}
	st, err := write(f, o)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return st, err
	}
	return st, nil
}
