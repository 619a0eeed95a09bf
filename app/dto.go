package app

import (
	"math"
	"strconv"
)

// The DTOs are what the bound methods return to the frontend, as JSON.
// Every one that can fail has an Error field: a sentence for the user,
// empty on success; a bound method never returns a Go error. Times are
// unix milliseconds (JavaScript's Date) with 0 for "never", except the
// points of a series, which are unix seconds as uPlot wants them.

// Hello is what the frontend asks first, with the data of its first view:
// Open when the app was started with a series to show, else Status.
type Hello struct {
	Version    string   `json:"version"`
	Home       string   `json:"home"`
	Platform   string   `json:"platform"` // GOOS
	OpenSeries string   `json:"openSeries,omitempty"`
	Compare    []string `json:"compare"` // series to draw beside OpenSeries (--compare)
	Status     *Status  `json:"status,omitempty"`
	Open       *Opened  `json:"open,omitempty"`
	Error      string   `json:"error,omitempty"`
}

// Opened is a series as the Explorer first shows it: its details, all its
// points as stored and the formula that fetches them.
type Opened struct {
	Info    Info    `json:"info"`
	Series  Series  `json:"series"`
	Formula Formula `json:"formula"`
}

// Status is the Status view: the store's datasets, the sync state and the
// bridge.
type Status struct {
	Home      string    `json:"home"`
	Server    string    `json:"server"`            // empty: offline by choice; several replicas comma-separated
	Current   string    `json:"current,omitempty"` // the server of Server's list in use (or being tried)
	Failovers int64     `json:"failovers"`         // moves to the next server of the list
	Online    bool      `json:"online"`
	Paused    bool      `json:"paused"`
	LastError string    `json:"lastError,omitempty"` // the sync engine's last error, in words
	Datasets  []Dataset `json:"datasets"`
	Series    int64     `json:"series"`
	Rows      int64     `json:"rows"`
	DiskBytes int64     `json:"diskBytes"`
	Bridge    Bridge    `json:"bridge"`
	Error     string    `json:"error,omitempty"`
}

// Dataset is one dataset of the store.
type Dataset struct {
	Name        string `json:"name"`
	SnapshotID  string `json:"snapshotId"`
	Epoch       uint64 `json:"epoch"`
	Seq         uint64 `json:"seq"`
	HeadSeq     uint64 `json:"headSeq"` // the server's, when known
	Lag         uint64 `json:"lag"`     // updates behind the server
	Series      int64  `json:"series"`
	Rows        int64  `json:"rows"`
	PendingRows int    `json:"pendingRows"`
	CreatedMS   int64  `json:"createdMs"`  // when the snapshot was cooked
	LastSyncMS  int64  `json:"lastSyncMs"` // last update received
	State       string `json:"state"`      // a client.State's word: "offline", "live", "downloading", ...
	DiskBytes   int64  `json:"diskBytes"`
}

