package client

import (
	"encoding/json"

	"github.com/energyscope/energyscope/localcache/format"
)

func jsonManifest(m *format.Manifest) ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	return append(b, '\n'), err
}
