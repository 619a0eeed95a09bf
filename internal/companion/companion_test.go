package companion_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/functions/bridge"
	"github.com/energyscope/energyscope/internal/companion"
	"github.com/energyscope/energyscope/internal/testhome"
	"github.com/energyscope/energyscope/internal/testserver"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/sync/client"
)

func closeC(t *testing.T, c *companion.Companion) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
}

// bridgeClient trusts the bridge's CA.
func bridgeClient(t *testing.T, c *companion.Companion) *http.Client {
	t.Helper()
	ca, err := os.ReadFile(c.Bridge().Certs().CAPath())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	t.Cleanup(cl.CloseIdleConnections)
	return cl
}

func TestStartOffline(t *testing.T) {
	home := t.TempDir()
	testhome.CookSamples(t, home)
	c, err := companion.Start(companion.Config{Home: home, Port: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer closeC(t, c)
	if got := c.Store().DatasetNames(); !reflect.DeepEqual(got, []string{"iowa", "seattle", "stocks"}) {
		t.Fatalf("datasets %v", got)
	}
	if c.Engine() != nil || c.BridgeErr() != nil {
		t.Fatalf("offline companion: engine %v, bridge error %v", c.Engine(), c.BridgeErr())
	}
	// The bridge serves the store: /v1/status lists the datasets.
	req, _ := http.NewRequest("GET", c.Bridge().URL()+"/v1/status", nil)
	req.Header.Set("Authorization", "Bearer "+c.Bridge().Token())
	resp, err := bridgeClient(t, c).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Datasets []bridge.DatasetStatus `json:"datasets"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	if len(st.Datasets) != 3 || st.Datasets[2].Name != "stocks" || st.Datasets[2].Series != 5 || st.Datasets[2].Rows != 560 {
		t.Fatalf("status datasets %+v", st.Datasets)
	}
	// One writer per home.
	if _, err := companion.Start(companion.Config{Home: home}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second companion on the home: %v", err)
	}
}

func TestBridgeOptional(t *testing.T) {
	home := t.TempDir()
	testhome.CookSamples(t, home)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	// Without BridgeOptional a taken port fails the start, and the home is
	// left unlocked.
	if _, err := companion.Start(companion.Config{Home: home, Port: port}); err == nil {
		t.Fatal("start on a taken port succeeded")
	}
	c, err := companion.Start(companion.Config{Home: home, Port: port, BridgeOptional: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeC(t, c)
	if c.Bridge() != nil || c.BridgeErr() == nil {
		t.Fatalf("bridge %v, err %v", c.Bridge(), c.BridgeErr())
	}
	if _, _, err := c.Store().Copy("MSFT", 0, 1<<40); err != nil {
		t.Fatalf("store without the bridge: %v", err)
	}
}

// TestSync runs a real server over the samples and a companion with an
// empty home that syncs from it, changes its datasets, and receives a
// live update.
func TestSync(t *testing.T) {
	srv, srvURL := testserver.SampleServer(t)

	home := t.TempDir()
	c, err := companion.Start(companion.Config{Home: home, Port: 0, Server: srvURL, Datasets: []string{"stocks"}})
	if err != nil {
		t.Fatal(err)
	}
	defer closeC(t, c)
	progress := make(chan client.Progress, 1000)
	c.OnSyncProgress(func(p client.Progress) {
		select {
		case progress <- p:
		default:
		}
	})
	waitFor(t, "stocks synced", func() bool {
		_, _, err := c.Store().Copy("MSFT", 0, 1<<40)
		return err == nil
	})
	if got := c.Store().DatasetNames(); !reflect.DeepEqual(got, []string{"stocks"}) {
		t.Fatalf("datasets after sync %v", got)
	}
	if len(progress) == 0 {
		t.Error("no progress reported")
	}

	// Subscribe to iowa as well: a new engine, the store keeps serving.
	first := c.Engine()
	if err := c.SetSync(srvURL, "", []string{"stocks", "iowa"}); err != nil {
		t.Fatal(err)
	}
	if c.Engine() == first || !reflect.DeepEqual(c.Config().Datasets, []string{"stocks", "iowa"}) {
		t.Fatal("SetSync did not replace the engine")
	}
	waitFor(t, "iowa synced", func() bool {
		_, _, err := c.Store().Copy("Fossil Fuels", 0, 1<<40)
		return err == nil
	})

	// A live update reaches the companion's store.
	when := time.Date(2010, 4, 1, 0, 0, 0, 0, time.UTC).Unix()
	if _, _, err := srv.Ingest("stocks", []format.Record{{Op: format.Upsert, SeriesID: "MSFT", Period: when, Value: 123.5}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "live update", func() bool {
		_, v, err := c.Store().Copy("MSFT", when, when)
		return err == nil && len(v) == 1 && v[0] == 123.5
	})
	waitFor(t, "progress live", func() bool {
		p := c.Engine().Progress()
		return p.Online && len(p.Datasets) == 2 && p.Datasets[1].State == client.StateLive && p.Datasets[1].Lag == 0
	})

	// Offline again: the engine stops, the data stays.
	if err := c.SetSync("", "", nil); err != nil {
		t.Fatal(err)
	}
	if c.Engine() != nil {
		t.Fatal("engine still running")
	}
	if _, v, err := c.Store().Copy("MSFT", when, when); err != nil || len(v) != 1 {
		t.Fatalf("data after going offline: %v %v", v, err)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSettings(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "EnergyScope", companion.SettingsFile)
	s, err := companion.LoadSettings(path)
	if err != nil || !reflect.DeepEqual(s, companion.Settings{}) {
		t.Fatalf("missing file: %+v %v", s, err)
	}
	if s.BridgePort() != bridge.DefaultPort {
		t.Fatalf("default port %d", s.BridgePort())
	}
	home := filepath.Join(dir, "home")
	want := companion.Settings{Server: "https://es.example.com", Token: "secret", Home: home, Port: 18000, Datasets: []string{"pet", "stocks"}, Bandwidth: 1 << 20}
	in := want
	in.Server += "/ "
	in.Datasets = []string{" pet", "stocks", "pet", ""}
	if err := companion.SaveSettings(path, in); err != nil {
		t.Fatal(err)
	}
	got, err := companion.LoadSettings(path)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if runtime.GOOS != "windows" {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v %v", fi.Mode(), err)
		}
	}
	for _, bad := range []companion.Settings{
		{Server: "es.example.com"},
		{Server: "ftp://x"},
		{Token: "t"},
		{Home: "relative/dir"},
		{Port: 70000},
		{Datasets: []string{"../x"}},
		{Bandwidth: -1},
	} {
		if err := companion.SaveSettings(path, bad); err == nil {
			t.Errorf("saved %+v", bad)
		}
	}
	if got, _ := companion.LoadSettings(path); !reflect.DeepEqual(got, want) {
		t.Fatalf("a refused save changed the file: %+v", got)
	}
	// Several servers: each entry trimmed, persisted in order; a list
	// with a server twice or an empty entry is refused with
	// client.ErrServerList and changes nothing.
	list := want
	list.Server = " https://a.example.com/ , https://b.example.com:8443,http://127.0.0.1:17800/"
	if err := companion.SaveSettings(path, list); err != nil {
		t.Fatal(err)
	}
	want.Server = "https://a.example.com,https://b.example.com:8443,http://127.0.0.1:17800"
	if got, err := companion.LoadSettings(path); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("server list round trip: %+v %v", got, err)
	}
	for _, bad := range []string{"https://a.example.com,https://A.example.com/", "https://a.example.com,,https://b.example.com", "https://a.example.com,b.example.com"} {
		s := want
		s.Server = bad
		if err := companion.SaveSettings(path, s); !errors.Is(err, client.ErrServerList) {
			t.Errorf("saved server list %q: %v", bad, err)
		}
	}
	if got, _ := companion.LoadSettings(path); !reflect.DeepEqual(got, want) {
		t.Fatalf("a refused server list changed the file: %+v", got)
	}
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := companion.LoadSettings(path); err == nil {
		t.Fatal("damaged settings read without error")
	}
	if p, err := companion.SettingsPath(); err == nil && !strings.HasSuffix(p, filepath.Join("EnergyScope", "settings.json")) {
		t.Fatalf("settings path %s", p)
	}
	if _, err := os.Stat(filepath.Join(dir, "EnergyScope")); err != nil {
		t.Fatal(err)
	}
}

// TestStatusNamesTheDamagedDatasetOnly: a dataset whose data.arrow was
// damaged at rest is found by the companion's background scrub and
// reported with its error on the bridge's /v1/status; the others are not.
func TestStatusNamesTheDamagedDatasetOnly(t *testing.T) {
	home := t.TempDir()
	testhome.CookSamples(t, home)
	dir := filepath.Join(home, localcache.DatasetsDir, "stocks", format.SnapshotsDir)
	snaps, err := filepath.Glob(filepath.Join(dir, "e*"))
	if err != nil || len(snaps) != 1 {
		t.Fatalf("snapshots of stocks: %v %v", snaps, err)
	}
	data := filepath.Join(snaps[0], format.DataFile)
	b, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff // same size: open succeeds, the scrub's chunk hash does not
	if err := os.WriteFile(data, b, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := companion.Start(companion.Config{Home: home, Port: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer closeC(t, c)
	waitFor(t, "the scrub to mark stocks damaged", func() bool {
		return errors.Is(c.Store().Damaged("stocks"), localcache.ErrDamaged)
	})
	req, _ := http.NewRequest("GET", c.Bridge().URL()+"/v1/status", nil)
	req.Header.Set("Authorization", "Bearer "+c.Bridge().Token())
	resp, err := bridgeClient(t, c).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Datasets []bridge.DatasetStatus `json:"datasets"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	for _, d := range st.Datasets {
		if (d.Name == "stocks") != (d.Error != "") {
			t.Errorf("%s: error %q", d.Name, d.Error)
		}
	}
	if len(st.Datasets) != 3 {
		t.Fatalf("status lists %d datasets, want 3", len(st.Datasets))
	}
}
