//go:build !windows

package hub_test

// Tests of the websocket hub through the real server: authentication at
// the upgrade, refusal of malformed, oversize and out-of-protocol input
// (with the reason logged and other clients unaffected), slow consumers,
// 1,000 concurrent subscribers, and fetch streams.

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/energyscope/energyscope/internal/testhome"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/cook"
	"github.com/energyscope/energyscope/server/hub"
	"github.com/energyscope/energyscope/sync/protocol"
)

const stocksCSV = "../cook/samples/stocks.csv"

var stocksOpts = cook.InputOptions{SeriesCol: "symbol", PeriodCol: "date", ValueCol: "price", Frequency: "M"}

// logBuf collects log output; safe for concurrent use.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type fixture struct {
	t           *testing.T
	srv         *server.Server
	hs          *httptest.Server
	log         *logBuf
	read, write string
	wsURL       string
}

type fixtureOpts struct {
	tokens bool
	hub    hub.Options
	home   string // default: a new home with the stocks sample
}

func newFixture(t *testing.T, o fixtureOpts) *fixture {
	t.Helper()
	f := &fixture{t: t, log: &logBuf{}}
	home := o.home
	if home == "" {
		home = t.TempDir()
	}
	var tokens *server.Tokens
	if o.tokens {
		var err error
		tokens, err = server.LoadTokens(filepath.Join(home, server.TokensFile))
		if err != nil {
			t.Fatal(err)
		}
		if f.read, err = tokens.Add("r", server.ScopeRead); err != nil {
			t.Fatal(err)
		}
		if f.write, err = tokens.Add("w", server.ScopeWrite); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := server.New(server.Options{Home: home, Logger: slog.New(slog.NewTextHandler(f.log, nil)), Tokens: tokens, CompactRows: -1, CompactBytes: -1, Hub: o.hub})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	if o.home == "" {
		if _, err := srv.Replace("stocks", []string{stocksCSV}, stocksOpts); err != nil {
			t.Fatal(err)
		}
	}
	f.hs = httptest.NewServer(srv.Handler())
	f.wsURL = "ws" + strings.TrimPrefix(f.hs.URL, "http") + "/v1/sync"
	t.Cleanup(func() {
		f.hs.CloseClientConnections()
		f.hs.Close()
		srv.Close()
		if t.Failed() {
			s := f.log.String()
			if len(s) > 16<<10 {
				s = "..." + s[len(s)-16<<10:]
			}
			t.Logf("server log:\n%s", s)
		}
	})
	return f
}

func (f *fixture) dial(token string) (*websocket.Conn, *http.Response, error) {
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	d := websocket.Dialer{HandshakeTimeout: 30 * time.Second}
	return d.Dial(f.wsURL, h)
}

func (f *fixture) mustDial(token string) *websocket.Conn {
	f.t.Helper()
	ws, _, err := f.dial(token)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { ws.Close() })
	return ws
}

func (f *fixture) headSub(ds string) protocol.Sub {
	h, _, ok := f.srv.Head(ds)
	if !ok {
		f.t.Fatalf("no dataset %s", ds)
	}
	return protocol.Sub{Dataset: ds, Epoch: h.Epoch, Snapshot: h.Snapshot, Seq: h.Seq}
}

func send(t testing.TB, ws *websocket.Conn, m *protocol.Message) {
	t.Helper()
	if err := ws.WriteMessage(websocket.TextMessage, m.Encode()); err != nil {
		t.Fatal(err)
	}
}

func hello(subs ...protocol.Sub) *protocol.Message {
	return &protocol.Message{Type: protocol.THello, Proto: []int{protocol.VersionMin, protocol.VersionMax}, Client: "test", Subs: subs}
}

// readUntil reads messages until f accepts one (or the connection ends).
func readUntil(ws *websocket.Conn, d time.Duration, f func(kind int, b []byte) bool) error {
	ws.SetReadDeadline(time.Now().Add(d))
	for {
		kind, b, err := ws.ReadMessage()
		if err != nil {
			return err
		}
		if f(kind, b) {
			return nil
		}
	}
}

