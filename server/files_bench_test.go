package server

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkFileDownload: a 64 MiB snapshot file over /v1/files on
// loopback, with the per-chunk write deadline (FileChunkTimeout, the
// default) and without it (the peer, in the same run): MB/s of the two
// sub-benchmarks. Both take net/http's sendfile path.
func BenchmarkFileDownload(b *testing.B) {
	big := make([]byte, 64<<20)
	rand.Read(big)
	path := filepath.Join(b.TempDir(), "big.arrow")
	if err := os.WriteFile(path, big, 0o600); err != nil {
		b.Fatal(err)
	}
	sum := sha256.Sum256(big)
	sha := hex.EncodeToString(sum[:])
	for _, bc := range []struct {
		name    string
		timeout time.Duration
	}{{"deadline", 0}, {"none", -1}} {
		b.Run(bc.name, func(b *testing.B) {
			ls := startLive(b, b.TempDir(), Options{Conn: ConnOptions{FileChunkTimeout: bc.timeout}})
			if code, body := ls.do("PUT", "/v1/datasets/stocks"+stocksQuery, ls.write, "text/csv", bytes.NewReader(stocksBody(b))); code != 200 {
				b.Fatalf("upload: %d %s", code, body)
			}
			d, err := ls.srv.dataset("stocks")
			if err != nil {
				b.Fatal(err)
			}
			d.hmu.Lock()
			d.files[sha] = path
			d.hmu.Unlock()
			c := &http.Client{}
			defer c.CloseIdleConnections()
			b.SetBytes(int64(len(big)))
			b.ResetTimer()
			for b.Loop() {
				req, _ := http.NewRequest("GET", ls.url+"/v1/files/stocks/"+sha, nil)
				req.Header.Set("Authorization", "Bearer "+ls.read)
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || n != int64(len(big)) {
					b.Fatalf("got %d bytes: %v", n, err)
				}
			}
		})
	}
}
