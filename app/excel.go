package app

import (
	"crypto/x509"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/energyscope/energyscope/functions/bridge"
)

// ExcelView is bound for the Excel view: how Excel reaches the app through
// the bridge, and trusting the bridge's certificate.
type ExcelView struct{ *core }

// ExcelInfo says how Excel reaches this app: the bridge, the add-in's
// manifest to sideload, and whether this computer trusts the bridge's
// certificate (Excel refuses an add-in served over HTTPS it does not
// trust).
func (v *ExcelView) ExcelInfo() Excel {
	c, err := v.companion()
	if err != nil {
		return Excel{Error: words(err), Steps: []string{}}
	}
	br := c.Bridge()
	if br == nil {
		return Excel{Error: words(c.BridgeErr()), Steps: []string{}}
	}
	home := c.Store().Home()
	certs := br.Certs()
	out := Excel{
		Running: true, BridgeURL: br.URL(), ManifestURL: br.URL() + "/addin/manifest.xml",
		ManifestPath: manifestPath(home), CAPath: certs.CAPath(), CAName: certs.CA.Subject.CommonName,
		CASHA256: certs.CAFingerprint(), CATrusted: caTrusted(certs),
	}
	if _, p, err := net.SplitHostPort(br.Addr().String()); err == nil {
		out.Port, _ = strconv.Atoi(p)
	}
	if err := writeManifest(home, br.Manifest()); err != nil {
		out.Error = "The add-in manifest could not be written to disk: " + words(err)
	}
	out.TrustCommand = trustCommand(certs.CAPath())
	out.Steps = excelSteps(out)
	return out
}

// caTrusted verifies the bridge's server certificate against the system's
// trusted roots (on Windows and macOS, the platform verifier), as Excel
// and its web view will.
func caTrusted(c *bridge.Certs) bool {
	pool, err := x509.SystemCertPool()
	if err != nil || c.Leaf.Leaf == nil {
		return false
	}
	_, err = c.Leaf.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1", CurrentTime: time.Now()})
	return err == nil
}

// trustCommand is the command that trusts the CA for this platform.
func trustCommand(ca string) string {
	switch runtime.GOOS {
	case "windows":
		return `certutil -user -addstore Root "` + ca + `"`
	case "darwin":
		return `security add-trusted-cert -r trustRoot -k ~/Library/Keychains/login.keychain-db "` + ca + `"`
	}
	return `sudo cp "` + ca + `" /usr/local/share/ca-certificates/energyscope-bridge.crt && sudo update-ca-certificates`
}

func excelSteps(e Excel) []string {
	var s []string
	if e.CATrusted {
		s = append(s, "This computer trusts the bridge's certificate. Nothing to do.")
	} else {
		s = append(s, "Trust the bridge's certificate once: press “Trust certificate” (Windows and macOS ask you to confirm), or run the command below.")
	}
	switch runtime.GOOS {
	case "windows":
		s = append(s, "Sideload the add-in: the installer registers "+e.ManifestPath+" for Excel (HKCU\\Software\\Microsoft\\Office\\16.0\\WEF\\Developer). Without the installer, add that value yourself, or use a shared-folder catalog.")
	case "darwin":
		s = append(s, "Sideload the add-in: copy "+e.ManifestPath+" to ~/Library/Containers/com.microsoft.Excel/Data/Documents/wef/ (create the folder if needed).")
	default:
		s = append(s, "Excel on the web: Insert → Add-ins → Upload My Add-in, and choose "+e.ManifestPath+".")
	}
	s = append(s,
		"Restart Excel, then Home → Add-ins → EnergyScope.",
		`Type =ES.Get("MSFT") in a cell (any series id); use the Explorer's “Copy formula” for dates and options.`,
		"Keep this app running while Excel calculates: the add-in reads the data through the bridge at "+e.BridgeURL+".",
	)
	return s
}

// TrustCA adds the bridge's CA to the current user's trusted roots where
// that needs no administrator (Windows: certutil -user, which asks the
// user to confirm; macOS: the login keychain). On Linux it says what to
// run. The result is ExcelInfo afterwards, with the outcome in Error.
func (v *ExcelView) TrustCA() Excel {
	e := v.ExcelInfo()
	if !e.Running || e.CATrusted {
		return e
	}
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "windows":
		cmd = exec.Command("certutil", "-user", "-addstore", "Root", e.CAPath)
	case "darwin":
		cmd = exec.Command("security", "add-trusted-cert", "-r", "trustRoot", "-k", expandHome("~/Library/Keychains/login.keychain-db"), e.CAPath)
	default:
		e.Error = "Trusting a certificate system-wide needs administrator rights on Linux: run the command shown, in a terminal."
		return e
	}
	out, err := cmd.CombinedOutput()
	after := v.ExcelInfo()
	if err != nil && !after.CATrusted {
		after.Error = sentence("the certificate was not trusted: " + strings.TrimSpace(string(out)) + " " + err.Error())
	}
	return after
}

func expandHome(p string) string {
	if h, err := os.UserHomeDir(); err == nil && strings.HasPrefix(p, "~/") {
		return h + p[1:]
	}
	return p
}
