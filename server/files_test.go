package server

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFileDownloadStalledReaderIsCut: a client with a read token that
// reads a few bytes of a snapshot file download and then stops reading
// used to hold the download (a goroutine, a file and a connection) for
// ever; /v1/files had no write deadline. Now each FileChunk must be
// written within FileChunkTimeout: the download is cut, while one read at
// full speed still gets the whole file.
func TestFileDownloadStalledReaderIsCut(t *testing.T) {
	ls := startLive(t, t.TempDir(), Options{Conn: ConnOptions{FileChunkTimeout: time.Second}})
	if code, body := ls.do("PUT", "/v1/datasets/stocks"+stocksQuery, ls.write, "text/csv", bytes.NewReader(stocksBody(t))); code != 200 {
		t.Fatalf("upload: %d %s", code, body)
	}
	// A file far bigger than what the socket buffers of both ends hold
	// (the stalled client's receive buffer is set small below; a loopback send
	// buffer grows to a few MiB), served as a retained snapshot file of
	// the dataset.
	big := make([]byte, 24<<20)
	rand.Read(big)
	path := filepath.Join(t.TempDir(), "big.arrow")
	if err := os.WriteFile(path, big, 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(big)
	sha := hex.EncodeToString(sum[:])
	d, err := ls.srv.dataset("stocks")
	if err != nil {
		t.Fatal(err)
	}
	d.hmu.Lock()
	d.files[sha] = path
	d.hmu.Unlock()

	get := func(rcvbuf int) (net.Conn, *bufio.Reader, int64) {
		t.Helper()
		c, err := net.Dial("tcp", ls.addr)
		if err != nil {
			t.Fatal(err)
		}
		if rcvbuf > 0 {
			c.(*net.TCPConn).SetReadBuffer(rcvbuf)
		}
		fmt.Fprintf(c, "GET /v1/files/stocks/%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", sha, ls.read)
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		br := bufio.NewReaderSize(c, 1024)
		var length int64 = -1
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("headers: %v", err)
			}
			if line == "\r\n" {
				break
			}
			fmt.Sscanf(line, "Content-Length: %d", &length)
		}
		if length != int64(len(big)) {
			t.Fatalf("Content-Length %d, want %d", length, len(big))
		}
		return c, br, length
	}

	// At full speed: the whole file.
	c, br, n := get(0)
	h := sha256.New()
	if got, err := io.CopyN(h, br, n); err != nil || hex.EncodeToString(h.Sum(nil)) != sha {
		t.Fatalf("full-speed download: %d bytes, %v, sha256 mismatch %v", got, err, hex.EncodeToString(h.Sum(nil)) != sha)
	}
	c.Close()

	// A reader that stops: it reads a few bytes, then nothing for well
	// over the timeout. When it reads again, the download was cut: the
	// connection ends before the file does.
	c, br, _ = get(64 << 10)
	defer c.Close()
	if _, err := io.ReadFull(br, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second)
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := io.Copy(io.Discard, br)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("download neither cut nor finished after 20 s (%d bytes more)", got)
	}
	if got+1000 >= int64(len(big)) {
		t.Fatalf("a reader that stopped for 4 s (chunk timeout 1 s) still got the whole file (%d bytes): the download was not cut", got+1000)
	}
	t.Logf("stalled reader got %d of %d bytes before the cut (%v)", got+1000, len(big), err)
}
