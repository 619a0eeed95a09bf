package client

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// ErrServerList is wrapped by every error of ParseServers: a server list
// that is empty, names a server twice or holds something that is not an
// http(s) URL with a host.
var ErrServerList = errors.New("bad server list")

// ServerListError is one refused entry of a server list.
type ServerListError struct {
	Index  int    // 0-based position in the list
	Server string // the entry as given (trimmed)
	Reason string
}

func (e *ServerListError) Error() string {
	return fmt.Sprintf("server %d %q: %s", e.Index+1, e.Server, e.Reason)
}

func (e *ServerListError) Unwrap() error { return ErrServerList }

// ParseServers splits a comma-separated list of server base URLs
// (http://host:port or https://...), in the order the engine tries them.
// Spaces around entries and a trailing slash are dropped. It refuses an
// empty list or entry, a URL that does not parse or is not http(s) with a
// host, and a server named twice (after that normalisation): the error is
// a *ServerListError that wraps ErrServerList.
func ParseServers(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, fmt.Errorf("%w: no server", ErrServerList)
	}
	parts := strings.Split(list, ",")
	out := make([]string, 0, len(parts))
	seen := map[string]int{}
	for i, p := range parts {
		s := strings.TrimRight(strings.TrimSpace(p), "/")
		if s == "" {
			return nil, &ServerListError{Index: i, Server: s, Reason: "empty entry (two commas, or a comma at an end)"}
		}
		u, err := url.Parse(s)
		if err != nil {
			return nil, &ServerListError{Index: i, Server: s, Reason: "want a URL such as https://energyscope.example.com (" + err.Error() + ")"}
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, &ServerListError{Index: i, Server: s, Reason: "want a URL such as https://energyscope.example.com"}
		}
		if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return nil, &ServerListError{Index: i, Server: s, Reason: "want a base URL without user, query or fragment"}
		}
		key := strings.ToLower(u.Scheme + "://" + u.Host + u.Path)
		if j, dup := seen[key]; dup {
			return nil, &ServerListError{Index: i, Server: s, Reason: fmt.Sprintf("the same server as entry %d", j+1)}
		}
		seen[key] = i
		out = append(out, s)
	}
	return out, nil
}
