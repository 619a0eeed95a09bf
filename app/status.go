package app

import (
	"io/fs"
	"path/filepath"

	"github.com/energyscope/energyscope/sync/client"
)

// StatusView is bound for the Status view: the store's datasets, the sync
// and the bridge at a glance.
type StatusView struct{ *core }

// Status describes the store, the sync and the bridge.
func (v *StatusView) Status() Status {
	c, err := v.companion()
	cfg := v.config()
	st := Status{Home: cfg.Home, Server: cfg.Server, Datasets: []Dataset{}}
	if err != nil {
		st.Error = words(err)
		st.Bridge.Error = "The bridge is not running."
		return st
	}
	ds, err := c.Store().Status()
	if err != nil {
		st.Error = words(err)
		return st
	}
	prog := map[string]client.DatasetProgress{}
	if eng := c.Engine(); eng != nil {
		p := eng.Progress()
		st.Online, st.Paused = p.Online, p.Paused
		st.Current, st.Failovers = p.Server, p.Failovers
		if p.LastError != "" && !p.Online {
			st.LastError = syncWords(p.Err)
		}
		for _, d := range p.Datasets {
			prog[d.Dataset] = d
		}
	}
	for _, d := range ds {
		dd := Dataset{
			Name: d.Name, SnapshotID: d.Manifest.SnapshotID, Epoch: d.Manifest.Epoch, Seq: d.Seq,
			Series: int64(d.Manifest.Series), Rows: d.Manifest.Rows, PendingRows: d.DeltaRows,
			CreatedMS: d.Manifest.Created.UnixMilli(), State: client.StateOffline.String(),
			DiskBytes: diskUse(c.Store().DatasetDir(d.Name)),
		}
		if d.LastSync > 0 {
			dd.LastSyncMS = d.LastSync / 1e6
		}
		if p, ok := prog[d.Name]; ok {
			dd.State, dd.HeadSeq, dd.Lag = p.State.String(), p.HeadSeq, storeLag(p.HeadSeq, d.Seq, p.Lag)
			if !p.LastSync.IsZero() && p.LastSync.UnixMilli() > dd.LastSyncMS {
				dd.LastSyncMS = p.LastSync.UnixMilli()
			}
		}
		st.Series += dd.Series
		st.Rows += dd.Rows
		st.DiskBytes += dd.DiskBytes
		st.Datasets = append(st.Datasets, dd)
	}
	if br := c.Bridge(); br != nil {
		st.Bridge = Bridge{Running: true, URL: br.URL()}
	} else {
		st.Bridge.Error = words(c.BridgeErr())
	}
	return st
}

// storeLag is how far the store at seq is behind the server's head, from the
// store's seq rather than the sync engine's last report: the store is what
// the views read. Without a head (0) the engine's lag stands.
func storeLag(head, seq, engineLag uint64) uint64 {
	if head == 0 {
		return engineLag
	}
	if seq >= head {
		return 0
	}
	return head - seq
}

// diskUse is the size of the files under dir.
func diskUse(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
