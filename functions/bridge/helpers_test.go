package bridge

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/energyscope/energyscope/internal/testhome"
	"github.com/energyscope/energyscope/internal/wiring"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
)

// sampleHome is a home with the three sample datasets.
func sampleHome(tb testing.TB) string {
	tb.Helper()
	home := tb.TempDir()
	testhome.CookSamples(tb, home)
	return home
}

// storeStatus adapts the store for the bridge, as cmd/es does.
type storeStatus struct{ st *localcache.Store }

func (s storeStatus) Datasets() ([]DatasetStatus, error) {
	ds, err := s.st.Status()
	if err != nil {
		return nil, err
	}
	out := make([]DatasetStatus, len(ds))
	for i, d := range ds {
		out[i] = DatasetStatus{Name: d.Name, SnapshotID: d.Manifest.SnapshotID, Epoch: d.Manifest.Epoch, Seq: d.Seq,
			Series: int64(d.Manifest.Series), Rows: d.Manifest.Rows, PendingRows: d.DeltaRows, SnapshotCreated: d.Manifest.Created}
		if d.LastSync > 0 {
			out[i].LastSync = time.Unix(0, d.LastSync).UTC()
		}
	}
	return out, nil
}

// today is the engine's "today" in tests, as in functions' own tests.
var today = time.Date(2010, 3, 15, 12, 0, 0, 0, time.UTC)

// testBridge is a running bridge over a store, and an HTTPS client that
// trusts its CA.
type testBridge struct {
	*Server
	store  *localcache.Store
	client *http.Client
	pool   *x509.CertPool
	rbuf   bytes.Buffer // responses of post (benchmarks), reused
}

// startBridge opens home writable and starts a bridge on a free port.
// edit may change the options.
func startBridge(tb testing.TB, home string, edit func(*Options)) *testBridge {
	tb.Helper()
	return startBridgeWith(tb, home, func(o *Options, _ *localcache.Store) {
		if edit != nil {
			edit(o)
		}
	})
}

// startBridgeWith is startBridge with the store at hand (for a ChangeFeed).
func startBridgeWith(tb testing.TB, home string, edit func(*Options, *localcache.Store)) *testBridge {
	tb.Helper()
	st, err := localcache.Open(home, &localcache.Options{CompactRows: -1, CompactBytes: -1})
	if err != nil {
		tb.Fatal(err)
	}
	o := DefaultOptions(home)
	o.Port = 0
	o.Status = storeStatus{st}
	o.Now = func() time.Time { return today }
	edit(&o, st)
	srv, err := Start(wiring.Source{Store: st}, o)
	if err != nil {
		st.Close()
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certs().CA)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, MaxIdleConnsPerHost: 16}
	b := &testBridge{Server: srv, store: st, client: &http.Client{Transport: tr, Timeout: 60 * time.Second}, pool: pool}
	tb.Cleanup(func() {
		tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			tb.Errorf("shutdown: %v", err)
		}
		st.Close()
	})
	return b
}

// do sends a request with the given headers (a "Host" entry sets the Host).
func (b *testBridge) do(tb testing.TB, method, path string, body []byte, hdr map[string]string) (*http.Response, []byte) {
	tb.Helper()
	req, err := http.NewRequest(method, b.URL()+path, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp, out
}

func (b *testBridge) auth() map[string]string {
	return map[string]string{"Authorization": "Bearer " + b.Token()}
}

// calc posts calls and decodes the response.
func (b *testBridge) calc(tb testing.TB, body string) calcResponse {
	tb.Helper()
	resp, out := b.do(tb, "POST", "/v1/calc", []byte(body), b.auth())
	if resp.StatusCode != 200 {
		tb.Fatalf("calc: %d %s", resp.StatusCode, out)
	}
	var r calcResponse
	if err := json.Unmarshal(out, &r); err != nil {
		tb.Fatalf("calc response: %v\n%s", err, out)
	}
	return r
}

type calcResponse struct {
	Results []struct {
		Value [][]any  `json:"value"`
		Error *errJSON `json:"error"`
	} `json:"results"`
}

type errJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// apply upserts one point into dataset through the store, as sync would.
func (b *testBridge) apply(tb testing.TB, dataset, series string, period int64, value float64) {
	tb.Helper()
	last, err := b.store.LastSeq(dataset)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := b.store.Apply(dataset, []format.Record{{Seq: last + 1, Op: format.Upsert, SeriesID: series, Period: period, Value: value}}); err != nil {
		tb.Fatal(err)
	}
}

func ciRequired() bool { return os.Getenv("CI") == "true" }

func mustJSON(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

var _ = fmt.Sprint
