package bridge

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/energyscope/energyscope/internal/fileutil"
)

// Certificate files under <home>/bridge/.
const (
	CAFile     = "ca.pem"
	CAKeyFile  = "ca-key.pem"
	CertFile   = "cert.pem"
	KeyFile    = "key.pem"
	caLifetime = 10 * 365 * 24 * time.Hour
	// leafLifetime stays under the 398 days browsers and Apple accept for a
	// server certificate.
	leafLifetime = 365 * 24 * time.Hour
	// RenewBefore: a certificate with less time left than this is replaced.
	RenewBefore = 30 * 24 * time.Hour
)

// Certs is the bridge's local certificate authority and its loopback-only
// server certificate, as files in Dir.
type Certs struct {
	Dir  string
	CA   *x509.Certificate
	Leaf tls.Certificate // Leaf.Leaf is parsed
	// Created reports which files EnsureCerts wrote this time ("ca", "leaf").
	Created []string
}

// CAPath is the PEM file of the CA certificate: the one to trust.
func (c *Certs) CAPath() string { return filepath.Join(c.Dir, CAFile) }

// SPKIHash is base64(SHA-256(SubjectPublicKeyInfo)) of the server
// certificate, the form Chromium's --ignore-certificate-errors-spki-list
// and HTTP public key pinning use.
func (c *Certs) SPKIHash() string {
	sum := sha256.Sum256(c.Leaf.Leaf.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// loopbackNames are the names the server certificate is valid for, and the
// only ones the CA may sign for (its name constraints): a stolen CA key
// cannot impersonate any other site.
var (
	loopbackIPs   = []net.IP{net.IPv4(127, 0, 0, 1).To4(), net.IPv6loopback}
	loopbackDNS   = []string{"localhost"}
	loopbackNets  = []*net.IPNet{{IP: net.IPv4(127, 0, 0, 0).To4(), Mask: net.CIDRMask(8, 32)}, {IP: net.IPv6loopback, Mask: net.CIDRMask(128, 128)}}
	errNoCertFile = errors.New("no certificate")
)

// EnsureCerts loads the CA and server certificate from dir, creating dir
// and whatever is missing, expired, about to expire (RenewBefore) or not
// signed by the CA on disk. A new CA means every client must trust it again
// (es trust); a new server certificate needs nothing from anyone. Keys are
// ECDSA P-256, written with mode 0600.
func EnsureCerts(dir string, now time.Time) (*Certs, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	c := &Certs{Dir: dir}
	ca, caKey, err := loadPair(filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile))
	if err != nil || !ca.IsCA || now.Add(RenewBefore).After(ca.NotAfter) || now.Before(ca.NotBefore) {
		if err != nil && !errors.Is(err, errNoCertFile) {
			// A damaged CA is replaced, not fatal: say so through Created.
			c.Created = append(c.Created, "ca (replacing: "+err.Error()+")")
		} else {
			c.Created = append(c.Created, "ca")
		}
		if ca, caKey, err = newCA(dir, now); err != nil {
			return nil, err
		}
	}
	c.CA = ca
	leaf, leafKey, err := loadPair(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile))
	if err != nil || !leafOK(leaf, ca, now) {
		c.Created = append(c.Created, "leaf")
		if leaf, leafKey, err = newLeaf(dir, ca, caKey, now); err != nil {
			return nil, err
		}
	}
	c.Leaf = tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: leafKey, Leaf: leaf}
	return c, nil
}

// leafOK: signed by ca, valid now and for RenewBefore more, for exactly the
// loopback names.
func leafOK(leaf, ca *x509.Certificate, now time.Time) bool {
	if leaf.CheckSignatureFrom(ca) != nil || now.Before(leaf.NotBefore) || now.Add(RenewBefore).After(leaf.NotAfter) {
		return false
	}
	if len(leaf.IPAddresses) != len(loopbackIPs) || len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "localhost" {
		return false
	}
	for i, ip := range loopbackIPs {
		if !leaf.IPAddresses[i].Equal(ip) {
			return false
		}
	}
	return true
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func newCA(dir string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		Subject:                     pkix.Name{Organization: []string{"EnergyScope"}, CommonName: "EnergyScope local bridge CA (" + host + ")"},
		NotBefore:                   now.Add(-time.Hour),
		NotAfter:                    now.Add(caLifetime),
		IsCA:                        true,
		BasicConstraintsValid:       true,
		MaxPathLenZero:              true,
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         loopbackDNS,
		PermittedIPRanges:           loopbackNets,
	}
	cert, key, err := issue(dir, CAFile, CAKeyFile, "CA", tmpl, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	// The old server certificate was signed by the old CA.
	os.Remove(filepath.Join(dir, CertFile))
	return cert, key, nil
}

func newLeaf(dir string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	notAfter := now.Add(leafLifetime)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{Organization: []string{"EnergyScope"}, CommonName: "127.0.0.1"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IPAddresses:           loopbackIPs,
		DNSNames:              loopbackDNS,
	}
	return issue(dir, CertFile, KeyFile, "server certificate", tmpl, ca, caKey)
}

// issue makes a new ECDSA P-256 key and a certificate for it from tmpl (given a
// random serial number), signed by parent's key, or self-signed when parent is nil,
// and writes both to dir as certName and keyName.
func issue(dir, certName, keyName, what string, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	if tmpl.SerialNumber, err = serial(); err != nil {
		return nil, nil, err
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("create %s: %w", what, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("create %s: %w", what, err)
	}
	if err := writePair(dir, certName, keyName, der, key); err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// writePair writes the key (0600) and then the certificate, each by
// write-temp-and-rename so a crash never leaves half a file.
func writePair(dir, certName, keyName string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, keyName), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, certName), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func loadPair(certPath, keyPath string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cblock, err := readPEM(certPath)
	if err != nil {
		return nil, nil, err
	}
	kblock, err := readPEM(keyPath)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(cblock.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", filepath.Base(certPath), err)
	}
	key, err := x509.ParseECPrivateKey(kblock.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", filepath.Base(keyPath), err)
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(&key.PublicKey) {
		return nil, nil, fmt.Errorf("%s does not match %s", filepath.Base(keyPath), filepath.Base(certPath))
	}
	return cert, key, nil
}

// readPEM reads the first PEM block of path; errNoCertFile if there is no file.
func readPEM(path string) (*pem.Block, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errNoCertFile
	} else if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("%s: not PEM", filepath.Base(path))
	}
	return blk, nil
}

// writeFileAtomic writes b to path durably (fileutil.WriteFile). On
// Windows only the read-only bit exists: the file is private through the
// ACL of the user's profile directory it lives in.
func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	return fileutil.WriteFile(path, b, mode)
}

// ReadCA returns the PEM bytes of the CA certificate in dir.
func ReadCA(dir string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, err
	}
	if blk, _ := pem.Decode(b); blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: not a PEM certificate", filepath.Join(dir, CAFile))
	}
	return bytes.TrimSpace(b), nil
}

// CAFingerprint is the SHA-256 of the CA certificate as colon-separated
// hex pairs, the form certificate viewers show.
func (c *Certs) CAFingerprint() string {
	sum := sha256.Sum256(c.CA.Raw)
	var b strings.Builder
	for i, x := range sum {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02X", x)
	}
	return b.String()
}
