package lake

import (
	"errors"
	"fmt"
)

// ErrHeadMoved: a publish pinned to a parent (PublishOptions.Over) found
// that the table's head is another snapshot: someone else committed
// first. Nothing was committed and the publish's files were removed.
//
// Replicas compacting the same dataset use it as their arbiter (README
// "Running several servers"): each publishes its compaction over the
// vintage it compacted, so of several compactions of one vintage exactly
// one lands and the others install the winner's vintage instead of
// retrying.
var ErrHeadMoved = errors.New("lake: the table's head moved")

// checkOver fails with ErrHeadMoved when a publish pinned over parent
// (not 0) finds head instead.
func checkOver(parent, head int64) error {
	if parent == 0 || parent == head {
		return nil
	}
	return fmt.Errorf("%w: the head is iceberg snapshot %d, the publish was over %d", ErrHeadMoved, head, parent)
}
