package server

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
)

// HealthState is the state of the server or of one dataset in Health.
type HealthState string

// Health states.
const (
	HealthOK HealthState = "ok"
	// HealthDamaged: a dataset the server cannot serve or update (its
	// CURRENT lost or unreadable, its snapshot or history failed to
	// open). The others serve; a PUT of the dataset starts a clean epoch.
	HealthDamaged HealthState = "damaged"
	// HealthDegraded: the server serves, but a dataset is damaged or the
	// lake's catalog does not answer (no snapshot can be published).
	HealthDegraded HealthState = "degraded"
)

// DatasetHealth is one dataset in Health.
type DatasetHealth struct {
	Name     string      `json:"name"`
	State    HealthState `json:"state"`
	Reason   string      `json:"reason,omitempty"` // why damaged
	Epoch    uint64      `json:"epoch,omitempty"`
	Snapshot string      `json:"snapshot,omitempty"`
	Seq      uint64      `json:"seq,omitempty"`
	// Vintage is the lake vintage the dataset serves (a lake-backed
	// server only).
	Vintage *VintageHealth `json:"vintage,omitempty"`
}

// Health is the answer of GET /healthz.
type Health struct {
	State    HealthState     `json:"state"` // ok or degraded
	Damaged  int             `json:"damaged"`
	Datasets []DatasetHealth `json:"datasets,omitempty"` // by name
	// Lake is the lake's catalog state (a lake-backed server only). An
	// unreachable catalog makes the state degraded: lookups and sync
	// serve what is mapped, PUTs and compactions fail with 503.
	Lake *LakeHealth `json:"lake,omitempty"`
	// Replica says what a lake-backed server waits for (replica.go): while
	// Replica.Serving is false /healthz answers 503.
	Replica *ReplicaHealth `json:"replica,omitempty"`
}

// Health reports the server's and every dataset's state.
func (s *Server) Health() Health {
	h := Health{State: HealthOK}
	damaged := s.Damaged()
	for _, hd := range s.Heads() {
		if slices.ContainsFunc(damaged, func(d DatasetHealth) bool { return d.Name == hd.Dataset }) {
			continue
		}
		h.Datasets = append(h.Datasets, DatasetHealth{Name: hd.Dataset, State: HealthOK, Epoch: hd.Epoch, Snapshot: hd.Snapshot, Seq: hd.Seq,
			Vintage: s.vintageHealth(hd.Dataset)})
	}
	h.Datasets = append(h.Datasets, damaged...)
	slices.SortFunc(h.Datasets, func(a, b DatasetHealth) int { return strings.Compare(a.Name, b.Name) })
	if h.Damaged = len(damaged); h.Damaged > 0 {
		h.State = HealthDegraded
	}
	if h.Lake = s.lakeHealth(); h.Lake != nil && h.Lake.Catalog != CatalogReachable {
		h.State = HealthDegraded
	}
	if h.Replica = s.replicaHealth(); h.Replica != nil {
		if h.Lake != nil && h.Lake.Catalog == CatalogReachable && h.Replica.Serving {
			// The catalog answered just now: a failure of the last
			// poll is older news.
			h.Replica.Waits = slices.DeleteFunc(h.Replica.Waits, func(w Wait) bool { return w.Kind == WaitCatalog })
		}
		if !h.Replica.Serving || len(h.Replica.Waits) > 0 {
			h.State = HealthDegraded
		}
	}
	return h
}

// Damaged lists the datasets of the home that are not served (the
// store's damaged ones, and directories the store does not list at all),
// or served without the server's history (no updates), with the reason. A
// dataset directory never disappears silently: one whose CURRENT is gone
// is listed here until a PUT replaces it.
func (s *Server) Damaged() []DatasetHealth {
	out := []DatasetHealth{}
	served := map[string]bool{}
	for _, n := range s.store.DatasetNames() {
		served[n] = true
	}
	st, _ := s.store.Status()
	for _, d := range st {
		if d.Health != localcache.Healthy {
			why := "damaged"
			if d.Err != nil {
				why = d.Err.Error()
			}
			out = append(out, DatasetHealth{Name: d.Name, State: HealthDamaged, Reason: s.scrub(why)})
		}
	}
	s.mu.Lock()
	for name, why := range s.broken {
		out = append(out, DatasetHealth{Name: name, State: HealthDamaged, Reason: "history: " + s.scrub(why)})
	}
	s.mu.Unlock()
	ents, _ := os.ReadDir(filepath.Join(s.opts.Home, localcache.DatasetsDir))
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || strings.HasPrefix(name, ".") || served[name] || s.replacing(name) {
			continue
		}
		out = append(out, DatasetHealth{Name: name, State: HealthDamaged, Reason: s.whyNotServed(name)})
	}
	slices.SortFunc(out, func(a, b DatasetHealth) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// whyNotServed explains why the store does not serve dataset directory
// name.
func (s *Server) whyNotServed(name string) string {
	if err := format.ValidDatasetName(name); err != nil {
		return s.scrub(err.Error())
	}
	dir := s.store.DatasetDir(name)
	id, err := format.ReadCurrent(dir)
	if errors.Is(err, os.ErrNotExist) {
		return "CURRENT is missing"
	} else if err != nil {
		return "CURRENT: " + s.scrub(err.Error())
	}
	if _, err := format.ReadManifest(filepath.Join(dir, format.SnapshotsDir, id)); err != nil {
		return "snapshot " + id + ": " + s.scrub(err.Error())
	}
	return "snapshot " + id + " failed to open"
}

// scrub replaces the home's path in a message that leaves the server.
func (s *Server) scrub(msg string) string {
	if h := s.opts.Home; h != "" {
		msg = strings.ReplaceAll(msg, h, "HOME")
	}
	return msg
}
