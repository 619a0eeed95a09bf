//go:build unix

package server

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkHTTPLookup is the server's lookup path end to end: GET
// /v1/series/{id} for one year of a monthly series, over a keep-alive
// loopback connection with a read token (auth, deadlines, connection
// accounting, store lookup, CSV). Compare it side by side with the commit
// before a change (BENCHMARKS.md, "Trust").
func BenchmarkHTTPLookup(b *testing.B) {
	home := b.TempDir()
	tokens, err := LoadTokens(filepath.Join(home, TokensFile))
	if err != nil {
		b.Fatal(err)
	}
	read, _ := tokens.Add("r", ScopeRead)
	write, _ := tokens.Add("w", ScopeWrite)
	srv, err := New(Options{Home: home, Tokens: tokens, CompactRows: -1, CompactBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	stop := serveForBench(srv, ln)
	defer stop()
	url := "http://" + ln.Addr().String()
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer c.CloseIdleConnections()
	do := func(method, path, token string, body []byte) (int, []byte) {
		req, _ := http.NewRequest(method, url+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, out
	}
	csv, err := os.ReadFile(stocksCSV)
	if err != nil {
		b.Fatal(err)
	}
	if code, body := do("PUT", "/v1/datasets/stocks?series_col=symbol&period_col=date&value_col=price&frequency=M", write, csv); code != 200 {
		b.Fatalf("upload: %d %s", code, body)
	}
	const path = "/v1/series/MSFT?from=2005-01-01&to=2005-12-31"
	if code, body := do("GET", path, read, nil); code != 200 || bytes.Count(body, []byte("\n")) != 13 {
		b.Fatalf("lookup: %d %q", code, body)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for b.Loop() {
		if code, _ := do("GET", path, read, nil); code != 200 {
			b.Fatalf("lookup: %d", code)
		}
	}
	// CPU time of server and client together: on a shared machine wall
	// time is mostly other processes' noise.
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
