//go:build !probe

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	_ "github.com/energyscope/energyscope/localcache/format/tailwrite" // format.Write can write a cold tier (tail.parquet)
	"github.com/energyscope/energyscope/server/cook"
)

// benchDataset is the dataset name the bench cooks into its home.
const benchDataset = "bench"

// cookResult is what our cook did, timed by phase.
type cookResult struct {
	Manifest *format.Manifest
	Read     time.Duration // cook.Builder reading the CSV
	Write    time.Duration // format.Write (sort, normalize, write, fsync)
	Publish  time.Duration // format.Publish (rename, CURRENT, fsync dir)
	Total    time.Duration
	SnapDir  string
}

// cookCSV does what `es cook` does (cmd/es/cook.go cookDataset) without the
// progress bars: read the CSV with the cook Builder, format.Write into a
// temporary snapshot directory, format.Publish. home is emptied first, so
// every run cooks epoch 1 from scratch.
func cookCSV(csv, home string) (*cookResult, error) {
	if err := os.RemoveAll(home); err != nil {
		return nil, err
	}
	start := time.Now()
	b := cook.NewBuilder()
	if _, err := b.AddFile(csv, cook.InputOptions{}); err != nil {
		return nil, err
	}
	read := time.Since(start)
	dsDir := filepath.Join(home, localcache.DatasetsDir, benchDataset)
	tmp, err := format.TempSnapshotDir(dsDir)
	if err != nil {
		return nil, err
	}
	t1 := time.Now()
	m, _, err := format.Write(tmp, b.Table(), format.WriteOptions{Dataset: benchDataset, Epoch: 1})
	if err != nil {
		return nil, err
	}
	write := time.Since(t1)
	t2 := time.Now()
	snapDir, err := format.Publish(dsDir, tmp, m)
	if err != nil {
		return nil, err
	}
	pub := time.Since(t2)
	return &cookResult{Manifest: m, Read: read, Write: write, Publish: pub, Total: time.Since(start), SnapDir: snapDir}, nil
}

// currentSnapshot returns the directory of the snapshot in service of the
// bench dataset under home.
func currentSnapshot(home string) (string, error) {
	dsDir := filepath.Join(home, localcache.DatasetsDir, benchDataset)
	id, err := format.ReadCurrent(dsDir)
	if err != nil {
		return "", fmt.Errorf("no cooked snapshot under %s: %w", home, err)
	}
	return filepath.Join(dsDir, format.SnapshotsDir, id), nil
}
