package companion

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/energyscope/energyscope/functions/bridge"
	"github.com/energyscope/energyscope/internal/fileutil"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/sync/client"
)

// SettingsFile is the settings file's name in SettingsDir.
const SettingsFile = "settings.json"

// Settings are the desktop app's saved choices. A zero field means the
// default: no server (offline), the default home (localcache.DefaultHome),
// bridge.DefaultPort, every dataset of the server.
type Settings struct {
	// Server is the server to sync from, or several replicas of it,
	// comma-separated, tried in order (client.ParseServers).
	Server    string   `json:"server,omitempty"`
	Token     string   `json:"token,omitempty"`
	Home      string   `json:"home,omitempty"`
	Port      int      `json:"port,omitempty"`
	Datasets  []string `json:"datasets,omitempty"`
	Bandwidth int64    `json:"bandwidth,omitempty"` // bytes/s for snapshot downloads; 0 = no limit
}

// FolderSettingsFile is the name, in a data folder (a home), of the settings
// that belong to that folder: the server it syncs from, the token and the
// datasets. They live with the data, not with the user, so that opening
// another folder (--home other) never syncs it from the first one's server.
const FolderSettingsFile = "sync.json"

// FolderSettingsPath is the folder settings' file in home.
func FolderSettingsPath(home string) string { return filepath.Join(home, FolderSettingsFile) }

// Split parts s into the user's settings (the home, the bridge port, the
// bandwidth: SettingsPath) and the data folder's (server, token, datasets:
// FolderSettingsPath).
func (s Settings) Split() (user, folder Settings) {
	user = Settings{Home: s.Home, Port: s.Port, Bandwidth: s.Bandwidth}
	folder = Settings{Server: s.Server, Token: s.Token, Datasets: s.Datasets}
	return user, folder
}

// WithFolder is s with the data folder's part (server, token, datasets) of f.
func (s Settings) WithFolder(f Settings) Settings {
	s.Server, s.Token, s.Datasets = f.Server, f.Token, f.Datasets
	return s
}

// SettingsPath is where the user's settings live:
// os.UserConfigDir()/EnergyScope/settings.json (~/.config on Linux,
// %AppData% on Windows, ~/Library/Application Support on macOS).
func SettingsPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("settings: %w", err)
	}
	return filepath.Join(dir, "EnergyScope", SettingsFile), nil
}

// LoadSettings reads the settings at path. A missing file is the zero
// Settings (the defaults), not an error.
func LoadSettings(path string) (Settings, error) {
	var s Settings
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	} else if err != nil {
		return s, fmt.Errorf("read settings: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return Settings{}, fmt.Errorf("settings %s: %w", path, err)
	}
	return s, nil
}

// SaveSettings validates s and writes it to path with mode 0600 (it holds
// the server token), replacing the old file atomically.
func SaveSettings(path string, s Settings) error {
	s = s.Normalize()
	if err := s.Validate(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save settings: %w", err)
	}
	if err := fileutil.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("save settings: %w", err)
	}
	return nil
}

// normalizeServers trims spaces and trailing slashes from each entry of
// a comma-separated server list (an entry that is empty stays, for
// Validate to refuse).
func normalizeServers(list string) string {
	if strings.TrimSpace(list) == "" {
		return ""
	}
	parts := strings.Split(list, ",")
	for i, p := range parts {
		parts[i] = strings.TrimRight(strings.TrimSpace(p), "/")
	}
	return strings.Join(parts, ",")
}

// Normalize trims spaces (and each server's trailing slash) and drops
// empty and repeated dataset names.
func (s Settings) Normalize() Settings {
	s.Server = normalizeServers(s.Server)
	s.Token = strings.TrimSpace(s.Token)
	s.Home = strings.TrimSpace(s.Home)
	var ds []string
	seen := map[string]bool{}
	for _, d := range s.Datasets {
		d = strings.TrimSpace(d)
		if d != "" && !seen[d] {
			seen[d] = true
			ds = append(ds, d)
		}
	}
	s.Datasets = ds
	return s
}

// Validate says in words what is wrong with s, if anything.
func (s Settings) Validate() error {
	if s.Server != "" {
		if _, err := client.ParseServers(s.Server); err != nil {
			return err
		}
	}
	if s.Token != "" && s.Server == "" {
		return errors.New("a token needs a server")
	}
	if s.Home != "" && !filepath.IsAbs(s.Home) {
		return fmt.Errorf("home %q: want a full path", s.Home)
	}
	if s.Port < 0 || s.Port > 65535 {
		return fmt.Errorf("bridge port %d: want 1 to 65535 (or empty for %d)", s.Port, bridge.DefaultPort)
	}
	if s.Bandwidth < 0 {
		return errors.New("bandwidth limit cannot be negative")
	}
	for _, d := range s.Datasets {
		if err := format.ValidDatasetName(d); err != nil {
			return fmt.Errorf("dataset %q: %v", d, err)
		}
	}
	return nil
}

// BridgePort is the port to run the bridge on: Port, or the default.
func (s Settings) BridgePort() int {
	if s.Port == 0 {
		return bridge.DefaultPort
	}
	return s.Port
}
