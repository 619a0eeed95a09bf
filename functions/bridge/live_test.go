package bridge

import (
	"crypto/tls"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

type liveMsg struct {
	Series string   `json:"series"`
	Value  *float64 `json:"value"`
	Date   float64  `json:"date"`
	Error  *errJSON `json:"error"`
}

// liveClient reads a websocket in the background (a gorilla connection
// cannot be read again after a read deadline passes).
type liveClient struct {
	*websocket.Conn
	msgs chan liveMsg
}

func dialLive(t testing.TB, b *testBridge) *liveClient {
	t.Helper()
	d := websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: b.pool}, Subprotocols: []string{"es-live", "bearer." + b.Token()}}
	c, _, err := d.Dial("wss"+strings.TrimPrefix(b.URL(), "https")+"/v1/live", nil)
	if err != nil {
		t.Fatal(err)
	}
	lc := &liveClient{Conn: c, msgs: make(chan liveMsg, 1024)}
	go func() {
		defer close(lc.msgs)
		for {
			_, data, err := c.ReadMessage()
			if err != nil {
				return
			}
			var m liveMsg
			if err := json.Unmarshal(data, &m); err != nil {
				m.Error = &errJSON{Code: "bad", Message: string(data)}
			}
			lc.msgs <- m
		}
	}()
	t.Cleanup(func() { c.Close() })
	return lc
}

func readLive(t testing.TB, c *liveClient, within time.Duration) (liveMsg, bool) {
	t.Helper()
	select {
	case m, ok := <-c.msgs:
		return m, ok
	case <-time.After(within):
		return liveMsg{}, false
	}
}

// april2010 is the period after MSFT's last sample point.
var april2010 = time.Date(2010, 4, 1, 0, 0, 0, 0, time.UTC).Unix()

func TestLivePolling(t *testing.T) {
	b := startBridge(t, sampleHome(t), nil)
	c := dialLive(t, b)
	c.WriteJSON(map[string]any{"subscribe": []string{"MSFT", "NOPE", "stocks:IBM"}})
	got := map[string]liveMsg{}
	for range 3 {
		m, ok := readLive(t, c, 5*time.Second)
		if !ok {
			t.Fatal("no initial value")
		}
		got[m.Series] = m
	}
	if m := got["MSFT"]; m.Value == nil || *m.Value != 28.8 || m.Date != 40238 {
		t.Errorf("MSFT: %+v", m)
	}
	if m := got["stocks:IBM"]; m.Value == nil || *m.Value != 125.55 {
		t.Errorf("stocks:IBM: %+v", m)
	}
	if m := got["NOPE"]; m.Error == nil || m.Error.Code != "#N/A" || !strings.Contains(m.Error.Message, "not found") {
		t.Errorf("NOPE: %+v", m)
	}
	// An update to MSFT reaches the subscriber; IBM did not change: silence.
	b.apply(t, "stocks", "MSFT", april2010, 99.5)
	m, ok := readLive(t, c, 5*time.Second)
	if !ok || m.Series != "MSFT" || m.Value == nil || *m.Value != 99.5 || m.Date != 40269 {
		t.Fatalf("update: %+v %v", m, ok)
	}
	if m, ok := readLive(t, c, 200*time.Millisecond); ok {
		t.Fatalf("unexpected %+v", m)
	}
	// After unsubscribing, nothing more.
	c.WriteJSON(map[string]any{"unsubscribe": []string{"MSFT"}})
	time.Sleep(50 * time.Millisecond)
	b.apply(t, "stocks", "MSFT", april2010, 100)
	if m, ok := readLive(t, c, 200*time.Millisecond); ok {
		t.Fatalf("after unsubscribe: %+v", m)
	}
	// A bad message gets an error reply, and the connection stays.
	c.WriteMessage(websocket.TextMessage, []byte("{nope"))
	if m, ok := readLive(t, c, 2*time.Second); !ok || m.Error == nil {
		t.Fatalf("bad message reply: %+v", m)
	}
	st := b.calc(t, `{"calls":[{"fn":"ES.Latest","args":["MSFT"]}]}`)
	if v := st.Results[0].Value[0][0]; v != 100.0 {
		t.Errorf("latest after updates: %v", v)
	}
}

// fakeFeed is a ChangeFeed the test drives.
type fakeFeed struct {
	mu sync.Mutex
	fn func(string, []string)
}

func (f *fakeFeed) Subscribe(fn func(string, []string)) func() {
	f.mu.Lock()
	f.fn = fn
	f.mu.Unlock()
	return func() {}
}

func (f *fakeFeed) fire(ds string, ids []string) {
	f.mu.Lock()
	fn := f.fn
	f.mu.Unlock()
	fn(ds, ids)
}

func TestLiveChangeFeed(t *testing.T) {
	feed := &fakeFeed{}
	b := startBridge(t, sampleHome(t), func(o *Options) { o.Changes = feed })
	c := dialLive(t, b)
	c.WriteJSON(map[string]any{"subscribe": []string{"MSFT"}})
	if _, ok := readLive(t, c, 5*time.Second); !ok {
		t.Fatal("no initial value")
	}
	// Without a notification, no poll picks the change up.
	b.apply(t, "stocks", "MSFT", april2010, 42)
	if m, ok := readLive(t, c, 200*time.Millisecond); ok {
		t.Fatalf("polled although a feed is set: %+v", m)
	}
	feed.fire("stocks", []string{"MSFT"})
	if m, ok := readLive(t, c, 5*time.Second); !ok || *m.Value != 42 {
		t.Fatalf("after notify: %+v", m)
	}
	// A nil id list rechecks everything.
	b.apply(t, "stocks", "MSFT", april2010, 43)
	feed.fire("stocks", nil)
	if m, ok := readLive(t, c, 5*time.Second); !ok || *m.Value != 43 {
		t.Fatalf("after notify all: %+v", m)
	}
}