// subscribed says hello at the head and waits for the (empty) catch-up.
func (f *fixture) subscribed(token string) *websocket.Conn {
	f.t.Helper()
	ws := f.mustDial(token)
	send(f.t, ws, hello(f.headSub("stocks")))
	if err := readUntil(ws, 30*time.Second, func(kind int, b []byte) bool {
		m, err := protocol.DecodeMessage(b)
		return kind == websocket.TextMessage && err == nil && m.Type == protocol.TCatchupEnd
	}); err != nil {
		f.t.Fatal(err)
	}
	return ws
}

// waitDelta reads until a delta frame carrying seq.
func waitDelta(ws *websocket.Conn, seq uint64, d time.Duration) error {
	return readUntil(ws, d, func(kind int, b []byte) bool {
		if kind != websocket.BinaryMessage {
			return false
		}
		v, err := protocol.DecodeBinary(b)
		if err != nil {
			return false
		}
		df, ok := v.(*protocol.DeltaFrame)
		return ok && df.Records[len(df.Records)-1].Seq >= seq
	})
}

func (f *fixture) ingest(n int) uint64 {
	f.t.Helper()
	recs := make([]format.Record, n)
	for i := range recs {
		recs[i] = format.Record{Op: format.Upsert, SeriesID: "T", Period: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, rand.IntN(20000)).Unix(), Value: float64(i)}
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Period < recs[j].Period })
	_, last, err := f.srv.Ingest("stocks", recs)
	if err != nil {
		f.t.Fatal(err)
	}
	return last
}

// TestAuthAtUpgrade: a missing or unknown token gets 401 and no upgrade; a
// read or write token is upgraded.
func TestAuthAtUpgrade(t *testing.T) {
	f := newFixture(t, fixtureOpts{tokens: true})
	for _, tc := range []struct {
		name, token string
		code        int
	}{
		{"missing", "", http.StatusUnauthorized},
		{"wrong", "es_not-a-token", http.StatusUnauthorized},
		{"read", f.read, http.StatusSwitchingProtocols},
		{"write", f.write, http.StatusSwitchingProtocols},
	} {
		ws, resp, err := f.dial(tc.token)
		if resp == nil || resp.StatusCode != tc.code {
			t.Fatalf("%s token: response %v, err %v; want %d", tc.name, resp, err, tc.code)
		}
		if tc.code == http.StatusUnauthorized {
			if !errors.Is(err, websocket.ErrBadHandshake) || ws != nil {
				t.Fatalf("%s token: upgraded anyway (%v)", tc.name, err)
			}
			continue
		}
		send(t, ws, hello(f.headSub("stocks")))
		if err := readUntil(ws, 10*time.Second, func(int, []byte) bool { return true }); err != nil {
			t.Fatalf("%s token: %v", tc.name, err)
		}
		ws.Close()
	}
}

// closeReason reads until the server closes the connection and returns
// the close frame's code and text.
func closeReason(ws *websocket.Conn) (int, string, []string, error) {
	var msgs []string
	ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		kind, b, err := ws.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code, ce.Text, msgs, nil
		}
		if err != nil {
			return 0, "", msgs, err
		}
		if kind == websocket.TextMessage {
			msgs = append(msgs, string(b))
		}
	}
}

