// Package testweed starts a real S3-compatible server with an Iceberg REST
// catalog for tests: SeaweedFS's `weed mini` (master, volume, filer, S3
// gateway and Iceberg catalog in one process) on loopback ports in a
// temporary directory, stopped and removed when the test ends.
//
// The binary is built from SeaweedFS's Go module by scripts/install-weed.sh
// (make test runs it through scripts/install-deps.sh) at the version pinned
// in weed.version; Binary says where it lies. Under CI=true a missing
// binary fails the test; elsewhere the test skips.
//
// Each server has one S3 identity (AccessKey, SecretKey: an admin) and two
// buckets: Bucket, a plain S3 bucket, and TableBucket, an S3 Tables bucket
// that the Iceberg REST catalog serves as its warehouse s3://TableBucket
// (SeaweedFS serves each table bucket as a separate catalog, selected by
// the warehouse a client sends to /v1/config; it chooses the tables'
// locations itself, under s3://TableBucket/NAMESPACE/). The catalog takes
// the S3 key and secret as an OAuth2 client credential ("KEY:SECRET",
// exchanged at /v1/oauth/tokens). Env gives the environment a client
// process needs.
package testweed

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

//go:embed weed.version
var version string

// Version is the pinned SeaweedFS module version (weed.version).
func Version() string { return strings.TrimSpace(version) }

// Region is the region clients sign with (SeaweedFS accepts any).
const Region = "us-east-1"

// Binary returns the path of the weed binary scripts/install-weed.sh
// built for Version: $ES_WEED if set, else
// ${ES_WEED_CACHE:-$HOME/.cache/energyscope}/weed-VERSION/weed.
func Binary() (string, error) {
	if p := os.Getenv("ES_WEED"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("testweed: ES_WEED: %w", err)
		}
		return p, nil
	}
	cache := os.Getenv("ES_WEED_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("testweed: %w", err)
		}
		cache = filepath.Join(home, ".cache", "energyscope")
	}
	p := filepath.Join(cache, "weed-"+Version(), "weed")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("testweed: no weed %s (run scripts/install-weed.sh): %w", Version(), err)
	}
	return p, nil
}

// Server is one running (or stopped) weed mini.
type Server struct {
	t   testing.TB
	bin string
	dir string // -dir: all of the server's state
	log string // its stdout and stderr
	// ports, fixed at the first start so that a restart keeps the
	// endpoints.
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}

	// S3 is the S3 endpoint URL (http://127.0.0.1:PORT), path-style.
	S3 string
	// Catalog is the Iceberg REST catalog's URL (http://127.0.0.1:PORT).
	Catalog string
	// Filer is the filer's HTTP URL (the server's own file view).
	Filer string
	// AccessKey and SecretKey are the S3 identity (an admin); the catalog
	// takes them as its OAuth2 client credential.
	AccessKey, SecretKey string
	// Bucket is a plain S3 bucket; TableBucket an S3 Tables bucket, the
	// REST catalog's warehouse s3://TableBucket.
	Bucket, TableBucket string
}

// Start starts weed mini with fresh state and waits until its S3
// endpoint, catalog and both buckets answer. The server is killed and
// its directory removed when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v", err)
		}
		t.Skipf("%v; CI=true runs it", err)
	}
	var last error
	for range 3 { // a port taken between choosing and binding: new ports
		dir, err := os.MkdirTemp("", "es-weed-")
		if err != nil {
			t.Fatal(err)
		}
		s, err := start(t, bin, dir)
		if err == nil {
			t.Cleanup(func() {
				s.Kill()
				os.RemoveAll(dir)
			})
			return s
		}
		last = err
		os.RemoveAll(dir)
	}
	t.Fatalf("testweed: %v", last)
	return nil
}

