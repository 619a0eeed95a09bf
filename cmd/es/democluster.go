package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/cook/samples"
	"github.com/energyscope/energyscope/server/deltalog"
	"github.com/energyscope/energyscope/server/lake"
)

// demoReplica is one es serve replica of the cluster demo, in process.
type demoReplica struct {
	name, home, addr string
	// what start was given (restart)
	catalogURI, warehouse, natsURLs string
	lk                              *lake.Lake
	dl                              *deltalog.Log
	closeTokens                     func()
	srv                             *server.Server
	hs                              *http.Server
}

// runDemoCluster is es demo --cluster: the topology of README "Running
// several servers" on loopback, narrated. A 3-node NATS JetStream
// cluster (the delta log and the shared tokens), one lake (an SQLite
// catalog file and a file:// warehouse, shared as a PostgreSQL catalog
// and an S3 bucket would be across machines), three replicas and two
// companions given every replica in a different order.
func runDemoCluster(e *env, dir string) error {
	out := e.stdout
	fmt.Fprintf(out, "EnergyScope cluster demo in %s (everything on loopback)\n\n", dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// 1. NATS JetStream: three nodes, one cluster.
	t0 := time.Now()
	nodes, err := startDemoNATS(filepath.Join(dir, "nats"), 3)
	if err != nil {
		return err
	}
	defer func() {
		for _, n := range nodes {
			n.Shutdown()
		}
	}()
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.ClientURL())
	}
	natsURLs := strings.Join(urls, ",")
	fmt.Fprintf(out, "NATS JetStream cluster of 3 nodes up in %v: %s\n", time.Since(t0).Round(time.Millisecond), natsURLs)
	fmt.Fprintf(out, "  the delta log: one stream per dataset, 3 replicas each; the tokens: key-value bucket %s\n", server.SharedTokensBucket)

	// 2. Tokens, once, in the shared store.
	tokens, closeTokens, err := openTokens(natsURLs)
	if err != nil {
		return err
	}
	write, err := tokens.Add("demo-ingest", server.ScopeWrite)
	if err != nil {
		return err
	}
	read, err := tokens.Add("demo-companions", server.ScopeRead)
	if err != nil {
		return err
	}
	closeTokens()
	fmt.Fprintf(out, "es token add --tokens %s,...: 2 tokens, held by every replica\n", urls[0])

	// 3. The lake and three replicas.
	catalogURI := "sqlite:" + filepath.Join(dir, "lake", "catalog.db")
	warehouse := filepath.Join(dir, "lake", "warehouse")
	fmt.Fprintf(out, "the lake: catalog %s, warehouse %s\n\n", catalogURI, warehouse)
	reps := make([]*demoReplica, 3)
	for i := range reps {
		reps[i] = &demoReplica{name: fmt.Sprintf("r%d", i+1), home: filepath.Join(dir, fmt.Sprintf("r%d", i+1)), addr: "127.0.0.1:0"}
		t0 := time.Now()
		if err := reps[i].start(catalogURI, warehouse, natsURLs); err != nil {
			return err
		}
		defer reps[i].stop()
		fmt.Fprintf(out, "replica %s: es serve --home %s --catalog ... --nats ... --tokens nats://... on http://%s (up in %v)\n",
			reps[i].name, reps[i].home, reps[i].addr, time.Since(t0).Round(time.Millisecond))
	}

	// 4. A dataset put through r1 is served by all three.
	set := samples.Sets[1] // stocks
	body, err := fs.ReadFile(samples.FS, set.File)
	if err != nil {
		return err
	}
	q := fmt.Sprintf("series_col=%s&period_col=%s&value_col=%s&frequency=%s", set.Opts.SeriesCol, set.Opts.PeriodCol, set.Opts.ValueCol, set.Opts.Frequency)
	t0 = time.Now()
	if _, err := demoDo("PUT", "http://"+reps[0].addr+"/v1/datasets/stocks?"+q, write, "text/csv", body); err != nil {
		return err
	}
	h, _, _ := reps[0].srv.Head("stocks")
	fmt.Fprintf(out, "\nPUT stocks on r1: one Iceberg commit (vintage %s)\n", h.Snapshot)
	for _, r := range reps[1:] {
		if err := waitDemo(15*time.Second, func() bool { g, _, ok := r.srv.Head("stocks"); return ok && g.Snapshot == h.Snapshot }); err != nil {
			return fmt.Errorf("%s does not serve stocks: %w", r.name, err)
		}
		fmt.Fprintf(out, "  %s serves it %v after the PUT (it follows the lake's head)\n", r.name, time.Since(t0).Round(time.Millisecond))
	}

	// 5. Two companions, each given every replica.
	type companion struct {
		name  string
		st    *localcache.Store
		stats func() int64
		m     func() string
	}
	var comps []companion
	for i, order := range [][]int{{0, 1, 2}, {1, 2, 0}} {
		var list []string
		for _, j := range order {
			list = append(list, "http://"+reps[j].addr)
		}
		st, err := localcache.Open(filepath.Join(dir, fmt.Sprintf("companion-%d", i+1)), &localcache.Options{CompactRows: -1, CompactBytes: -1})
		if err != nil {
			return err
		}
		defer st.Close()
		eng, done := startSync(ctx, st, syncConfig{server: strings.Join(list, ","), token: read, name: fmt.Sprintf("companion-%d", i+1)})
		defer func() { cancel(); <-done }()
		t0 := time.Now()
		if err := waitDemo(60*time.Second, func() bool { _, id, _, err := st.State("stocks"); return err == nil && id == h.Snapshot }); err != nil {
			return fmt.Errorf("companion %d did not sync: %w", i+1, err)
		}
		comps = append(comps, companion{name: fmt.Sprintf("companion-%d", i+1), st: st, stats: eng.Stats.BytesDownloaded.Load,
			m: func() string { return eng.Metrics().Server }})
		fmt.Fprintf(out, "companion-%d (--server %s) synced stocks from %s in %v (%s)\n", i+1, strings.Join(list, ","), eng.Metrics().Server,
			time.Since(t0).Round(time.Millisecond), humanBytes(eng.Stats.BytesDownloaded.Load()))
	}

	// 6. Rows posted to one replica reach the companions of the others.
	day := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	post := func(r *demoReplica, i int) (time.Time, error) {
		p := day.AddDate(0, 0, i)
		b := fmt.Sprintf(`{"rows":[{"series_id":"LIVE.DEMO","period":%q,"value":%d,"frequency":"D","name":"cluster demo"}]}`, p.Format("2006-01-02"), 100+i)
		at := time.Now()
		_, err := demoDo("POST", "http://"+r.addr+"/v1/datasets/stocks/rows", write, "application/json", []byte(b))
		return at, err
	}
	seen := func(st *localcache.Store, i int) bool {
		p := day.AddDate(0, 0, i).Unix()
		_, v, err := st.Copy("LIVE.DEMO", p, p)
		return err == nil && len(v) == 1 && v[0] == float64(100+i)
	}
	fmt.Fprintln(out)
	for i, r := range reps {
		at, err := post(r, i)
		if err != nil {
			return err
		}
		var parts []string
		for _, c := range comps {
			if err := waitDemo(10*time.Second, func() bool { return seen(c.st, i) }); err != nil {
				return fmt.Errorf("%s did not see the row posted to %s: %w", c.name, r.name, err)
			}
			parts = append(parts, fmt.Sprintf("%s (on %s) after %v", c.name, strings.TrimPrefix(c.m(), "http://"), time.Since(at).Round(time.Millisecond)))
		}
		fmt.Fprintf(out, "a row posted to %s (acknowledged once JetStream has it): seen by %s\n", r.name, strings.Join(parts, ", "))
	}

	// 7. A replica dies; its companion fails over; nothing is downloaded again.
	before := comps[0].stats()
	fmt.Fprintf(out, "\nreplica r1 stops (its companion-1 is connected to it)\n")
	t0 = time.Now()
	reps[0].stop()
	at, err := post(reps[1], 10)
	if err != nil {
		return err
	}
	if err := waitDemo(30*time.Second, func() bool { return seen(comps[0].st, 10) }); err != nil {
		return fmt.Errorf("companion-1 did not fail over: %w", err)
	}
	fmt.Fprintf(out, "  companion-1 failed over to %s and has a row posted to r2 %v after it was posted (%v after the stop); bytes downloaded again: %d\n",
		comps[0].m(), time.Since(at).Round(time.Millisecond), time.Since(t0).Round(time.Millisecond), comps[0].stats()-before)
	t0 = time.Now()
	if err := reps[0].start(catalogURI, warehouse, natsURLs); err != nil {
		return err
	}
	if err := waitDemo(15*time.Second, func() bool { return seenOn(reps[0], "LIVE.DEMO", day.AddDate(0, 0, 10)) }); err != nil {
		return fmt.Errorf("r1 did not rejoin: %w", err)
	}
	fmt.Fprintf(out, "  r1 restarts on the same home: it maps the lake's vintage and replays the stream, serving the row posted while it was down after %v\n", time.Since(t0).Round(time.Millisecond))
	fmt.Fprintf(out, "\nThe demo's directory is removed now.\n")
	return nil
}

