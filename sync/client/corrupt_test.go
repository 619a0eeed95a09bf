package client_test

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/energyscope/energyscope/internal/testhome"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/sync/client"
	"github.com/energyscope/energyscope/sync/protocol"
)

// bigServerHome writes a dataset "big" of rows random values (16 bytes a
// row in data.arrow) into a fresh server home.
func bigServerHome(t *testing.T, rows int) string {
	t.Helper()
	home := t.TempDir()
	testhome.Publish(t, home, "big", testhome.RandomTable(rows), format.WriteOptions{Epoch: 1})
	return home
}

// mitm relays websocket messages between a client and a server, passing
// the server's through mutate (which may change them in place).
type mitm struct {
	hs     *httptest.Server
	mu     sync.Mutex
	mutate func(kind int, b []byte)
}

func newMITM(t *testing.T, target string, mutate func(kind int, b []byte)) *mitm {
	m := &mitm{mutate: mutate}
	up := websocket.Upgrader{ReadBufferSize: 64 << 10, WriteBufferSize: 64 << 10}
	wsTarget := "ws" + strings.TrimPrefix(target, "http") + "/v1/sync"
	m.hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := http.Header{}
		if a := r.Header.Get("Authorization"); a != "" {
			h.Set("Authorization", a)
		}
		srv, resp, err := websocket.DefaultDialer.Dial(wsTarget, h)
		if err != nil {
			code := http.StatusBadGateway
			if resp != nil {
				code = resp.StatusCode
			}
			http.Error(w, "upstream: "+fmt.Sprint(err), code)
			return
		}
		defer srv.Close()
		cl, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer cl.Close()
		srv.SetReadLimit(protocol.MaxFrame)
		go func() {
			defer srv.Close()
			defer cl.Close()
			for {
				kind, b, err := cl.ReadMessage()
				if err != nil || srv.WriteMessage(kind, b) != nil {
					return
				}
			}
		}()
		for {
			kind, b, err := srv.ReadMessage()
			if err != nil {
				return
			}
			m.mu.Lock()
			m.mutate(kind, b)
			m.mu.Unlock()
			if cl.WriteMessage(kind, b) != nil {
				return
			}
		}
	}))
	t.Cleanup(func() { m.hs.CloseClientConnections(); m.hs.Close() })
	return m
}

// chunkOf decodes a chunk frame (nil if b is not one).
func chunkOf(kind int, b []byte) *protocol.Chunk {
	if kind != websocket.BinaryMessage || len(b) < 41 || b[0] != protocol.KindChunk {
		return nil
	}
	v, err := protocol.DecodeBinary(b)
	if err != nil {
		return nil
	}
	c, _ := v.(*protocol.Chunk)
	return c
}

// downloadBig syncs a fresh companion store from url and waits for the
// snapshot.
func downloadBig(t *testing.T, url, snap string, o client.Options) (*localcache.Store, *comp) {
	t.Helper()
	st := openCompStore(t, t.TempDir())
	o.Server = url
	c := startComp(t, st, nil, o)
	waitFor(t, 60*time.Second, "the download of big", func() bool {
		_, id, _, err := st.State("big")
		return err == nil && id == snap
	})
	return st, c
}

// TestCorruptChunkIsRefetched: one byte of a chunk frame's data is
// flipped in transit. The 4 MiB chunk it belongs to fails its hash, is
// truncated and fetched again (once), and nothing else is downloaded
// twice; the snapshot installs byte for byte.
func TestCorruptChunkIsRefetched(t *testing.T) {
	r := startRig(t, bigServerHome(t, 600_000), nil)
	head, m, _ := r.srv.Head("big")
	fi := m.File(format.DataFile)
	if fi.Size < 2*format.ChunkSize+protocol.MaxChunk {
		t.Fatalf("data.arrow is %d bytes", fi.Size)
	}
	target := int64(format.ChunkSize + protocol.MaxChunk) // second 1 MiB frame of chunk 1
	corrupted := 0
	px := newMITM(t, r.hs.URL, func(kind int, b []byte) {
		if c := chunkOf(kind, b); c != nil && c.Offset == target && corrupted == 0 {
			b[41+1000] ^= 0x40
			corrupted++
		}
	})
	_, c := downloadBig(t, px.hs.URL, head.Snapshot, client.Options{})
	line := c.log.String()
	if corrupted != 1 || c.eng.Stats.ChunksRefetched.Load() != 1 {
		t.Fatalf("corrupted %d, refetched %d:\n%s", corrupted, c.eng.Stats.ChunksRefetched.Load(), line)
	}
	if c.eng.Metrics().Reconnects != 0 {
		t.Fatal("the session was dropped; a chunk mismatch should only refetch")
	}
	want := head.Bytes + format.ChunkSize // the corrupt chunk, twice
	mt := c.eng.Metrics()
	d, ok := mt.Download(head.Snapshot)
	if !ok || len(mt.Downloads) != 1 || d.Fetched != want || d.RefetchedChunks != 1 || d.Bytes != head.Bytes {
		t.Fatalf("want fetched=%d, 1 refetched chunk; metrics %+v", want, mt)
	}
	// The chunk fetched again is the damaged one: chunk 1 of data.arrow.
	if !slices.Equal(d.Refetched, []client.ChunkRef{{File: format.DataFile, Chunk: 1}}) {
		t.Fatalf("refetched %+v, want chunk 1 of %s", d.Refetched, format.DataFile)
	}
}

// TestCorruptChunkHeaderDoesNotStall: the offset field of one chunk frame
// is corrupted in transit, so the client sees a frame it did not ask for
// and every later frame of that stream looks stale. It must not wait for
// ever: it notices the download made no progress and reconnects, resuming
// from its verified chunks.
func TestCorruptChunkHeaderDoesNotStall(t *testing.T) {
	r := startRig(t, bigServerHome(t, 600_000), nil)
	head, _, _ := r.srv.Head("big")
	corrupted := 0
	px := newMITM(t, r.hs.URL, func(kind int, b []byte) {
		if c := chunkOf(kind, b); c != nil && c.Offset == 5*protocol.MaxChunk && corrupted == 0 {
			binary.LittleEndian.PutUint64(b[33:], uint64(c.Offset)+1<<30)
			corrupted++
		}
	})
	_, c := downloadBig(t, px.hs.URL, head.Snapshot, client.Options{StallTimeout: 3 * time.Second})
	stalls := c.eng.Metrics().Stalls
	if corrupted != 1 || stalls < 1 {
		t.Fatalf("corrupted %d; log:\n%s", corrupted, c.log.String())
	}
	// Each new session resumed from the verified chunks: at most one chunk
	// was fetched twice per stall (one, unless the machine is so slow that
	// a healthy transfer looked stalled too).
	m := c.eng.Metrics()
	if _, ok := m.Download(head.Snapshot); !ok || len(m.Downloads) != 1 || m.BytesDownloaded-head.Bytes > stalls*format.ChunkSize {
		fetched := m.BytesDownloaded
		t.Fatalf("fetched %d bytes of %d after %d stalls:\n%s", fetched, head.Bytes, stalls, c.log.String())
	}
}
