package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/energyscope/server/cook"
)

const stocksCSV = "cook/samples/stocks.csv"

type fixture struct {
	t           *testing.T
	home        string
	srv         *Server
	hs          *httptest.Server
	read, write string
}

func newFixture(t *testing.T, home string) *fixture {
	t.Helper()
	tokens, err := LoadTokens(home + "/" + TokensFile)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, home: home}
	if tokens.Empty() {
		if f.read, err = tokens.Add("r", ScopeRead); err != nil {
			t.Fatal(err)
		}
		if f.write, err = tokens.Add("w", ScopeWrite); err != nil {
			t.Fatal(err)
		}
	}
	f.srv, err = New(Options{Home: home, Tokens: tokens, CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	f.hs = httptest.NewServer(f.srv.Handler())
	return f
}

func (f *fixture) close() { f.hs.Close(); f.srv.Close() }

func (f *fixture) do(method, path, token, ctype string, body io.Reader, accept string) (int, string) {
	f.t.Helper()
	req, _ := http.NewRequest(method, f.hs.URL+path, body)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServerIngestLookupAuthRestart(t *testing.T) {
	home := t.TempDir()
	f := newFixture(t, home)
	read, write := f.read, f.write
	csvBody, _ := os.ReadFile(stocksCSV)

	// Auth: no token, wrong token, read token on a write endpoint.
	if code, _ := f.do("PUT", "/v1/datasets/stocks?series_col=symbol&period_col=date&value_col=price", "", "text/csv", bytes.NewReader(csvBody), ""); code != 401 {
		t.Fatalf("no token: %d", code)
	}
	if code, _ := f.do("GET", "/v1/datasets", "es_wrong", "", nil, ""); code != 401 {
		t.Fatalf("wrong token: %d", code)
	}
	if code, _ := f.do("PUT", "/v1/datasets/stocks", read, "text/csv", bytes.NewReader(csvBody), ""); code != 403 {
		t.Fatalf("read token writing: %d", code)
	}
	if code, body := f.do("PUT", "/v1/datasets/stocks?series_col=symbol&period_col=date&value_col=price&frequency=M", write, "text/csv", bytes.NewReader(csvBody), ""); code != 200 {
		t.Fatalf("upload: %d %s", code, body)
	}

	// Ingest in three forms; seqs are consecutive.
	code, body := f.do("POST", "/v1/datasets/stocks/rows", write, "text/csv", strings.NewReader("series_id,period,value\nMSFT,2026-11-01,500.5\n"), "")
	if code != 200 || !strings.Contains(body, `"last_seq":1`) {
		t.Fatalf("csv ingest: %d %s", code, body)
	}
	code, body = f.do("POST", "/v1/datasets/stocks/rows", write, "application/json", strings.NewReader(`{"rows":[{"series_id":"MSFT","period":"2026-10-01","value":490},{"series_id":"AAPL","period":"2000-01-01","op":"delete"}]}`), "")
	if code != 200 || !strings.Contains(body, `"first_seq":2`) || !strings.Contains(body, `"last_seq":3`) {
		t.Fatalf("json ingest: %d %s", code, body)
	}
	code, body = f.do("POST", "/v1/datasets/stocks/rows", write, "application/vnd.apache.arrow.stream", arrowRows(t), "")
	if code != 200 || !strings.Contains(body, `"last_seq":4`) {
		t.Fatalf("arrow ingest: %d %s", code, body)
	}
	// Bad rows change nothing.
	for _, bad := range []string{"series_id,period,value\nMSFT,2026-12-01,NaN\n", "series_id,period,value\nMSFT,notadate,1\n", "nonsense"} {
		if code, _ := f.do("POST", "/v1/datasets/stocks/rows", write, "text/csv", strings.NewReader(bad), ""); code != 400 {
			t.Fatalf("bad rows %q: %d", bad, code)
		}
	}
	if code, _ := f.do("POST", "/v1/datasets/nope/rows", write, "text/csv", strings.NewReader("series_id,period,value\nA,2020-01-01,1\n"), ""); code != 404 {
		t.Fatalf("unknown dataset: %d", code)
	}

	// Lookups in CSV, JSON and Arrow.
	code, body = f.do("GET", "/v1/series/MSFT?from=2026-09-01&to=2026-12-31", read, "", nil, "")
	if code != 200 || body != "period,value\n2026-10-01,490\n2026-11-01,500.5\n2026-12-01,510\n" {
		t.Fatalf("csv lookup: %d %q", code, body)
	}
	code, body = f.do("GET", "/v1/series/MSFT?from=2000-01-01&to=2000-01-31", read, "", nil, "application/json")
	if code != 200 || !strings.Contains(body, `{"period":"2000-01-01","value":39.81}`) {
		t.Fatalf("json lookup: %d %s", code, body)
	}
	code, body = f.do("GET", "/v1/series/AAPL?from=2000-01-01&to=2000-02-01", read, "", nil, "application/vnd.apache.arrow.stream")
	if code != 200 {
		t.Fatalf("arrow lookup: %d", code)
	}
	rd, err := ipc.NewReader(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	rd.Next()
	if rec := rd.RecordBatch(); rec.NumRows() != 1 { // Jan 2000 deleted, Feb left
		t.Fatalf("arrow lookup rows %d", rec.NumRows())
	}
	rd.Release()
	if code, _ := f.do("GET", "/v1/series/NOPE", read, "", nil, ""); code != 404 {
		t.Fatalf("unknown series: %d", code)
	}
	if code, body := f.do("GET", "/metrics", "", "", nil, ""); code != 200 || !strings.Contains(body, "es_ingest_rows_total 4") {
		t.Fatalf("metrics: %d %s", code, body)
	}

	// Restart: acknowledged rows survive and seqs continue.
	f.close()
	f = newFixture(t, home)
	defer f.close()
	code, body = f.do("POST", "/v1/datasets/stocks/rows", write, "text/csv", strings.NewReader("series_id,period,value\nIBM,2026-11-01,1\n"), "")
	if code != 200 || !strings.Contains(body, `"first_seq":5`) {
		t.Fatalf("after restart: %d %s", code, body)
	}
	if code, body := f.do("GET", "/v1/series/MSFT?from=2026-11-01&to=2026-11-30", read, "", nil, ""); code != 200 || !strings.Contains(body, "500.5") {
		t.Fatalf("acknowledged row lost across restart: %s", body)
	}
	// The history still serves a catch-up from seq 0.
	if recs, ok := f.srv.Since("stocks", 0); !ok || len(recs) != 5 || recs[4].Seq != 5 {
		t.Fatalf("history after restart: %v %d", ok, len(recs))
	}
	// Compaction publishes a snapshot covering seq 5.
	code, body = f.do("POST", "/v1/datasets/stocks/compact", write, "", nil, "")
	var m struct {
		CoversThroughSeq uint64 `json:"covers_through_seq"`
	}
	json.Unmarshal([]byte(body), &m)
	if code != 200 || m.CoversThroughSeq != 5 {
		t.Fatalf("compact: %d %s", code, body)
	}
}

func arrowRows(t *testing.T) io.Reader {
	schema := arrow.NewSchema([]arrow.Field{{Name: "series_id", Type: arrow.BinaryTypes.String}, {Name: "period", Type: arrow.FixedWidthTypes.Date32}, {Name: "value", Type: arrow.PrimitiveTypes.Float64}}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).Append("MSFT")
	b.Field(1).(*array.Date32Builder).Append(arrow.Date32FromTime(mustDate("2026-12-01")))
	b.Field(2).(*array.Float64Builder).Append(510)
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return &buf
}

func TestTokens(t *testing.T) {
	path := t.TempDir() + "/tokens.json"
	tk, _ := LoadTokens(path)
	plain, err := tk.Add("alice", ScopeRead)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tk.Add("alice", ScopeWrite); err == nil {
		t.Fatal("duplicate name accepted")
	}
	tk2, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	if name, ok := tk2.Check(plain, ScopeRead); name != "alice" || !ok {
		t.Fatal("token not recognised after reload")
	}
	if _, ok := tk2.Check(plain, ScopeWrite); ok {
		t.Fatal("read token granted write")
	}
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), plain) {
		t.Fatal("plain token stored")
	}
	if err := tk2.Remove("alice"); err != nil {
		t.Fatal(err)
	}
	if name, _ := tk2.Check(plain, ScopeRead); name != "" {
		t.Fatal("removed token still accepted")
	}
}

func mustDate(s string) time.Time {
	u, err := cook.ParsePeriod(s)
	if err != nil {
		panic(err)
	}
	return time.Unix(u, 0).UTC()
}

// TestCloseTwice: a second Close (a deferred Close after an explicit one,
// say) returns the first's result instead of panicking on the closed stop
// channel.
func TestCloseTwice(t *testing.T) {
	srv, err := New(Options{Home: t.TempDir(), CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	first := srv.Close()
	if second := srv.Close(); second != first {
		t.Fatalf("second Close returned %v, the first %v", second, first)
	}
}
