package main

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/energyscope/energyscope/internal/synth"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/server/cook"
	"github.com/energyscope/energyscope/server/cook/samples"
	"github.com/energyscope/energyscope/server/lake"
	"github.com/energyscope/energyscope/sync/client"
)

func runDemo(e *env, args []string) error {
	var home string
	fset := newFlags(e, "demo", nil)
	fset.StringVar(&home, "home", "", "home directory to build the demo in and keep: es get/info/search --home DIR, es companion --home DIR and energyscope --home DIR open it (default: a temporary directory, removed afterwards)")
	series := fset.Int("series", 2000, "synthetic series to generate")
	rows := fset.Int64("rows", 150_000, "synthetic rows to generate")
	ticks := fset.Int("live", 5, "seconds of live updates to show (0 = none)")
	cluster := fset.Bool("cluster", false, "instead: several servers as one service on loopback (a NATS cluster, one lake, 3 replicas, 2 companions), a replica stopped and a companion failing over")
	if _, err := parse(fset, args); err != nil {
		return err
	}
	if *cluster {
		d := home
		if d == "" {
			t, err := os.MkdirTemp("", "es-demo-cluster-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(t)
			d = t
		}
		return runDemoCluster(e, d)
	}
	keep := home != ""
	if !keep {
		d, err := os.MkdirTemp("", "es-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		home = d
	}
	out := e.stdout
	// The companion's store is DIR itself, so that every command and the app open
	// the synced datasets with --home DIR as given. The demo server's own home and
	// the sample sources sit beside the store's datasets/ in subdirectories the
	// store does not read.
	companionHome := home
	serverHome := filepath.Join(home, "demo-server")
	src := filepath.Join(home, "demo-sources")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(out, "EnergyScope demo in %s\n\n", home)

	// 1. A synthetic EIA-like dataset.
	t0 := time.Now()
	synthFile := filepath.Join(src, "eia-synthetic.csv")
	if _, err := synth.WriteFile(synthFile, synth.Options{Series: *series, Rows: *rows, Seed: 1}); err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	fmt.Fprintf(out, "generated %d rows of %d synthetic series in %v\n", *rows, *series, time.Since(t0).Round(time.Millisecond))
	res, err := cookDataset(e, serverHome, "eia", []string{synthFile}, cook.InputOptions{}, 1<<20)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "cooked eia: %d rows, %d series -> %s in %v\n", res.manifest.Rows, res.manifest.Series, res.manifest.SnapshotID, res.elapsed.Round(time.Millisecond))

	// 2. The real samples.
	for _, s := range samples.Sets {
		b, err := fs.ReadFile(samples.FS, s.File)
		if err != nil {
			return err
		}
		p := filepath.Join(src, s.File)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
		res, err := cookDataset(e, serverHome, s.Dataset, []string{p}, s.Opts, 1<<20)
		if err != nil {
			return fmt.Errorf("cook %s: %w", s.File, err)
		}
		fmt.Fprintf(out, "cooked %s from %s: %d rows, %d series\n", s.Dataset, s.File, res.manifest.Rows, res.manifest.Series)
	}

	// 3. A server on loopback, and a companion that syncs everything into
	// its own home.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srvURL, writeTok, readTok, stopServer, err := demoServer(serverHome)
	if err != nil {
		return err
	}
	defer stopServer()
	fmt.Fprintf(out, "\nserver listening on %s; its lake (one Iceberg table per dataset) is in %s\n", srvURL, filepath.Join(serverHome, lake.Dir))
	st, err := localcache.Open(companionHome, &localcache.Options{CompactRows: -1, CompactBytes: -1})
	if err != nil {
		return err
	}
	defer st.Close()
	t0 = time.Now()
	eng, syncDone := startSync(ctx, st, syncConfig{server: srvURL, token: readTok, name: "demo-companion"})
	defer func() { cancel(); <-syncDone }()
	for {
		p := eng.Progress()
		live := 0
		for _, d := range p.Datasets {
			if d.State == client.StateLive {
				live++
			}
		}
		if live == 4 {
			break
		}
		if time.Since(t0) > 60*time.Second {
			return fmt.Errorf("companion did not sync within a minute: %+v", p)
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Fprintf(out, "companion synced 4 datasets (%s over the websocket, SHA-256 verified) in %v\n\n",
		humanBytes(eng.Stats.BytesDownloaded.Load()), time.Since(t0).Round(time.Millisecond))

	show := func(ref, from, to string) error {
		f, _ := parseBound(e, from, false)
		t, _ := parseBound(e, to, true)
		t0 := time.Now()
		r, err := st.Get(ref, f, t)
		el := time.Since(t0)
		if err != nil {
			return err
		}
		defer r.Release()
		fmt.Fprintf(out, "es get %s %s %s   (%d points from dataset %s in %v)\n", ref, from, to, r.Points.Len(), r.Dataset, el)
		for i := 0; i < r.Points.Len() && i < 4; i++ {
			fmt.Fprintf(out, "  %s  %g\n", formatPeriod(r.Points.Unix(i), r.Frequency.Intraday()), r.Points.Values[i])
		}
		if r.Points.Len() > 4 {
			fmt.Fprintf(out, "  ... %d more\n", r.Points.Len()-4)
		}
		return nil
	}
	for _, q := range [][3]string{
		{"MSFT", "2000-01-01", "2000-12-31"},
		{"iowa:Fossil Fuels", "2010", "2017"},
		{"SEA.temperature", "2010-07-01T12:00:00", "2010-07-01T15:00:00"},
	} {
		if err := show(q[0], q[1], q[2]); err != nil {
			return err
		}
	}
	hits, err := st.Search("gasoline", 3)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nes search gasoline\n")
	for _, h := range hits {
		fmt.Fprintf(out, "  %-34s %s\n", h.ID, h.Name)
	}
	if len(hits) > 0 {
		in, err := st.Info(hits[0].ID)
		if err != nil {
			return err
		}
		last := time.Unix(in.Last, 0).UTC()
		if err := show(hits[0].ID, last.AddDate(-1, 0, 1).Format("2006-01-02"), last.Format("2006-01-02")); err != nil {
			return err
		}
	}

	// 4. Latency over random synthetic series with a one-year range.
	cat := synth.Catalogue(synth.Options{Series: *series, Rows: *rows, Seed: 1})
	rng := rand.New(rand.NewPCG(1, 2))
	lat := make([]time.Duration, 0, 20000)
	var points int
	from, _ := parseBound(e, "2025-01-01", false)
	to, _ := parseBound(e, "2025-12-31", true)
	for range cap(lat) {
		id := cat[rng.IntN(len(cat))].ID
		t0 := time.Now()
		r, err := st.Get(id, from, to)
		lat = append(lat, time.Since(t0))
		if err != nil {
			return err
		}
		points += r.Points.Len()
		r.Release()
	}
	slices.Sort(lat)
	fmt.Fprintf(out, "\n%d random one-year lookups: p50 %v, p99 %v (%d points in all)\n", len(lat), lat[len(lat)/2], lat[len(lat)*99/100], points)
	// 5. Live: a ticker posts a new value every second to the server; the
	// companion shows it.
	if *ticks > 0 {
		fmt.Fprintf(out, "\nlive: posting a new WTI-like daily value to the server every second\n")
		if err := demoTicker(out, srvURL, writeTok, st, *ticks); err != nil {
			return err
		}
	}

	if keep {
		fmt.Fprintf(out, "\nThe synced datasets stay in %s. Open them with:\n", home)
		fmt.Fprintf(out, "  es get --home %s MSFT 2005 2006\n", home)
		fmt.Fprintf(out, "  es search --home %s gasoline\n", home)
		fmt.Fprintf(out, "  energyscope --home %s        (the desktop app)\n", home)
	} else {
		fmt.Fprintf(out, "\nThe demo's temporary home is removed now; pass --home DIR to keep it and explore with es get/info/search.\n")
	}
	return nil
}
