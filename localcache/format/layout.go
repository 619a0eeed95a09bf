package format

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/energyscope/energyscope/internal/fileutil"
)

// Directory layout of one dataset:
//
//	<dataset>/CURRENT                 name of the snapshot in service
//	<dataset>/snapshots/<id>/         one immutable snapshot
//	<dataset>/snapshots/.tmp-*        a snapshot being written (swept at open)
//	<dataset>/snapshots/.dl-<id>/     a download of snapshot id being staged
//	                                  (localcache.Stage; not swept at open)
//	<dataset>/snapshots/.dl-<id>/<file>.partial  a file of it not complete yet
const (
	CurrentFile   = "CURRENT"
	SnapshotsDir  = "snapshots"
	TempPrefix    = ".tmp-"
	StagingPrefix = ".dl-"
	PartialSuffix = ".partial"
)

// TempSnapshotDir returns a fresh temporary directory name under the
// dataset's snapshots directory, creating the latter if needed. Write
// creates the directory itself.
func TempSnapshotDir(datasetDir string) (string, error) {
	root := filepath.Join(datasetDir, SnapshotsDir)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	d, err := os.MkdirTemp(root, TempPrefix)
	if err != nil {
		return "", err
	}
	// Write wants to create it, so that a crashed Write leaves only a
	// temp-named directory for the sweep.
	if err := os.Remove(d); err != nil {
		return "", err
	}
	return d, nil
}

// Publish moves a finished snapshot from tmpDir to snapshots/<id> and then
// points CURRENT at it (write temp, fsync, rename, fsync directory). If a
// snapshot with the same id is already there (same content), tmpDir is
// removed and CURRENT is pointed at the existing one.
func Publish(datasetDir, tmpDir string, m *Manifest) (string, error) {
	root := filepath.Join(datasetDir, SnapshotsDir)
	final := filepath.Join(root, m.SnapshotID)
	if _, err := os.Stat(final); err == nil {
		if err := os.RemoveAll(tmpDir); err != nil {
			return "", err
		}
	} else {
		if err := fileutil.Rename(tmpDir, final); err != nil {
			return "", fmt.Errorf("publish snapshot: %w", err)
		}
	}
	if err := WriteCurrent(datasetDir, m.SnapshotID); err != nil {
		return "", err
	}
	return final, nil
}

// WriteCurrent atomically replaces CURRENT with id.
func WriteCurrent(datasetDir, id string) error {
	// fileutil.WriteFile's temporary file has a name of its own: two
	// writers never share one.
	return fileutil.WriteFile(filepath.Join(datasetDir, CurrentFile), []byte(id+"\n"), 0o644)
}

// ReadCurrent returns the snapshot id in CURRENT.
func ReadCurrent(datasetDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(datasetDir, CurrentFile))
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if !snapshotIDRE.MatchString(id) {
		return "", corrupt(CurrentFile, -1, "invalid snapshot id %q", id)
	}
	return id, nil
}

// SweepTemp removes temporary snapshot directories left by a crash.
func SweepTemp(datasetDir string) (int, error) {
	root := filepath.Join(datasetDir, SnapshotsDir)
	ents, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), TempPrefix) {
			if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
				return n, err
			}
			n++
		}
	}
	os.Remove(filepath.Join(datasetDir, CurrentFile+".tmp")) // before fileutil
	if tmps, err := filepath.Glob(filepath.Join(datasetDir, "."+CurrentFile+".*.tmp")); err == nil {
		for _, t := range tmps {
			os.Remove(t)
		}
	}
	return n, nil
}

