//go:build !windows

package hub_test

import (
	"fmt"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server/hub"
	"github.com/energyscope/energyscope/sync/protocol"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHubFanout: the hub alone (a Source in memory, no server)
// with ES_HUB_BENCH_SUBS live websocket subscribers (default 1,000) on
// loopback, each reading like a companion (decode and check every
// frame). Each op publishes one record and waits until every subscriber
// has it. Reports the fan-out's wall time (p50/p99 of the last
// subscriber's arrival) and the process's CPU (both ends of every
// websocket) per subscriber per record: the cost BenchmarkClusterAcceptToVisible
// multiplies by its 3,000 companions, measured without its servers and
// log. burst=1: one record at a time, 3 ms apart; burst=8: 8 records
// published back to back (a burst) before the wait.
func BenchmarkHubFanout(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("ES_HUB_BENCH_SUBS")); err == nil && v > 0 {
		n = v
	}
	var rl syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	if need := uint64(2*n + 256); rl.Cur < need {
		rl.Cur = min(need, rl.Max)
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
		if rl.Cur < need {
			b.Fatalf("RLIMIT_NOFILE %d < %d", rl.Cur, need)
		}
	}
	for _, burst := range []int{1, 8} {
		b.Run(fmt.Sprintf("subs=%d/burst=%d", n, burst), func(b *testing.B) { benchFanout(b, n, burst) })
	}
}

func benchFanout(b *testing.B, n, burst int) {
	src := &fanSource{}
	h := hub.New(src, hub.Options{SendQueue: 256})
	hs := httptest.NewServer(h)
	defer hs.Close()
	defer h.Close()
	u := "ws" + strings.TrimPrefix(hs.URL, "http")
	var (
		got      atomic.Int64 // records received, all subscribers
		want     atomic.Int64
		reached  = make(chan struct{}, 1)
		failOnce sync.Once
		failed   = make(chan error, 1)
	)
	onGot := func(uint64) {
		if got.Add(1) == want.Load() {
			reached <- struct{}{}
		}
	}
	fail := func(err error) { failOnce.Do(func() { failed <- err }) }
	conns := make([]*websocket.Conn, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	errs := make(chan error, n)
	for i := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			d := websocket.Dialer{ReadBufferSize: 4096, WriteBufferSize: 1024}
			ws, _, err := d.Dial(u, nil)
			if err != nil {
				errs <- err
				return
			}
			conns[i] = ws
			hello := &protocol.Message{Type: protocol.THello, Proto: []int{protocol.VersionMin, protocol.VersionMax}, Client: fmt.Sprintf("f%d", i),
				Subs: []protocol.Sub{{Dataset: "fan", Epoch: 1, Snapshot: "s1", Seq: src.seq.Load()}}}
			if err := ws.WriteMessage(websocket.TextMessage, hello.Encode()); err != nil {
				errs <- err
				return
			}
			for {
				_, msg, err := ws.ReadMessage()
				if err != nil {
					errs <- err
					return
				}
				if m, err := protocol.DecodeMessage(msg); err == nil && m.Type == protocol.TCatchupEnd {
					break
				}
			}
			go fanSubscriber(ws, src.seq.Load(), onGot, fail)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	defer func() {
		for _, ws := range conns {
			ws.Close()
		}
	}()
	var lat []time.Duration
	c0 := cpuTime()
	for i := 0; b.Loop(); i++ {
		seq := src.seq.Add(1)
		rec := format.Record{Seq: seq, Op: format.Upsert, SeriesID: "S", Period: int64(seq) * 86400, Value: float64(seq)}
		want.Add(int64(n))
		t0 := time.Now()
		h.Publish("fan", []format.Record{rec})
		if (i+1)%burst != 0 {
			continue
		}
		select {
		case <-reached:
		case err := <-failed:
			b.Fatal(err)
		case <-time.After(60 * time.Second):
			b.Fatalf("record %d: %d of %d deliveries after 60 s (%+v)", seq, got.Load(), want.Load(), h.Stats())
		}
		lat = append(lat, time.Since(t0))
		// Rows apart (the hub's burst window is 2 ms); a burst is the
		// records of burst=k published back to back.
		time.Sleep(3 * time.Millisecond)
	}
	cpu := cpuTime() - c0
	if s := h.Stats(); s.SlowConsumerCuts != 0 {
		b.Fatalf("%d slow-consumer cuts", s.SlowConsumerCuts)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(cpu.Nanoseconds())/1000/float64(b.N)/float64(n), "cpu-us/sub/rec")
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "wall-p50-ms")
		b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "wall-p99-ms")
	}
	b.ReportMetric(0, "ns/op")
}