func (r *demoReplica) start(catalogURI, warehouse, natsURLs string) error {
	r.catalogURI, r.warehouse, r.natsURLs = catalogURI, warehouse, natsURLs
	var err error
	if r.lk, err = lake.Open(context.Background(), lake.Options{Home: r.home, CatalogURI: catalogURI, Warehouse: warehouse}); err != nil {
		return err
	}
	if r.dl, err = deltalog.Connect(natsURLs, deltalog.Options{ClientName: "es-demo-" + r.name}); err != nil {
		return err
	}
	tokens, closeTokens, err := openTokens(natsURLs)
	if err != nil {
		return err
	}
	r.closeTokens = closeTokens
	if r.srv, err = server.New(server.Options{Home: r.home, Tokens: tokens, Lake: r.lk, DeltaLog: r.dl}); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		return err
	}
	r.addr = ln.Addr().String()
	r.hs = &http.Server{Handler: r.srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go r.hs.Serve(ln)
	return nil
}

// restart starts the stopped replica again on its home and address.
func (r *demoReplica) restart() error { return r.start(r.catalogURI, r.warehouse, r.natsURLs) }

func (r *demoReplica) stop() {
	if r.srv == nil {
		return
	}
	r.srv.Hub().Close()
	r.hs.Close()
	r.srv.Close()
	r.dl.Close()
	r.closeTokens()
	r.lk.Close()
	r.srv = nil
}

