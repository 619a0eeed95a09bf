//go:build unix

package server

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
)

const lookupFaultChild = "ES_SERVER_LOOKUP_FAULT_CHILD"

// TestLookupOfTruncatedMappingAnswersDamaged (issue 10, items 8 and 2 of
// the follow-up): a series lookup reads its points from the mapped
// data.arrow. When that file is truncated underneath the running server,
// past the period column the lookup searches but inside the value column
// the response is made of, the lookup answers 503 (the dataset is
// damaged), the server lives on and the other dataset keeps serving. The
// server used to read the points after Store.Get returned, outside the
// store's fault guard, and died of SIGBUS: the scenario runs in a child
// process, whose exit this test checks.
func TestLookupOfTruncatedMappingAnswersDamaged(t *testing.T) {
	if os.Getenv(lookupFaultChild) != "" {
		lookupFaultScenario(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestLookupOfTruncatedMappingAnswersDamaged$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), lookupFaultChild+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestLookupOfTruncatedMappingAnswersDamaged") {
		tail := string(out)
		if len(tail) > 3000 {
			tail = tail[:3000]
		}
		t.Fatalf("the server child failed (%v); a SIGBUS means a lookup read the mapping outside the fault guard:\n%s", err, tail)
	}
}

// lookupFaultValue is the value of point i of series BIG.
func lookupFaultValue(i int) float64 { return 1000.5 + float64(i)*0.25 }

func lookupFaultScenario(t *testing.T) {
	home := t.TempDir()
	ls := startLive(t, home, Options{})
	const points = 8000 // 64 KiB of values: many pages past the periods
	var csv bytes.Buffer
	csv.WriteString("symbol,date,price\n")
	day0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range points {
		fmt.Fprintf(&csv, "BIG,%s,%g\n", day0.AddDate(0, 0, i).Format("2006-01-02"), lookupFaultValue(i))
	}
	if code, body := ls.do("PUT", "/v1/datasets/big?series_col=symbol&period_col=date&value_col=price&frequency=D", ls.write, "text/csv", &csv); code != 200 {
		t.Fatalf("upload big: %d %s", code, body)
	}
	if code, body := ls.do("PUT", "/v1/datasets/stocks"+stocksQuery, ls.write, "text/csv", bytes.NewReader(stocksBody(t))); code != 200 {
		t.Fatalf("upload stocks: %d %s", code, body)
	}
	const msft = "/v1/series/MSFT?from=2000-01-01&to=2000-02-28"
	const msftWant = "period,value\n2000-01-01,39.81\n2000-02-01,36.35\n"
	if code, body := ls.do("GET", "/v1/series/BIG", ls.read, "", nil); code != 200 || strings.Count(body, "\n") != points+1 {
		t.Fatalf("BIG before the damage: %d, %d lines", code, strings.Count(body, "\n"))
	}

	// Cut data.arrow a page into the value column: the periods (which the
	// lookup's search reads) stay, the values the response needs are gone.
	dir := filepath.Join(home, localcache.DatasetsDir, "big")
	id, err := format.ReadCurrent(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, format.SnapshotsDir, id, format.DataFile)
	b, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	var first []byte
	for i := range 4 {
		first = binary.LittleEndian.AppendUint64(first, math.Float64bits(lookupFaultValue(i)))
	}
	off := bytes.Index(b, first)
	page := os.Getpagesize()
	cut := (off/page + 2) * page
	if off < 0 || cut+4*page > len(b) {
		t.Fatalf("values at offset %d of %d bytes: cannot cut inside them", off, len(b))
	}
	if err := os.Truncate(data, int64(cut)); err != nil {
		t.Fatal(err)
	}

	for i, accept := range []string{"", "application/json", "application/vnd.apache.arrow.stream"} {
		path := "/v1/series/BIG"
		if i == 2 {
			path = "/v1/series/big:BIG"
		}
		code, body := ls.doAccept("GET", path, ls.read, accept)
		if code != 503 || !strings.Contains(body, "damaged") {
			t.Fatalf("GET %s (Accept %q) over a truncated data.arrow: %d %s; want 503 naming the damage", path, accept, code, body)
		}
	}
	if code, body := ls.do("GET", msft, ls.read, "", nil); code != 200 || body != msftWant {
		t.Fatalf("the other dataset after the fault: %d %q", code, body)
	}
	h := ls.health()
	if h.State != HealthDegraded || h.Damaged != 1 {
		t.Fatalf("health after the fault: %+v", h)
	}
	for _, d := range h.Datasets {
		if (d.Name == "big") != (d.State == HealthDamaged) {
			t.Fatalf("health after the fault: %+v", h)
		}
	}
}

// doAccept is do (a GET without a body) with an Accept header.
func (ls *liveServer) doAccept(method, path, token, accept string) (int, string) {
	ls.t.Helper()
	req, err := http.NewRequest(method, ls.url+path, nil)
	if err != nil {
		ls.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	c := &http.Client{Timeout: 60 * time.Second}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		ls.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
