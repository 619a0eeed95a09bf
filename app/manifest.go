package app

import (
	"os"
	"path/filepath"
)

// writeManifest keeps <home>/addin/manifest.xml equal to the bridge's.
func writeManifest(home string, b []byte) error {
	p := manifestPath(home)
	if old, err := os.ReadFile(p); err == nil && string(old) == string(b) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, b, 0o644)
}

func manifestPath(home string) string { return filepath.Join(home, "addin", "manifest.xml") }
