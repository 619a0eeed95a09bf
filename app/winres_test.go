package app_test

import (
	"bytes"
	"debug/pe"
	"encoding/binary"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"unicode/utf16"
)

// TestWindowsResources cross-builds the Windows app as CI does and checks
// that rsrc_windows_amd64.syso (made from build/windows/winres.json by
// go-winres, see the Makefile's dist target) put an icon, a manifest and
// a version resource into it, with wails.json's version.
func TestWindowsResources(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	var wails struct {
		Info struct {
			ProductVersion string `json:"productVersion"`
		} `json:"info"`
	}
	b, err := os.ReadFile(filepath.Join(repoRoot, "wails.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &wails); err != nil || wails.Info.ProductVersion == "" {
		t.Fatalf("wails.json: %v %+v", err, wails)
	}

	exe := filepath.Join(t.TempDir(), "energyscope.exe")
	build := exec.Command("go", "build", "-tags", "desktop,production", "-ldflags", "-H=windowsgui", "-o", exe, ".")
	build.Dir = repoRoot
	build.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("GOOS=windows go build: %v\n%s", err, out)
	}
	f, err := pe.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sec := f.Section(".rsrc")
	if sec == nil {
		t.Fatal("no .rsrc section: rsrc_windows_amd64.syso was not linked")
	}
	rsrc, err := sec.Data()
	if err != nil || len(rsrc) < 16 {
		t.Fatalf(".rsrc: %v (%d bytes)", err, len(rsrc))
	}
	// The root IMAGE_RESOURCE_DIRECTORY lists the resource types.
	named, ids := binary.LittleEndian.Uint16(rsrc[12:]), binary.LittleEndian.Uint16(rsrc[14:])
	types := map[uint32]bool{}
	for i := range int(named) + int(ids) {
		off := 16 + 8*i
		if off+8 > len(rsrc) {
			t.Fatal("truncated resource directory")
		}
		types[binary.LittleEndian.Uint32(rsrc[off:])] = true
	}
	const rtIcon, rtGroupIcon, rtVersion, rtManifest = 3, 14, 16, 24
	for _, rt := range []uint32{rtIcon, rtGroupIcon, rtVersion, rtManifest} {
		if !types[rt] {
			t.Errorf("no resource of type %d (have %v)", rt, types)
		}
	}
	utf16le := func(s string) []byte {
		var out []byte
		for _, u := range utf16.Encode([]rune(s)) {
			out = binary.LittleEndian.AppendUint16(out, u)
		}
		return out
	}
	for _, s := range []string{"ProductVersion", wails.Info.ProductVersion, "EnergyScope", "energyscope.exe"} {
		if !bytes.Contains(rsrc, utf16le(s)) {
			t.Errorf("the version resource lacks %q (regenerate the syso: see the Makefile's dist target)", s)
		}
	}
}
