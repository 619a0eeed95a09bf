package client_test

import (
	"encoding/json"
	"testing"

	"github.com/energyscope/energyscope/sync/client"
)

// The words are what the app sends to the frontend, which matches on
// them (frontend/src/views/status.ts): they must not change.
func TestStateWords(t *testing.T) {
	for _, c := range []struct {
		s    client.State
		want string
	}{
		{client.StateNone, ""},
		{client.StateCatchingUp, "catching up"},
		{client.StateLive, "live"},
		{client.StateRebasing, "rebasing"},
		{client.StateDownloading, "downloading"},
		{client.StateOffline, "offline"},
		{client.StateApplyFailing, "apply failing"},
	} {
		if got := c.s.String(); got != c.want {
			t.Errorf("State(%d).String() = %q, want %q", c.s, got, c.want)
		}
		b, err := json.Marshal(client.DatasetProgress{State: c.s})
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil || m["State"] != c.want {
			t.Errorf("State %q in JSON: %s", c.want, b)
		}
	}
	if got := client.State(200).String(); got != "state(200)" {
		t.Errorf("unknown state: %q", got)
	}
}
