package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/lake"
)

// demoServer starts a server on a free loopback port with a write and a
// read token.
func demoServer(home string) (url, writeTok, readTok string, stop func(), err error) {
	tokens, err := server.LoadTokens(filepath.Join(home, server.TokensFile))
	if err != nil {
		return "", "", "", nil, err
	}
	if writeTok, err = tokens.Add("demo-ingest", server.ScopeWrite); err != nil {
		return "", "", "", nil, err
	}
	if readTok, err = tokens.Add("demo-companion", server.ScopeRead); err != nil {
		return "", "", "", nil, err
	}
	// The server's lake, as es serve opens it: the datasets cooked above
	// are published into it once (the migration of a home without one).
	lk, err := lake.Open(context.Background(), lake.DefaultOptions(home))
	if err != nil {
		return "", "", "", nil, err
	}
	srv, err := server.New(server.Options{Home: home, Tokens: tokens, Lake: lk})
	if err != nil {
		lk.Close()
		return "", "", "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return "", "", "", nil, err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Hub().Close()
		hs.Shutdown(ctx)
		srv.Close()
		lk.Close()
	}
	return "http://" + ln.Addr().String(), writeTok, readTok, stop, nil
}

// demoTicker posts n values of a live series, one a second, and reports
// when each became visible on the companion.
func demoTicker(out io.Writer, url, token string, st *localcache.Store, n int) error {
	const id = "DEMO.WTI_SPOT.D"
	day := time.Now().UTC().Truncate(24 * time.Hour)
	price := 71.25
	for i := range n {
		price += float64((i*7)%5-2) * 0.37
		period := day.AddDate(0, 0, -n+1+i).Format("2006-01-02")
		body := map[string]any{"rows": []map[string]any{{"series_id": id, "period": period, "value": price,
			"name": "Demo WTI spot price (synthetic)", "unit": "$/bbl", "source": "demo ticker", "frequency": "D"}}}
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", url+"/v1/datasets/eia/rows", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		sent := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		var ack struct {
			LastSeq uint64 `json:"last_seq"`
			Error   string `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&ack)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("post rows: %s: %s", resp.Status, ack.Error)
		}
		for {
			if p, v, err := st.Latest(id); err == nil && v == price && time.Unix(p, 0).UTC().Format("2006-01-02") == period {
				break
			}
			if time.Since(sent) > 10*time.Second {
				return fmt.Errorf("value %v did not reach the companion", price)
			}
			time.Sleep(200 * time.Microsecond)
		}
		fmt.Fprintf(out, "  seq %-4d %s %s = %s  visible on the companion after %v\n", ack.LastSeq, id, period,
			strconv.FormatFloat(price, 'f', 2, 64), time.Since(sent).Round(10*time.Microsecond))
		if i < n-1 {
			time.Sleep(time.Second - time.Since(sent))
		}
	}
	return nil
}
