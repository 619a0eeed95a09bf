package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/energyscope/energyscope/functions/bridge"
)

// debianCADir is where Debian and Ubuntu take extra trusted CAs (*.crt),
// installed by update-ca-certificates.
const debianCADir = "/usr/local/share/ca-certificates"

// trustedName is the CA's file name in the system store.
const trustedName = "energyscope-bridge.crt"

// runTrust makes the bridge's CA trusted, or explains how. It never fails
// for lack of privileges: it prints what to run instead.
func runTrust(e *env, args []string) error {
	var home string
	fs := newFlags(e, "trust", &home)
	printOnly := fs.Bool("print", false, "only print the instructions for Windows, macOS and Linux; change nothing")
	caDir := fs.String("ca-dir", debianCADir, "Linux: directory of extra trusted CAs (update-ca-certificates)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	certs, err := bridge.EnsureCerts(filepath.Join(home, bridge.CertsDir), time.Now())
	if err != nil {
		return err
	}
	ca := certs.CAPath()
	w := e.stdout
	fmt.Fprintf(w, "EnergyScope bridge CA: %s\n", ca)
	fmt.Fprintf(w, "  subject:  %s\n", certs.CA.Subject.CommonName)
	fmt.Fprintf(w, "  SHA-256:  %s\n", certs.CAFingerprint())
	fmt.Fprintf(w, "  valid to: %s; it can only vouch for 127.0.0.1, ::1 and localhost (name constraints)\n\n", certs.CA.NotAfter.Format("2006-01-02"))

	if !*printOnly && runtime.GOOS == "linux" {
		installLinux(w, ca, *caDir)
		fmt.Fprintln(w)
	}
	printTrustInstructions(w, ca, *caDir)
	return nil
}

// installLinux copies the CA into caDir and runs update-ca-certificates
// when it can; otherwise it says what to run.
func installLinux(w io.Writer, ca, caDir string) {
	if os.Geteuid() != 0 {
		fmt.Fprintln(w, "Not root: nothing installed. Run the Linux commands below with sudo.")
		return
	}
	if st, err := os.Stat(caDir); err != nil || !st.IsDir() {
		fmt.Fprintf(w, "%s does not exist (not a Debian-style system?): see the Linux commands below.\n", caDir)
		return
	}
	b, err := os.ReadFile(ca)
	if err == nil {
		err = os.WriteFile(filepath.Join(caDir, trustedName), b, 0o644)
	}
	if err != nil {
		fmt.Fprintf(w, "Could not copy the CA to %s: %v\nRun the Linux commands below instead.\n", caDir, err)
		return
	}
	fmt.Fprintf(w, "Copied the CA to %s.\n", filepath.Join(caDir, trustedName))
	tool, err := exec.LookPath("update-ca-certificates")
	if err != nil {
		fmt.Fprintln(w, "update-ca-certificates not found: install the ca-certificates package and run it.")
		return
	}
	out, err := exec.Command(tool).CombinedOutput()
	if err != nil {
		fmt.Fprintf(w, "update-ca-certificates failed: %v\n%s", err, out)
		return
	}
	fmt.Fprintf(w, "update-ca-certificates: %s\n", strings.TrimSpace(string(out)))
	fmt.Fprintln(w, "The system store now trusts the bridge. Browsers with their own store (Firefox, Chromium's NSS database) need the certutil line below.")
}

func printTrustInstructions(w io.Writer, ca, caDir string) {
	q := func(s string) string { return `"` + s + `"` }
	fmt.Fprintln(w, "To trust the bridge (once per computer, and again only if the CA is replaced):")
	fmt.Fprintln(w, "\nWindows (current user; Excel and Edge/WebView2 use this store):")
	fmt.Fprintf(w, "  certutil -user -addstore Root %s\n", q(ca))
	fmt.Fprintln(w, "\nmacOS (login keychain; Excel for Mac and Safari use it):")
	fmt.Fprintf(w, "  security add-trusted-cert -r trustRoot -k ~/Library/Keychains/login.keychain-db %s\n", q(ca))
	fmt.Fprintln(w, "\nLinux (system store):")
	fmt.Fprintf(w, "  sudo cp %s %s\n", q(ca), q(filepath.Join(caDir, trustedName)))
	fmt.Fprintln(w, "  sudo update-ca-certificates")
	fmt.Fprintln(w, "Linux browsers (NSS database of Chromium; Firefox has one per profile):")
	fmt.Fprintf(w, "  certutil -d sql:$HOME/.pki/nssdb -A -t C,, -n \"EnergyScope bridge\" -i %s\n", q(ca))
	fmt.Fprintln(w, "\nCheck: open https://127.0.0.1:<port>/addin/taskpane.html in a browser: no certificate warning.")
}
