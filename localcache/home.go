package localcache

import (
	"os"
	"path/filepath"
	"runtime"
)

// DefaultHome is the home directory used when none is given: $ES_HOME,
// else the user's data directory (XDG_DATA_HOME or ~/.local/share on
// Linux, ~/Library/Application Support on macOS, %LOCALAPPDATA% on
// Windows) + "EnergyScope".
func DefaultHome() string {
	if h := os.Getenv("ES_HOME"); h != "" {
		return h
	}
	var base string
	switch runtime.GOOS {
	case "windows":
		base = os.Getenv("LOCALAPPDATA")
	case "darwin":
		if h, err := os.UserHomeDir(); err == nil {
			base = filepath.Join(h, "Library", "Application Support")
		}
	default:
		base = os.Getenv("XDG_DATA_HOME")
		if base == "" {
			if h, err := os.UserHomeDir(); err == nil {
				base = filepath.Join(h, ".local", "share")
			}
		}
	}
	if base == "" {
		base = os.TempDir()
	}
	return filepath.Join(base, "EnergyScope")
}