// TestRefusals: malformed messages, oversize frames, unknown protocol
// versions and out-of-order messages close the connection with the reason
// in the close frame and in the server's log; a well-behaved subscriber
// connected all along keeps getting live rows.
func TestRefusals(t *testing.T) {
	f := newFixture(t, fixtureOpts{tokens: true})
	good := f.subscribed(f.read)
	for i, tc := range []struct {
		name   string
		frames func(ws *websocket.Conn) error
		reason string // in the close frame and the log
	}{
		{"not json", func(ws *websocket.Conn) error {
			return ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"hello","proto":[1,`))
		}, "malformed message"},
		{"unknown type", func(ws *websocket.Conn) error {
			return ws.WriteMessage(websocket.TextMessage, protocol.SealControl([]byte(`{"type":"gimme"}`)))
		}, `unknown type "gimme"`},
		{"bad dataset name", func(ws *websocket.Conn) error {
			return ws.WriteMessage(websocket.TextMessage, protocol.SealControl([]byte(`{"type":"hello","proto":[2,2],"subs":[{"dataset":"../etc"}]}`)))
		}, "invalid dataset"},
		{"unknown protocol versions", func(ws *websocket.Conn) error {
			return ws.WriteMessage(websocket.TextMessage, protocol.SealControl([]byte(`{"type":"hello","proto":[7,9],"client":"future"}`)))
		}, "no common protocol version: client speaks 7..9, server 2..3"},
		{"version 1 hello", func(ws *websocket.Conn) error {
			return ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"hello","proto":[1,1],"client":"old"}`))
		}, "no common protocol version: client speaks 1..1, server 2..3"},
		{"damaged message", func(ws *websocket.Conn) error {
			b := hello().Encode()
			b[10] ^= 0x20 // "type":"hello" -> "type":"hEllo" or a field name: the checksum catches it first
			return ws.WriteMessage(websocket.TextMessage, b)
		}, "frame checksum mismatch"},
		{"missing checksum", func(ws *websocket.Conn) error {
			ws.WriteMessage(websocket.TextMessage, hello().Encode())
			return ws.WriteMessage(websocket.TextMessage, (&protocol.Message{Type: protocol.TPing}).EncodeUnverified())
		}, "no checksum"},
		{"not hello first", func(ws *websocket.Conn) error {
			return ws.WriteMessage(websocket.TextMessage, (&protocol.Message{Type: protocol.TPing}).Encode())
		}, "first message must be hello"},
		{"second hello", func(ws *websocket.Conn) error {
			ws.WriteMessage(websocket.TextMessage, hello().Encode())
			return ws.WriteMessage(websocket.TextMessage, hello().Encode())
		}, "second hello"},
		{"binary frame", func(ws *websocket.Conn) error {
			ws.WriteMessage(websocket.TextMessage, hello().Encode())
			return ws.WriteMessage(websocket.BinaryMessage, []byte{protocol.KindDelta, 0})
		}, "unexpected binary frame"},
		{"oversize frame", func(ws *websocket.Conn) error {
			ws.WriteMessage(websocket.TextMessage, hello().Encode())
			big := bytes.Repeat([]byte("x"), protocol.MaxControl+1)
			return ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"ping","reason":"`+string(big)+`"}`))
		}, "read limit"},
	} {
		ws := f.mustDial(f.read)
		if err := tc.frames(ws); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		code, text, msgs, err := closeReason(ws)
		if err != nil {
			t.Fatalf("%s: the server did not close with a close frame: %v (messages %q)", tc.name, err, msgs)
		}
		if tc.name == "oversize frame" {
			// gorilla answers an oversize frame itself: 1009 "message too big".
			if code != websocket.CloseMessageTooBig {
				t.Errorf("%s: closed with %d %q, want %d", tc.name, code, text, websocket.CloseMessageTooBig)
			}
		} else if !strings.Contains(text, tc.reason) && !strings.Contains(strings.Join(msgs, " "), tc.reason) {
			t.Errorf("%s: closed with %d %q (messages %q), want the reason %q", tc.name, code, text, msgs, tc.reason)
		}
		// The well-behaved subscriber is unaffected.
		seq := f.ingest(1)
		if err := waitDelta(good, seq, 10*time.Second); err != nil {
			t.Fatalf("after %q (case %d) the good subscriber got no delta: %v", tc.name, i, err)
		}
	}
	// A refused connection is counted until the hub has processed its
	// close, which may come after the close frame the client read: wait
	// for the count to settle on the good subscriber alone.
	deadline := time.Now().Add(10 * time.Second)
	for n := f.srv.Hub().Stats().Connections; n != 1; n = f.srv.Hub().Stats().Connections {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open 10 s after the last refusal, want the good one", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSlowConsumerIsCut: a subscriber that stops reading is disconnected
// with a reason (its queue filled up, or a write to it timed out on a full
// socket, whichever comes first on this machine) instead of being
// buffered for ever; the others keep getting live rows.
func TestSlowConsumerIsCut(t *testing.T) {
	f := newFixture(t, fixtureOpts{hub: hub.Options{SendQueue: 4, WriteTimeout: 2 * time.Second}})
	good := f.subscribed("")
	slow := f.subscribed("") // never reads again
	defer slow.Close()
	// The good one reads everything.
	var seen atomic.Uint64
	readErr := make(chan error, 1)
	go func() {
		readErr <- readUntil(good, 5*time.Minute, func(kind int, b []byte) bool {
			if v, err := protocol.DecodeBinary(b); err == nil && kind == websocket.BinaryMessage {
				if df, ok := v.(*protocol.DeltaFrame); ok {
					seen.Store(df.Records[len(df.Records)-1].Seq)
				}
			}
			return false
		})
	}()
	// waitSeen waits until the good one has read through seq last.
	waitSeen := func(last uint64) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for seen.Load() < last {
			select {
			case err := <-readErr:
				t.Fatalf("the good subscriber was cut: %v", err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("the good subscriber saw seq %d, want %d", seen.Load(), last)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// Frames of ~200 KB fill the slow one's socket buffers, then its
	// queue. Each batch waits for the good one to read the one before,
	// so only the slow one falls behind (under load, unpaced batches
	// could fill the good one's queue of 4 as well).
	var last uint64
	start := time.Now()
	for f.srv.Hub().Stats().Connections > 1 {
		if time.Since(start) > 2*time.Minute {
			t.Fatal("the slow consumer was never cut")
		}
		last = f.ingest(5000)
		waitSeen(last)
	}
	waitSeen(last)
	// Cut for a full queue (counted), or for a write that timed out on a
	// full socket; never both ends.
	st := f.srv.Hub().Stats()
	if st.SlowConsumerCuts > 1 {
		t.Errorf("%d consumers cut for a full queue, want at most the slow one", st.SlowConsumerCuts)
	}
	t.Logf("cut for a full queue: %v (else a write timeout); after %v", st.SlowConsumerCuts == 1, time.Since(start).Round(time.Millisecond))
}

// raiseNoFile lifts RLIMIT_NOFILE's soft limit to at least n if it can.
func raiseNoFile(t *testing.T, n uint64) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Skipf("getrlimit: %v", err)
	}
	if rl.Cur >= n {
		return
	}
	old := rl
	rl.Cur = min(n, rl.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur < n {
		t.Skipf("need %d file descriptors, limit %d (max %d): %v", n, rl.Cur, rl.Max, err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// TestThousandSubscribers: one server holds 1,000 websocket subscribers;
// a posted row reaches every one of them.
func TestThousandSubscribers(t *testing.T) {
	const n = 1000
	raiseNoFile(t, 2*n+256)
	f := newFixture(t, fixtureOpts{})
	sub := f.headSub("stocks")
	conns := make([]*websocket.Conn, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ws, _, err := f.dial("")
			if err != nil {
				errs <- err
				return
			}
			conns[i] = ws
			m := hello(sub)
			m.Client = fmt.Sprintf("c%d", i)
			if err := ws.WriteMessage(websocket.TextMessage, m.Encode()); err != nil {
				errs <- err
				return
			}
			errs <- readUntil(ws, 60*time.Second, func(kind int, b []byte) bool {
				m, err := protocol.DecodeMessage(b)
				return kind == websocket.TextMessage && err == nil && m.Type == protocol.TCatchupEnd
			})
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, ws := range conns {
			if ws != nil {
				ws.Close()
			}
		}
	})
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("subscribing: %v", err)
		}
	}
	if got := f.srv.Hub().Stats().Connections; got != n {
		t.Fatalf("%d connections, want %d", got, n)
	}
	t.Logf("%d subscribers connected in %v", n, time.Since(start).Round(time.Millisecond))

	posted := time.Now()
	seq := f.ingest(1)
	lat := make([]time.Duration, n)
	for i, ws := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := waitDelta(ws, seq, 60*time.Second); err != nil {
				errs <- fmt.Errorf("subscriber %d: %w", i, err)
				return
			}
			lat[i] = time.Since(posted)
			errs <- nil
		}()
	}
	wg.Wait()
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("row seen by all %d subscribers: p50 %v, p99 %v, max %v", n, lat[n/2], lat[n*99/100], lat[n-1])
}

// bigHome writes a dataset of rows random values (16 bytes a row in
// data.arrow) into a fresh server home.
func bigHome(t *testing.T, rows int) string {
	t.Helper()
	home := t.TempDir()
	testhome.Publish(t, home, "big", testhome.RandomTable(rows), format.WriteOptions{Epoch: 1})
	return home
}

// TestRefetchCancelsTheEarlierStream: a client that fetches a file again
// (after a chunk failed its hash) gets one stream, not the rest of the
// earlier stream as well.
func TestRefetchCancelsTheEarlierStream(t *testing.T) {
	// 16 MB: more than what the socket buffers and the bulk queue hold,
	// so the first stream cannot have finished when the second fetch
	// arrives.
	f := newFixture(t, fixtureOpts{home: bigHome(t, 1_000_000)})
	_, m, _ := f.srv.Head("big")
	fi := m.File(format.DataFile)
	if fi.Size < 12<<20 {
		t.Fatalf("data.arrow is only %d bytes", fi.Size)
	}
	ws := f.mustDial("")
	send(t, ws, hello())
	fetch := &protocol.Message{Type: protocol.TFetch, Dataset: "big", Snapshot: m.SnapshotID, File: fi.Name, SHA256: fi.SHA256}
	send(t, ws, fetch)
	var chunks, bytesIn int64
	ends := 0
	refetched := false
	err := readUntil(ws, 60*time.Second, func(kind int, b []byte) bool {
		if kind == websocket.TextMessage {
			msg, err := protocol.DecodeMessage(b)
			if err == nil && msg.Type == protocol.TFileEnd {
				ends++
				// Let a cancelled stream's end arrive, if it sends one.
				ws.SetReadDeadline(time.Now().Add(time.Second))
			}
			return false
		}
		v, err := protocol.DecodeBinary(b)
		if c, ok := v.(*protocol.Chunk); err == nil && ok {
			chunks++
			bytesIn += int64(len(c.Data))
			if hex.EncodeToString(c.SHA256[:]) != fi.SHA256 {
				t.Errorf("chunk of another file")
			}
			if chunks == 2 && !refetched {
				refetched = true
				send(t, ws, fetch) // from 0 again
				// Stop reading for a moment: the first stream then fills
				// the socket buffers and waits on the bulk queue, so it is
				// still running when the hub reads the second fetch, however
				// slowly the machine schedules the hub's reader (under load
				// it could otherwise finish all 16 MB first).
				time.Sleep(300 * time.Millisecond)
			}
		}
		return false
	})
	var ne interface{ Timeout() bool }
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatal(err)
	}
	t.Logf("file %d bytes: %d chunk frames, %d bytes received, %d file_end", fi.Size, chunks, bytesIn, ends)
	// The second stream sends the whole file; the first only what was
	// already queued or in the socket buffers when the second fetch
	// arrived, and no file_end.
	if ends != 1 || bytesIn >= 2*fi.Size-protocol.MaxChunk {
		t.Errorf("received %d bytes and %d file_end for a %d-byte file fetched twice: the first stream was not stopped", bytesIn, ends, fi.Size)
	}
}
