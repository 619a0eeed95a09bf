package client

// Dataset states (DatasetProgress.State).
const (
	StateConnecting   = "connecting"
	StateDownloading  = "downloading"
	StateCatchingUp   = "catching up"
	StateLive         = "live"
	StateRebasing     = "rebasing"
	StateOffline      = "offline"
	StateApplyFailing = "apply failing" // DatasetProgress.Failure says why and when it retries
)
