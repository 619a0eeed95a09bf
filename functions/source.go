package functions

import (
	"errors"
	"time"
)

// ErrNotFound: the series does not exist (wrap it).
var ErrNotFound = errors.New("series not found")

// SeriesInfo describes one series as the store knows it.
type SeriesInfo struct {
	ID, Dataset, Name, Unit, Source, Frequency string // Frequency one of H D W M Q A
	First, Last                                int64  // unix seconds UTC of first/last period (normalized bucket starts)
	Count                                      int
	LatestValue                                float64
	Updated                                    time.Time // when this series' data last changed locally (snapshot or delta); zero if unknown
}

// Source is what the functions read. internal/wiring.Source adapts localcache.Store to
// it for app, cmd/es and the companion; tests use an in-memory one. Implementations must be safe for concurrent use
// if the Engine is shared between goroutines.
type Source interface {
	Info(id string) (SeriesInfo, error)
	// Get returns the points with from <= period <= to (unix seconds UTC), ascending, as fresh slices the caller owns.
	Get(id string, from, to int64) (periods []int64, values []float64, err error)
	Search(query string, limit int) ([]SeriesInfo, error)
}