// Verify checks a snapshot directory completely: the manifest, every
// file's size and SHA-256 (any flipped byte), the Arrow structure of
// data.arrow and index.arrow, the Parquet structure of tail.parquet (row
// groups, and that every row belongs to the series the index says), and
// that index.hash resolves every series.
func Verify(dir string) (*Manifest, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	if err := VerifyFiles(dir, m); err != nil {
		return m, err
	}
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) }
	ib, err := read(IndexFile)
	if err != nil {
		return m, err
	}
	x, err := OpenIndex(ib, m.PeriodType, m.Series)
	if err != nil {
		return m, err
	}
	defer x.Close()
	hb, err := read(HashFile)
	if err != nil {
		return m, err
	}
	if err := verifyHash(hb, x.ID, m.Series); err != nil {
		return m, err
	}
	db, err := read(DataFile)
	if err != nil {
		return m, err
	}
	d, err := OpenData(db, m.PeriodType, m.Batches)
	if err != nil {
		return m, err
	}
	defer d.Close()
	if _, err := OpenHot(m.Version, hb, ib, db, x, d); err != nil {
		return m, err
	}
	if err := verifyHot(hb, ib, db, x, d); err != nil {
		return m, err
	}
	tl, err := verifyOpenTail(dir, m)
	if err != nil {
		return m, err
	}
	var rows, coldRows int64
	hot := 0
	tb := &tailBlockCheck{t: tl, block: -1}
	for r := uint32(0); r < uint32(m.Series); r++ {
		if r > 0 && !(x.ID(r-1) < x.ID(r)) {
			return m, corrupt(IndexFile, -1, "series ids not strictly sorted at row %d", r)
		}
		n := x.Length[r]
		rows += int64(n)
		switch Tier(x.Tier[r]) {
		case Hot:
			hot++
		case Cold:
			coldRows += int64(n)
			if err := tb.check(r, x.Batch[r], x.Offset[r], n); err != nil {
				return m, err
			}
			continue
		default:
			return m, corrupt(IndexFile, -1, "row %d: unknown tier %d", r, x.Tier[r])
		}
		if n == 0 {
			continue
		}
		b, err := d.Batch(int(x.Batch[r]))
		if err != nil {
			return m, err
		}
		if err := b.Check(x.Offset[r], n); err != nil {
			return m, err
		}
		for i := x.Offset[r]; i < x.Offset[r]+n; i++ {
			if b.Series[i] != r {
				return m, corrupt(DataFile, -1, "row %d of batch %d belongs to series %d, index says %d", i, x.Batch[r], b.Series[i], r)
			}
		}
	}
	if rows != m.Rows {
		return m, corrupt(IndexFile, -1, "lengths sum to %d rows, manifest says %d", rows, m.Rows)
	}
	if hot != m.HotSeries {
		return m, corrupt(IndexFile, -1, "%d hot series, manifest says %d", hot, m.HotSeries)
	}
	if tl != nil && coldRows != tl.TotalRows {
		return m, corrupt(TailFile, -1, "%d rows, the index's cold series have %d", tl.TotalRows, coldRows)
	}
	return m, nil
}

// verifyOpenTail opens tail.parquet if the manifest lists it, which it
// must exactly when some series is cold.
func verifyOpenTail(dir string, m *Manifest) (*Tail, error) {
	listed := m.File(TailFile) != nil
	switch {
	case !listed && m.HotSeries < m.Series:
		return nil, corrupt(ManifestFile, -1, "%d of %d series are hot but no %s is listed", m.HotSeries, m.Series, TailFile)
	case listed && m.HotSeries == m.Series:
		return nil, corrupt(ManifestFile, -1, "lists %s but every series is hot", TailFile)
	case !listed:
		return nil, nil
	}
	b, err := os.ReadFile(filepath.Join(dir, TailFile))
	if err != nil {
		return nil, err
	}
	return OpenTail(b, m.PeriodType, m.Rows)
}

// tailBlockCheck checks cold series against tail.parquet, decoding the
// series column of one row group at a time (cold series are in index
// order, so each row group is decoded once).
type tailBlockCheck struct {
	t      *Tail
	block  int
	series []uint32
}

func (c *tailBlockCheck) check(r, block, off, n uint32) error {
	if n == 0 {
		return nil
	}
	if c.t == nil {
		return corrupt(IndexFile, -1, "row %d is cold but there is no %s", r, TailFile)
	}
	if int(block) >= c.t.NumBlocks {
		return corrupt(IndexFile, -1, "row %d: row group %d out of range (%d row groups)", r, block, c.t.NumBlocks)
	}
	if int(block) != c.block {
		s, err := c.t.BlockSeries(int(block))
		if err != nil {
			return err
		}
		c.block, c.series = int(block), s
	}
	if uint64(off)+uint64(n) > uint64(len(c.series)) {
		return corrupt(IndexFile, -1, "row %d: rows [%d,%d) outside row group %d of %d rows", r, off, uint64(off)+uint64(n), block, len(c.series))
	}
	for i := off; i < off+n; i++ {
		if c.series[i] != r {
			return corrupt(TailFile, -1, "row %d of row group %d belongs to series %d, index says %d", i, block, c.series[i], r)
		}
	}
	return nil
}
