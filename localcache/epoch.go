package localcache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/energyscope/energyscope/internal/fileutil"
	"github.com/energyscope/energyscope/localcache/format"
)

// Epochs of the write-ahead log
//
// A dataset's write-ahead log holds records of one epoch: those above the
// snapshot in service. When a snapshot of another epoch takes over (Install
// of a replacement, `es cook` while the store was closed, or a re-created
// dataset whose CURRENT was lost), the old records must never be replayed
// on top of it, and the seqs must keep increasing. The epoch marker, file
// EPOCH of the dataset directory, says "the log's records with seq > floor
// belong to epoch E; records at or below floor are from earlier lives".
// Open replays only records above max(covers_through_seq, floor), and only
// if E is the epoch of the snapshot in service; otherwise it retires the
// whole log: the marker is rewritten with the new epoch and the highest
// seq seen as floor, and the old segments are deleted.

// EpochFile is the epoch marker of a dataset directory.
const EpochFile = "EPOCH"

// epochMarker is the content of EPOCH.
type epochMarker struct {
	ok    bool // the file exists
	epoch uint64
	floor uint64
}

// readEpochMarker reads dir's EPOCH; a missing file is ok == false.
func readEpochMarker(dir string) (epochMarker, error) {
	b, err := os.ReadFile(filepath.Join(dir, EpochFile))
	if errors.Is(err, os.ErrNotExist) {
		return epochMarker{}, nil
	} else if err != nil {
		return epochMarker{}, err
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return epochMarker{}, &format.CorruptionError{File: EpochFile, Offset: -1, Err: fmt.Errorf("want \"<epoch> <floor>\", got %q", b)}
	}
	e, err1 := strconv.ParseUint(f[0], 10, 64)
	fl, err2 := strconv.ParseUint(f[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return epochMarker{}, &format.CorruptionError{File: EpochFile, Offset: -1, Err: err}
	}
	return epochMarker{ok: true, epoch: e, floor: fl}, nil
}

// writeEpochMarker durably replaces dir's EPOCH.
func writeEpochMarker(dir string, epoch, floor uint64) error {
	return fileutil.WriteFile(filepath.Join(dir, EpochFile), []byte(fmt.Sprintf("%d %d\n", epoch, floor)), 0o644)
}

// NextEpoch is the epoch a new snapshot of the dataset in datasetDir
// (<home>/datasets/<name>) should carry to replace whatever it held:
// above the epoch of the snapshot CURRENT names and above the epoch of its
// write-ahead log, so that a dataset re-created after losing CURRENT does
// not reuse an epoch. 1 for a dataset never seen.
func NextEpoch(datasetDir string) uint64 {
	var e uint64
	if mk, err := readEpochMarker(datasetDir); err == nil && mk.ok {
		e = mk.epoch
	}
	if id, err := format.ReadCurrent(datasetDir); err == nil {
		if m, err := format.ReadManifest(filepath.Join(datasetDir, format.SnapshotsDir, id)); err == nil {
			e = max(e, m.Epoch)
		}
	}
	return e + 1
}
