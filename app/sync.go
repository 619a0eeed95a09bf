package app

import (
	"slices"
	"strings"

	"github.com/energyscope/energyscope/sync/client"
)

// SyncView is bound for the Sync view: the sync engine's progress per
// dataset, pause and resume, and the datasets to follow.
type SyncView struct{ *core }

// SyncProgress is the sync engine's progress per dataset.
func (v *SyncView) SyncProgress() Sync { return v.syncProgress() }

// syncProgress is SyncProgress, also sent with EventSync.
func (c *core) syncProgress() Sync {
	comp, err := c.companion()
	cfg := c.config()
	out := Sync{Server: cfg.Server, Configured: cfg.Server != "", Subscribed: slices.Clone(cfg.Datasets), Datasets: []SyncDataset{}}
	if out.Subscribed == nil {
		out.Subscribed = []string{}
	}
	if err != nil {
		out.Error = words(err)
		return out
	}
	local := map[string]bool{}
	for _, n := range comp.Store().DatasetNames() {
		local[n] = true
	}
	seen := map[string]bool{}
	if eng := comp.Engine(); eng != nil {
		p := eng.Progress()
		out.Online, out.Paused = p.Online, p.Paused
		out.Current, out.Failovers = p.Server, p.Failovers
		if !p.LastSync.IsZero() {
			out.LastSyncMS = p.LastSync.UnixMilli()
		}
		if p.LastError != "" && !p.Online {
			out.LastError = syncWords(p.Err)
		}
		for _, d := range p.Datasets {
			seq, lag := d.Seq, d.Lag
			if local[d.Dataset] {
				// The store's own seq, not the engine's last report of it: the
				// engine's figure could lag the store by seconds.
				if _, _, s, err := comp.Store().State(d.Dataset); err == nil {
					seq = max(seq, s)
					lag = storeLag(d.HeadSeq, seq, d.Lag)
				}
			}
			sd := SyncDataset{
				Name: d.Dataset, State: d.State.String(), Local: local[d.Dataset], Seq: seq, HeadSeq: d.HeadSeq, Lag: lag,
				File: d.File, BytesDone: d.BytesDone, BytesTotal: d.BytesTotal, Rate: d.RateBytesPerS, ETASeconds: d.ETA.Seconds(),
			}
			if !d.LastSync.IsZero() {
				sd.LastSyncMS = d.LastSync.UnixMilli()
			}
			seen[d.Dataset] = true
			out.Datasets = append(out.Datasets, sd)
		}
	}
	// Local datasets the engine does not (yet) report.
	for _, n := range comp.Store().DatasetNames() {
		if !seen[n] {
			_, _, seq, _ := comp.Store().State(n)
			out.Datasets = append(out.Datasets, SyncDataset{Name: n, State: client.StateOffline.String(), Local: true, Seq: seq})
		}
	}
	slices.SortFunc(out.Datasets, func(x, y SyncDataset) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// Pause stops syncing until Resume; the local data keeps serving.
func (v *SyncView) Pause() Sync {
	if c, err := v.companion(); err == nil && c.Engine() != nil {
		c.Engine().Pause()
	}
	return v.SyncProgress()
}

// Resume reconnects after Pause.
func (v *SyncView) Resume() Sync {
	if c, err := v.companion(); err == nil && c.Engine() != nil {
		c.Engine().Resume()
	}
	return v.SyncProgress()
}

// SetDatasets changes the datasets to sync (empty: all of the server's),
// saves them in the settings and restarts the sync. Datasets dropped stay
// on disk and keep serving, but are no longer updated.
func (v *SyncView) SetDatasets(names []string) Sync {
	s, err := v.savedSettings()
	if err != nil {
		return Sync{Error: words(err), Datasets: []SyncDataset{}, Subscribed: []string{}}
	}
	s.Datasets = names
	s = s.Normalize()
	if err := s.Validate(); err != nil {
		out := v.SyncProgress()
		out.Error = words(err)
		return out
	}
	if err := v.save(s); err != nil {
		out := v.SyncProgress()
		out.Error = words(err)
		return out
	}
	if err := v.wait(); err != nil {
		out := v.SyncProgress()
		out.Error = words(err)
		return out
	}
	v.mu.Lock()
	v.cfg.Datasets = slices.Clone(s.Datasets)
	c := v.comp
	var serr error
	if c != nil {
		serr = c.SetSync(v.cfg.Server, v.cfg.Token, v.cfg.Datasets)
	}
	v.mu.Unlock()
	out := v.SyncProgress()
	if serr != nil {
		out.Error = words(serr)
	}
	return out
}
