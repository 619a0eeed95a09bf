package client

import "strconv"

// State is a dataset's sync state (DatasetProgress.State). Its String is
// the word a UI shows and the value the app sends to the frontend, so the
// words are part of the contract: do not reword them.
type State uint8

// Dataset states.
const (
	// StateNone is a dataset known from the server's heads for which
	// neither a catch-up nor a snapshot has come yet. It has no word (a UI
	// shows it as it shows offline).
	StateNone State = iota
	// StateCatchingUp: a catch-up is being received or applied.
	StateCatchingUp
	// StateLive: current with the server, applying its live deltas.
	StateLive
	// StateRebasing: compacting locally to match the server's snapshot.
	StateRebasing
	// StateDownloading: downloading the server's snapshot.
	StateDownloading
	// StateOffline: no connection (the engine reconnects, or is paused).
	StateOffline
	// StateApplyFailing: the dataset's local apply fails;
	// DatasetProgress.Failure says why and when it retries.
	StateApplyFailing
)

var stateWords = [...]string{
	StateNone:         "",
	StateCatchingUp:   "catching up",
	StateLive:         "live",
	StateRebasing:     "rebasing",
	StateDownloading:  "downloading",
	StateOffline:      "offline",
	StateApplyFailing: "apply failing",
}

func (s State) String() string {
	if int(s) < len(stateWords) {
		return stateWords[s]
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// MarshalText makes a State its word in JSON and text encodings.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