// Bridge is the state of the localhost bridge Excel talks to.
type Bridge struct {
	Running bool   `json:"running"`
	URL     string `json:"url,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Sync is the Sync view.
type Sync struct {
	Configured bool          `json:"configured"`        // a server is set
	Server     string        `json:"server"`            // several replicas comma-separated
	Current    string        `json:"current,omitempty"` // the server of Server's list in use (or being tried)
	Failovers  int64         `json:"failovers"`         // moves to the next server of the list
	Online     bool          `json:"online"`
	Paused     bool          `json:"paused"`
	LastError  string        `json:"lastError,omitempty"`
	LastSyncMS int64         `json:"lastSyncMs"`
	Subscribed []string      `json:"subscribed"` // empty: every dataset of the server
	Datasets   []SyncDataset `json:"datasets"`
	Error      string        `json:"error,omitempty"`
}

// SyncDataset is one dataset's sync progress.
type SyncDataset struct {
	Name       string  `json:"name"`
	State      string  `json:"state"` // a client.State's word
	Local      bool    `json:"local"` // the store holds it
	Seq        uint64  `json:"seq"`
	HeadSeq    uint64  `json:"headSeq"`
	Lag        uint64  `json:"lag"`
	File       string  `json:"file,omitempty"`
	BytesDone  int64   `json:"bytesDone"`
	BytesTotal int64   `json:"bytesTotal"`
	Rate       float64 `json:"rate"`       // bytes per second
	ETASeconds float64 `json:"etaSeconds"` // of the download
	LastSyncMS int64   `json:"lastSyncMs"`
}

// SearchResult is the answer to Search.
type SearchResult struct {
	Query  string      `json:"query"`
	Hits   []SearchHit `json:"hits"`
	More   bool        `json:"more"` // more hits than shown
	Micros int64       `json:"micros"`
	Error  string      `json:"error,omitempty"`
}

// SeriesChanged is the data of EventSeries: a delta touched these series of
// dataset (none named: all of them, as after a snapshot swap).
type SeriesChanged struct {
	Dataset string   `json:"dataset"`
	IDs     []string `json:"ids"`
}

// SearchHit is one series found.
type SearchHit struct {
	ID        string `json:"id"`
	Dataset   string `json:"dataset"`
	Name      string `json:"name"`
	Unit      string `json:"unit"`
	Frequency string `json:"frequency"`
	Source    string `json:"source"`
}

// Info describes one series.
type Info struct {
	ID         string `json:"id"`
	Dataset    string `json:"dataset"`
	Name       string `json:"name"`
	Unit       string `json:"unit"`
	Source     string `json:"source"`
	Frequency  string `json:"frequency"`     // H D W M Q A
	FreqName   string `json:"frequencyName"` // hourly, daily, ...
	First      int64  `json:"first"`         // unix seconds of the first period; 0 without data
	Last       int64  `json:"last"`
	Count      int    `json:"count"`
	Latest     Float  `json:"latest"`
	UpdatedMS  int64  `json:"updatedMs"`
	SnapshotID string `json:"snapshotId"`
	Seq        uint64 `json:"seq"`
	Pending    bool   `json:"pending"` // updates not yet folded into the snapshot
	Formula    string `json:"formula"` // the plain =ES.Get of the whole series
	// Ref is how a formula names the series: the id, or dataset:id when the
	// id alone names another series or none (the id is in several datasets).
	Ref   string `json:"ref"`
	Error string `json:"error,omitempty"`
}

// Series is the points of one series for the chart and the table.
type Series struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	Unit      string  `json:"unit"`
	Frequency string  `json:"frequency"` // of the points: the stored one, or per
	Per       string  `json:"per"`
	Agg       string  `json:"agg"`
	Times     []int64 `json:"times"` // unix seconds UTC, ascending
	Values    Floats  `json:"values"`
	Truncated bool    `json:"truncated"` // only the most recent MaxPoints are here
	Note      string  `json:"note,omitempty"`
	Error     string  `json:"error,omitempty"`
}

// GetOptions are ES.Get's options as the Explorer and the formula take
// them; empty fields are ES.Get's defaults.
type GetOptions struct {
	Per     string `json:"per"`  // D W M Q A
	Agg     string `json:"agg"`  // last first avg sum min max (with Per)
	Fill    string `json:"fill"` // none prev na
	Desc    bool   `json:"desc"` // newest first
	Headers bool   `json:"headers"`
	Last    int    `json:"last"` // only the N most recent dates
}

// Formula is an =ES.Get(...) to paste into Excel.
type Formula struct {
	Text  string `json:"text"`
	Rows  int    `json:"rows"` // rows it spills to today, headers included
	Cols  int    `json:"cols"`
	Error string `json:"error,omitempty"`
}

// ExportRequest says what to export.
type ExportRequest struct {
	Series   []string `json:"series"`
	From     string   `json:"from"`
	To       string   `json:"to"`
	Per      string   `json:"per"`
	Agg      string   `json:"agg"`
	Fill     string   `json:"fill"`
	Formulas bool     `json:"formulas"` // live =ES.Get formulas instead of values
	Path     string   `json:"path"`     // the .xlsx to write
}

// ExportResult reports a finished (or failed) export.
type ExportResult struct {
	Path   string `json:"path"`
	Series int    `json:"series"`
	Rows   int    `json:"rows"`
	Cells  int    `json:"cells"`
	Bytes  int64  `json:"bytes"`
	Millis int64  `json:"millis"`
	Error  string `json:"error,omitempty"`
}

// ExportProgress is the payload of the "export:progress" event.
type ExportProgress struct {
	Done  int `json:"done"`
	Total int `json:"total"`
}

// Path is a file or folder the user chose, or a suggestion.
type Path struct {
	Path  string `json:"path"` // empty: cancelled
	Error string `json:"error,omitempty"`
}

// Excel is the Excel view: how to connect Excel to this app.
type Excel struct {
	Running      bool     `json:"running"`
	BridgeURL    string   `json:"bridgeUrl"`
	Port         int      `json:"port"`
	ManifestURL  string   `json:"manifestUrl"`
	ManifestPath string   `json:"manifestPath"` // a copy on disk, for sideloading
	CAPath       string   `json:"caPath"`
	CAName       string   `json:"caName"`
	CASHA256     string   `json:"caSha256"`
	CATrusted    bool     `json:"caTrusted"`
	TrustCommand string   `json:"trustCommand"` // for this platform
	Steps        []string `json:"steps"`
	Error        string   `json:"error,omitempty"`
}

// Settings are the saved settings, as the Settings view edits them.
type Settings struct {
	Server    string   `json:"server"`
	Token     string   `json:"token"`
	Home      string   `json:"home"` // empty: the default
	Port      int      `json:"port"` // 0: the default
	Datasets  []string `json:"datasets"`
	Bandwidth int64    `json:"bandwidth"`
	// Read-only facts shown beside the fields.
	File        string `json:"file"`        // where the settings are saved
	DefaultHome string `json:"defaultHome"` // the home when Home is empty
	DefaultPort int    `json:"defaultPort"`
	ActiveHome  string `json:"activeHome"` // the home in use now
	HomeFixed   bool   `json:"homeFixed"`  // --home or ES_HOME overrides Home
	Message     string `json:"message,omitempty"`
	Error       string `json:"error,omitempty"`
}

// Float is a float64 that is null in JSON when it is not finite (JSON has
// no NaN).
type Float float64

// MarshalJSON implements json.Marshaler.
func (f Float) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

// Floats are values with null for NaN (a date without a value).
type Floats []float64

// MarshalJSON implements json.Marshaler.
func (fs Floats) MarshalJSON() ([]byte, error) {
	if fs == nil {
		return []byte("[]"), nil
	}
	b := make([]byte, 0, 2+len(fs)*10)
	b = append(b, '[')
	for i, v := range fs {
		if i > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			b = append(b, "null"...)
		} else {
			b = strconv.AppendFloat(b, v, 'g', -1, 64)
		}
	}
	return append(b, ']'), nil
}

// Comparison is several series on one chart (App.Compare).
type Comparison struct {
	Times     []int64    `json:"times"`
	Series    []Compared `json:"series"`
	Units     []string   `json:"units"` // in axis order: the first on the left, the rest on the right
	Truncated bool       `json:"truncated"`
	Note      string     `json:"note,omitempty"`
	Error     string     `json:"error,omitempty"`
}

// Compared is one series of a Comparison: Values align with Comparison.Times.
type Compared struct {
	Ref     string `json:"ref"`
	ID      string `json:"id"`
	Dataset string `json:"dataset"`
	Name    string `json:"name"`
	Unit    string `json:"unit"`
	Axis    int    `json:"axis"` // 0 left, 1 right
	Values  Floats `json:"values"`
}