// seenOn reports whether replica r serves series at day.
func seenOn(r *demoReplica, series string, day time.Time) bool {
	if r.srv == nil {
		return false
	}
	_, v, err := r.srv.Store().Copy(series, day.Unix(), day.Unix())
	return err == nil && len(v) == 1
}

func demoDo(method, url, token, ctype string, body []byte) ([]byte, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", ctype)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return b, nil
}

func waitDemo(d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", d)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// startDemoNATS starts an n-node NATS JetStream cluster in this process
// on loopback, its stores under dir.
func startDemoNATS(dir string, n int) ([]*deltalog.Node, error) {
	var clientPorts, routePorts []int
	var routes []string
	for range n {
		cp, err := deltalog.FreePort()
		if err != nil {
			return nil, err
		}
		rp, err := deltalog.FreePort()
		if err != nil {
			return nil, err
		}
		clientPorts, routePorts = append(clientPorts, cp), append(routePorts, rp)
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", rp))
	}
	nodes := make([]*deltalog.Node, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[i], errs[i] = deltalog.StartNode(deltalog.NodeOptions{Dir: filepath.Join(dir, fmt.Sprint(i+1)), Name: fmt.Sprintf("n%d", i+1), Port: clientPorts[i],
				Cluster: &deltalog.ClusterOptions{Name: "es-demo", Port: routePorts[i], Routes: routes}})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			for _, n := range nodes {
				if n != nil {
					n.Shutdown()
				}
			}
			return nil, fmt.Errorf("NATS node %d: %w", i+1, err)
		}
	}
	return nodes, nil
}
