package bridge

import (
	"crypto/x509"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

func TestEnsureCerts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bridge")
	now := time.Now()
	c, err := EnsureCerts(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Created) != 2 {
		t.Fatalf("created %v", c.Created)
	}
	if runtime.GOOS != "windows" {
		for name, want := range map[string]os.FileMode{CAKeyFile: 0o600, KeyFile: 0o600, CAFile: 0o644, CertFile: 0o644} {
			st, err := os.Stat(filepath.Join(dir, name))
			if err != nil || st.Mode().Perm() != want {
				t.Errorf("%s: %v %v", name, st.Mode(), err)
			}
		}
	}
	ca, leaf := c.CA, c.Leaf.Leaf
	if !ca.IsCA || ca.NotAfter.Sub(now) < 9*365*24*time.Hour || ca.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("CA %v until %v", ca.PublicKeyAlgorithm, ca.NotAfter)
	}
	if d := leaf.NotAfter.Sub(now); d < 364*24*time.Hour || d > 366*24*time.Hour {
		t.Errorf("leaf lifetime %v", d)
	}
	// The leaf verifies for the loopback names only; the CA's name
	// constraints refuse anything else it might sign.
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, name := range []string{"127.0.0.1", "::1", "localhost"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name}); err != nil {
			t.Errorf("verify %s: %v", name, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "example.com"}); err == nil {
		t.Error("leaf verifies for example.com")
	}
	if len(ca.PermittedIPRanges) != 2 || len(ca.PermittedDNSDomains) != 1 || !ca.PermittedDNSDomainsCritical {
		t.Errorf("CA name constraints: %v %v", ca.PermittedIPRanges, ca.PermittedDNSDomains)
	}

	// A second run loads the same files.
	c2, err := EnsureCerts(dir, now)
	if err != nil || len(c2.Created) != 0 || !c2.CA.Equal(ca) || !c2.Leaf.Leaf.Equal(leaf) {
		t.Fatalf("reload: created %v, err %v", c2.Created, err)
	}
	// 20 days before the leaf expires: a new leaf, same CA.
	later := leaf.NotAfter.Add(-20 * 24 * time.Hour)
	c3, err := EnsureCerts(dir, later)
	if err != nil || len(c3.Created) != 1 || c3.Created[0] != "leaf" || !c3.CA.Equal(ca) || c3.Leaf.Leaf.Equal(leaf) {
		t.Fatalf("renew: created %v, err %v", c3.Created, err)
	}
	if _, err := c3.Leaf.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1", CurrentTime: later}); err != nil {
		t.Errorf("renewed leaf: %v", err)
	}
	// A damaged key: replaced, not fatal.
	os.WriteFile(filepath.Join(dir, KeyFile), []byte("junk"), 0o600)
	c4, err := EnsureCerts(dir, now)
	if err != nil || len(c4.Created) != 1 {
		t.Fatalf("damaged key: %v %v", c4.Created, err)
	}
	if c4.SPKIHash() == "" {
		t.Error("no SPKI hash")
	}
}

func TestConfigFile(t *testing.T) {
	home := sampleHome(t)
	b := startBridge(t, home, nil)
	cfg, err := ReadConfig(home)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.URL != b.URL() || cfg.Token != b.Token() || cfg.CA != filepath.Join(home, CertsDir, CAFile) || len(cfg.Token) < 40 {
		t.Fatalf("bridge.json %+v", cfg)
	}
	if runtime.GOOS != "windows" {
		if st, _ := os.Stat(filepath.Join(home, ConfigFile)); st.Mode().Perm() != 0o600 {
			t.Errorf("bridge.json mode %v", st.Mode())
		}
	}
	raw, _ := os.ReadFile(filepath.Join(home, ConfigFile))
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || len(m) != 3 {
		t.Fatalf("bridge.json: %s", raw)
	}
	// The token survives a restart, so configured clients keep working.
	tok := b.Token()
	b.Shutdown(t.Context())
	b.store.Close()
	b2 := startBridge(t, home, nil)
	if b2.Token() != tok {
		t.Error("token changed across restarts")
	}
	if a := b2.Addr().(*net.TCPAddr); !a.IP.IsLoopback() {
		t.Error(a)
	}
}
