package bridge

import (
	"encoding/json"
	"net/http"
	"time"
)

// StatusSource reports the datasets the bridge serves. The store satisfies
// it through an adapter in whoever wires the bridge (cmd/es, app), since
// localcache does not import its consumers.
type StatusSource interface {
	Datasets() ([]DatasetStatus, error)
}

// DatasetStatus is one dataset as /v1/status shows it.
type DatasetStatus struct {
	Name            string    `json:"name"`
	SnapshotID      string    `json:"snapshot"`
	Epoch           uint64    `json:"epoch"`
	Seq             uint64    `json:"seq"` // highest update applied
	Series          int64     `json:"series"`
	Rows            int64     `json:"rows"`
	PendingRows     int       `json:"pending_rows"`        // updates not yet folded into the snapshot
	SnapshotCreated time.Time `json:"snapshot_created"`    // when the snapshot was cooked
	LastSync        time.Time `json:"last_sync,omitzero"`  // last update received by this process; zero if none
	Server          string    `json:"server,omitempty"`    // where the dataset syncs from; empty offline
	Connected       *bool     `json:"connected,omitempty"` // sync connection state, when known
	Error           string    `json:"error,omitempty"`     // last sync error, when known
}

// statusResponse is GET /v1/status.
type statusResponse struct {
	Service  string          `json:"service"`
	URL      string          `json:"url"`
	Now      time.Time       `json:"now"`
	Datasets []DatasetStatus `json:"datasets"`
	Error    string          `json:"error,omitempty"`
	Live     liveStats       `json:"live"`
	Limits   limits          `json:"limits"`
}

type limits struct {
	MaxBody       int64 `json:"max_body"`
	MaxCalls      int   `json:"max_calls"`
	MaxBatchCells int   `json:"max_batch_cells"`
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	resp := statusResponse{
		Service:  "energyscope-bridge",
		URL:      s.origin,
		Now:      s.opts.Now().UTC().Truncate(time.Millisecond),
		Datasets: []DatasetStatus{},
		Live:     s.live.stats(),
		Limits:   limits{MaxBody: s.opts.MaxBody, MaxCalls: s.opts.MaxCalls, MaxBatchCells: s.opts.MaxBatchCells},
	}
	if s.opts.Status != nil {
		ds, err := s.opts.Status.Datasets()
		if err != nil {
			resp.Error = err.Error()
		}
		if ds != nil {
			resp.Datasets = ds
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(resp)
}