func start(t testing.TB, bin, dir string) (*Server, error) {
	ports, err := freePorts(11)
	if err != nil {
		return nil, err
	}
	secret := make([]byte, 12)
	rand.Read(secret)
	s := &Server{t: t, bin: bin, dir: dir, log: filepath.Join(dir, "weed.log"),
		AccessKey: "estest", SecretKey: hex.EncodeToString(secret),
		Bucket: "plain", TableBucket: "lake",
		S3:      fmt.Sprintf("http://127.0.0.1:%d", ports[6]),
		Catalog: fmt.Sprintf("http://127.0.0.1:%d", ports[8]),
		Filer:   fmt.Sprintf("http://127.0.0.1:%d", ports[4]),
	}
	p := func(i int) string { return strconv.Itoa(ports[i]) }
	s.args = []string{"mini",
		"-dir=" + filepath.Join(dir, "data"),
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-master.telemetry=false", // nothing leaves loopback
		"-master.port=" + p(0), "-master.port.grpc=" + p(1),
		"-volume.port=" + p(2), "-volume.port.grpc=" + p(3),
		"-filer.port=" + p(4), "-filer.port.grpc=" + p(5),
		"-s3.port=" + p(6), "-s3.port.grpc=" + p(7), "-s3.port.iceberg=" + p(8),
		"-s3.port.lance=0", "-webdav=false",
		"-admin.ui=false", "-admin.port=" + p(9), "-admin.port.grpc=" + p(10), "-admin.port.legacy=0",
		"-filer.localSocket=" + filepath.Join(dir, "filer.sock"),
		"-s3.localSocket=" + filepath.Join(dir, "s3.sock"),
		"-bucket=" + s.Bucket, "-tableBucket=" + s.TableBucket,
		// Volumes of a fixed size and count: left to mini, both follow
		// the host's free disk space, and with a few GB free every
		// PutObject failed with 500 InternalError (no volume to grow).
		// Volume files are sparse: a test writes what it writes.
		"-master.volumeSizeLimitMB=64", "-volume.max=64",
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	if err := s.run(); err != nil {
		return nil, err
	}
	return s, nil
}

// freePorts returns n distinct loopback ports free a moment ago.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// run starts the process and waits until it is ready (60 s: the machine
// may be loaded).
func (s *Server) run() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("testweed: already running")
	}
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// The identity mini creates at its first start (user "mini"); the
	// S3 Tables bucket is routed to by the catalog through S3_TABLE_BUCKET.
	cmd.Env = append(os.Environ(),
		"AWS_ACCESS_KEY_ID="+s.AccessKey, "AWS_SECRET_ACCESS_KEY="+s.SecretKey,
		"S3_BUCKET=", "S3_TABLE_BUCKET=", "HOME="+s.dir)
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("testweed: start %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		close(done)
	}()
	s.cmd, s.done = cmd, done
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		err := s.ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("weed mini exited before it was ready: %v\n%s", cmd.ProcessState, s.logTail())
		case <-ctx.Done():
			s.killLocked()
			return fmt.Errorf("weed mini not ready in 60 s: %v\n%s", err, s.logTail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// signedGet is a GET of u signed (AWS signature version 4) with the
// server's access key and secret, and its status code.
func (s *Server) signedGet(ctx context.Context, u, secret string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	const emptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	req.Header.Set("X-Amz-Content-Sha256", emptyHash)
	creds := aws.Credentials{AccessKeyID: s.AccessKey, SecretAccessKey: secret}
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, emptyHash, "s3", "us-east-1", time.Now()); err != nil {
		return 0, err
	}
	resp, err := (&http.Client{Timeout: 3 * time.Second}).Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// ready: the S3 endpoint answers and refuses an anonymous read, both buckets exist (the filer lists
// them under /buckets) and the catalog hands out a token with which it
// lists the table bucket's namespaces.
func (s *Server) ready(ctx context.Context) error {
	c := &http.Client{Timeout: 3 * time.Second}
	get := func(u string, hdr ...string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return 0, err
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if _, err := get(s.S3 + "/"); err != nil {
		return fmt.Errorf("s3: %w", err)
	}
	// Authentication is on: weed serves S3 with no identity (everything
	// allowed) until it has loaded the one from its environment, so a
	// request signed with a wrong secret could pass in the first moments
	// (TestWeedWrongS3SecretCreatesNothing failed once so under load).
	if code, err := get(s.S3 + "/" + s.Bucket + "/.testweed-auth"); err != nil || code != http.StatusForbidden {
		return fmt.Errorf("s3 authentication not on yet: anonymous GET answered %d %v", code, err)
	}
	// And the identity is loaded: a GET signed with the right secret is
	// answered (no such object), one signed with a wrong secret refused.
	// An anonymous refusal alone was not enough: under the race
	// detector's load a wrongly signed request was once let through
	// after it (TestWeedWrongS3SecretCreatesNothing).
	for _, c := range []struct {
		name, secret string
		want         int
	}{{"right", s.SecretKey, http.StatusNotFound}, {"wrong", "not-" + s.SecretKey, http.StatusForbidden}} {
		if code, err := s.signedGet(ctx, s.S3+"/"+s.Bucket+"/.testweed-auth", c.secret); err != nil || code != c.want {
			return fmt.Errorf("s3 identity not loaded yet: GET signed with the %s secret answered %d %v", c.name, code, err)
		}
	}
	for _, b := range []string{s.Bucket, s.TableBucket} {
		if code, err := get(s.Filer+"/buckets/"+b+"/", "Accept", "application/json"); err != nil || code != http.StatusOK {
			return fmt.Errorf("bucket %s: %d %v", b, code, err)
		}
	}
	tok, err := s.Token(ctx)
	if err != nil {
		return err
	}
	code, err := get(s.Catalog+"/v1/"+s.TableBucket+"/namespaces", "Authorization", "Bearer "+tok)
	if err != nil || code != http.StatusOK {
		return fmt.Errorf("catalog: %d %v", code, err)
	}
	// A write lands: after a restart weed's first write waits ~11 s (its
	// filer retries until the master hands out a writable volume again);
	// the probe is a file outside the buckets, removed after.
	return s.probeWrite(ctx)
}

// probeWrite writes and deletes a file outside the buckets through the
// filer.
func (s *Server) probeWrite(ctx context.Context) error {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("file", "probe")
	if err != nil {
		return err
	}
	fw.Write([]byte("probe"))
	mw.Close()
	u := s.Filer + "/testweed/probe"
	c := &http.Client{Timeout: 30 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, &body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("write probe: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("write probe: %s", resp.Status)
	}
	req, err = http.NewRequestWithContext(ctx, http.MethodDelete, u, nil)
	if err != nil {
		return err
	}
	if resp, err = c.Do(req); err != nil {
		return fmt.Errorf("write probe: delete: %w", err)
	}
	resp.Body.Close()
	return nil
}

// Token gets an OAuth2 bearer token for the catalog.
func (s *Server) Token(ctx context.Context) (string, error) {
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {s.AccessKey}, "client_secret": {s.SecretKey}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Catalog+"/v1/oauth/tokens", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := (&http.Client{Timeout: 3 * time.Second}).Do(req)
	if err != nil {
		return "", fmt.Errorf("catalog token: %w", err)
	}
	defer resp.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("catalog token: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.AccessToken == "" {
		return "", fmt.Errorf("catalog token: %v", err)
	}
	return body.AccessToken, nil
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Log returns the end of the server's output (for a failing test's
// message).
func (s *Server) Log() string { return s.logTail() }

// Warehouse is an s3:// warehouse under prefix in the plain bucket (for a
// catalog other than the REST one: SQLite, PostgreSQL).
func (s *Server) Warehouse(prefix string) string {
	return "s3://" + s.Bucket + "/" + strings.Trim(prefix, "/")
}

// RESTWarehouse is the warehouse to give the REST catalog.
func (s *Server) RESTWarehouse() string { return "s3://" + s.TableBucket }

// Credential is the catalog's OAuth2 client credential "KEY:SECRET"
// (server/lake's ES_CATALOG_CREDENTIAL).
func (s *Server) Credential() string { return s.AccessKey + ":" + s.SecretKey }

// Env is the environment of a client process: the S3 identity, its
// region, the catalog credential (ES_CATALOG_CREDENTIAL), no instance
// metadata lookups and no shared AWS files.
func (s *Server) Env() []string {
	none := filepath.Join(s.dir, "no-such-aws-file")
	return []string{
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_SESSION_TOKEN=",
		"AWS_REGION=" + Region,
		"AWS_PROFILE=",
		"AWS_S3_ENDPOINT=",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=" + none,
		"AWS_SHARED_CREDENTIALS_FILE=" + none,
		"ES_CATALOG_CREDENTIAL=" + s.Credential(),
	}
}

// Setenv sets Env in this test process (t.Setenv: not with t.Parallel).
func (s *Server) Setenv(t *testing.T) {
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// Stop stops the server gracefully (SIGTERM; SIGKILL after 20 s) and
// waits for it to exit. Its state stays for Restart.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.cmd.Process.Kill()
	}
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
}

// Kill kills the server (SIGKILL: a crash) and waits for it to exit.
// Its state stays for Restart.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
}

func (s *Server) killLocked() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart starts a stopped or killed server again on the same ports and
// state and waits until it is ready, a write included (~15 s: weed's
// first write after a restart waits ~11 s for a writable volume).
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.run(); err != nil {
		s.t.Fatalf("testweed: restart: %v", err)
	}
}

// Objects lists the keys of the objects in bucket under prefix (a key
// prefix ending in "/", or ""), sorted, read from the filer's own view of
// the bucket (not through S3).
func (s *Server) Objects(bucket, prefix string) ([]string, error) {
	var keys []string
	var walk func(dir string) error
	walk = func(dir string) error {
		last := ""
		for {
			u := s.Filer + "/buckets/" + bucket + "/" + dir + "?limit=1000&lastFileName=" + url.QueryEscape(last)
			req, err := http.NewRequest(http.MethodGet, u, nil)
			if err != nil {
				return err
			}
			req.Header.Set("Accept", "application/json")
			resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
			if err != nil {
				return err
			}
			var page struct {
				Entries []struct {
					FullPath string
					Mode     uint32
				}
				LastFileName          string
				ShouldDisplayLoadMore bool
			}
			err = json.NewDecoder(resp.Body).Decode(&page)
			resp.Body.Close()
			if resp.StatusCode == http.StatusNotFound {
				return nil
			}
			if err != nil || resp.StatusCode != http.StatusOK {
				return fmt.Errorf("testweed: list %s: %s %v", u, resp.Status, err)
			}
			for _, e := range page.Entries {
				key := strings.TrimPrefix(e.FullPath, "/buckets/"+bucket+"/")
				if os.FileMode(e.Mode)&os.ModeDir != 0 {
					if err := walk(key + "/"); err != nil {
						return err
					}
					continue
				}
				keys = append(keys, key)
			}
			if !page.ShouldDisplayLoadMore || len(page.Entries) == 0 {
				return nil
			}
			last = page.LastFileName
		}
	}
	if err := walk(prefix); err != nil {
		return nil, err
	}
	sort.Strings(keys)
	return keys, nil
}
