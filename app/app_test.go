package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/energyscope/energyscope/app"
	"github.com/energyscope/energyscope/internal/companion"
	"github.com/energyscope/energyscope/internal/testhome"
	"github.com/energyscope/energyscope/internal/testserver"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server/cook"
)

func TestStatus(t *testing.T) {
	a := newTestApp(t)
	s := a.Status()
	if s.Error != "" || s.Home != a.home || s.Server != "" || s.Online {
		t.Fatalf("status %+v", s)
	}
	var names []string
	for _, d := range s.Datasets {
		names = append(names, d.Name)
		if d.DiskBytes <= 0 || d.SnapshotID == "" || d.State != "offline" || d.CreatedMS != testhome.Created.UnixMilli() {
			t.Errorf("dataset %+v", d)
		}
	}
	if !slices.Equal(names, []string{"iowa", "seattle", "stocks"}) {
		t.Fatalf("datasets %v", names)
	}
	if st := s.Datasets[2]; st.Series != 5 || st.Rows != 560 {
		t.Fatalf("stocks %+v", st)
	}
	if !s.Bridge.Running || !strings.HasPrefix(s.Bridge.URL, "https://127.0.0.1:") {
		t.Fatalf("bridge %+v", s.Bridge)
	}
	// Offline: the sync view says so and lists the local datasets.
	sy := a.SyncProgress()
	if sy.Configured || len(sy.Datasets) != 3 || !sy.Datasets[0].Local || sy.Error != "" {
		t.Fatalf("sync %+v", sy)
	}
	// Pause and Resume without a server are harmless.
	if p := a.Pause(); p.Error != "" || p.Paused {
		t.Fatalf("pause offline %+v", p)
	}
	a.Resume()
	h := a.Hello()
	if h.Home != a.home || h.Error != "" {
		t.Fatalf("hello %+v", h)
	}
	// Hello brings the first view's data: the Status, as Status() has it.
	if h.Status == nil || len(h.Status.Datasets) != 3 || h.Status.Series != s.Series || h.Open != nil {
		t.Fatalf("hello's first view: %+v", h)
	}
}

// TestHelloOpen: with a series to open (--open), Hello brings what the
// Explorer shows first: its details, its points and its formula.
func TestHelloOpen(t *testing.T) {
	home := t.TempDir()
	testhome.CookSamples(t, home)
	for _, c := range []struct{ open, err string }{{"MSFT", ""}, {"NOPE", "NOPE"}} {
		a := viewsOf(app.New(app.Options{Home: home, SettingsFile: filepath.Join(t.TempDir(), "s.json"), Port: -1, OpenSeries: c.open}))
		h := a.Hello()
		a.App.Close(t.Context())
		if h.Error != "" || h.Status != nil || h.Open == nil {
			t.Fatalf("hello %+v", h)
		}
		o := h.Open
		if c.err != "" {
			if !strings.Contains(o.Info.Error, c.err) || len(o.Series.Times) != 0 {
				t.Errorf("open %s: %+v", c.open, o)
			}
			continue
		}
		if o.Info.ID != "MSFT" || o.Info.Dataset != "stocks" || o.Info.Error != "" {
			t.Errorf("info %+v", o.Info)
		}
		if len(o.Series.Times) != int(o.Info.Count) || o.Series.Error != "" || len(o.Series.Values) != len(o.Series.Times) {
			t.Errorf("series: %d points, want %d (%s)", len(o.Series.Times), o.Info.Count, o.Series.Error)
		}
		if o.Formula.Text != `=ES.Get("MSFT")` || o.Formula.Rows != int(o.Info.Count) {
			t.Errorf("formula %+v", o.Formula)
		}
	}
}

func TestSearch(t *testing.T) {
	a := newTestApp(t)
	r := a.Search("msft")
	if r.Error != "" || len(r.Hits) == 0 {
		t.Fatalf("search %+v", r)
	}
	if h := r.Hits[0]; h.ID != "MSFT" || h.Dataset != "stocks" || h.Unit != "USD" || h.Frequency != "M" {
		t.Fatalf("first hit %+v", h)
	}
	r = a.Search("SEA.")
	if len(r.Hits) != 3 {
		t.Fatalf("SEA. hits %+v", r.Hits)
	}
	for _, h := range r.Hits {
		if h.Dataset != "seattle" || h.Frequency != "H" {
			t.Errorf("hit %+v", h)
		}
	}
	if r := a.Search("  "); len(r.Hits) != 0 || r.Error != "" {
		t.Fatalf("blank query %+v", r)
	}
	if r := a.Search("no such series anywhere"); len(r.Hits) != 0 || r.Error != "" {
		t.Fatalf("no match %+v", r)
	}
	// Hits serialize with an empty list, never null (the frontend maps them).
	b, _ := json.Marshal(a.Search("zzz"))
	if !strings.Contains(string(b), `"hits":[]`) {
		t.Fatalf("json %s", b)
	}
}

func TestInfo(t *testing.T) {
	a := newTestApp(t)
	in := a.Info("MSFT")
	if in.Error != "" || in.Dataset != "stocks" || in.Unit != "USD" || in.Frequency != "M" || in.FreqName != "monthly" || in.Count != 123 {
		t.Fatalf("info %+v", in)
	}
	if time.Unix(in.First, 0).UTC().Format("2006-01") != "2000-01" || time.Unix(in.Last, 0).UTC().Format("2006-01") != "2010-03" || float64(in.Latest) != 28.8 {
		t.Fatalf("bounds %+v", in)
	}
	if in.Formula != `=ES.Get("MSFT")` {
		t.Fatalf("formula %q", in.Formula)
	}
	if in := a.Info("stocks:IBM"); in.Error != "" || in.ID != "IBM" {
		t.Fatalf("dataset:id %+v", in)
	}
	bad := a.Info("NOPE")
	if bad.Error != `No series "NOPE" in the local data.` {
		t.Fatalf("unknown %q", bad.Error)
	}
	if b, err := json.Marshal(bad); err != nil || !strings.Contains(string(b), `"latest":null`) {
		t.Fatalf("NaN in JSON: %s %v", b, err)
	}
}

func TestSeries(t *testing.T) {
	a := newTestApp(t)
	prices := testhome.StockPrices(t, "2006-01")["MSFT"]
	s := a.Series("MSFT", "", "", "", "")
	if s.Error != "" || len(s.Times) != len(prices) || len(s.Values) != len(s.Times) || s.Frequency != "M" || s.Unit != "USD" {
		t.Fatalf("series: %d points, %+v", len(s.Times), s.Error)
	}
	for i, tm := range s.Times {
		k := time.Unix(tm, 0).UTC().Format("2006-01")
		if prices[k] != s.Values[i] {
			t.Fatalf("%s: %v, csv %v", k, s.Values[i], prices[k])
		}
	}
	// A year of it.
	s = a.Series("MSFT", "2005", "2005", "", "")
	if len(s.Times) != 12 || s.Values[0] != prices["2005-01"] {
		t.Fatalf("2005: %+v", s)
	}
	// Annual averages, as ES.Get computes them.
	s = a.Series("MSFT", "2001", "2003", "A", "avg")
	if s.Error != "" || len(s.Times) != 3 || s.Frequency != "A" || s.Agg != "avg" {
		t.Fatalf("annual: %+v", s)
	}
	for i, y := range []int{2001, 2002, 2003} {
		sum := 0.0
		for m := 1; m <= 12; m++ {
			sum += prices[fmt.Sprintf("%d-%02d", y, m)]
		}
		if math.Abs(s.Values[i]-sum/12) > 1e-9 {
			t.Fatalf("%d avg %v, want %v", y, s.Values[i], sum/12)
		}
	}
	// Hourly data re-sampled to days.
	s = a.Series("SEA.temperature", "2010-01-01", "2010-01-31", "D", "max")
	if s.Error != "" || len(s.Times) != 31 {
		t.Fatalf("seattle daily max: %d %q", len(s.Times), s.Error)
	}
	// A range without data is a note, not an error.
	if s := a.Series("MSFT", "1990", "1991", "", ""); s.Error != "" || s.Note == "" || len(s.Times) != 0 {
		t.Fatalf("empty range %+v", s)
	}
	for _, tc := range []struct{ id, from, to, per, agg, want string }{
		{"NOPE", "", "", "", "", `No series "NOPE" in the local data.`},
		{"MSFT", "yesterday-ish", "", "", "", `From: cannot read date "yesterday-ish"`},
		{"MSFT", "2006", "2005", "", "", "the start 2006 is after the end 2005"},
		{"MSFT", "", "", "X", "", "option per=X: want D, W, M, Q or A"},
		{"MSFT", "", "", "M", "median", "option agg=median: want last, first, avg, sum, min or max"},
		{"", "", "", "", "", "Choose a series first."},
	} {
		s := a.Series(tc.id, tc.from, tc.to, tc.per, tc.agg)
		if !strings.Contains(strings.ToLower(s.Error), strings.ToLower(tc.want)) {
			t.Errorf("Series(%q,%q,%q,%q,%q) error %q, want %q", tc.id, tc.from, tc.to, tc.per, tc.agg, s.Error, tc.want)
		}
	}
}

func TestFormula(t *testing.T) {
	a := newTestApp(t)
	for _, tc := range []struct {
		from, to string
		o        app.GetOptions
		want     string
		rows     int
	}{
		{"", "", app.GetOptions{}, `=ES.Get("MSFT")`, 123},
		{"2005-01", "2008-12", app.GetOptions{Per: "Q", Agg: "avg"}, `=ES.Get("MSFT","2005-01","2008-12","per=Q","agg=avg")`, 16},
		{"", "2000-06", app.GetOptions{}, `=ES.Get("MSFT",,"2000-06")`, 6},
		{"2009", "", app.GetOptions{Per: "A", Agg: "last"}, `=ES.Get("MSFT","2009","per=A")`, 2},
		{"2009", "", app.GetOptions{Desc: true, Headers: true, Last: 3}, `=ES.Get("MSFT","2009","order=desc","headers=y","last=3")`, 4},
	} {
		f := a.Formula("MSFT", tc.from, tc.to, tc.o)
		if f.Error != "" || f.Text != tc.want || f.Rows != tc.rows || f.Cols != 2 {
			t.Errorf("Formula(%q,%q,%+v) = %+v, want %s with %d rows", tc.from, tc.to, tc.o, f, tc.want, tc.rows)
		}
	}
	// The chart's points and the formula's cells are the same numbers.
	s := a.Series("MSFT", "2005-01", "2008-12", "Q", "avg")
	if len(s.Values) != 16 {
		t.Fatalf("series %d", len(s.Values))
	}
	for _, bad := range []struct{ id, from string }{{"", ""}, {"A,B", ""}, {"MSFT", "garbage"}} {
		if f := a.Formula(bad.id, bad.from, "", app.GetOptions{}); f.Error == "" || f.Text != "" {
			t.Errorf("Formula(%q,%q) = %+v", bad.id, bad.from, f)
		}
	}
	if f := a.Formula("NOPE", "", "", app.GetOptions{}); f.Text == "" || !strings.Contains(f.Error, "not found") {
		t.Errorf("unknown id: %+v", f)
	}
}

func TestExport(t *testing.T) {
	a := newTestApp(t)
	out := filepath.Join(t.TempDir(), "stocks.xlsx")
	r := a.Export(app.ExportRequest{Series: []string{"MSFT", "IBM"}, From: "2005", To: "2006", Path: out})
	if r.Error != "" || r.Series != 2 || r.Rows != 24 || r.Cells != 48 || r.Path != out || r.Bytes <= 0 {
		t.Fatalf("export %+v", r)
	}
	ev := a.rt.named(app.EventExport)
	if len(ev) == 0 {
		t.Fatal("no progress events")
	}
	last := ev[len(ev)-1].Data[0].(app.ExportProgress)
	if last.Done != last.Total || last.Total == 0 {
		t.Fatalf("last progress %+v", last)
	}
	f, err := excelize.OpenFile(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sheets := f.GetSheetList()
	rows, err := f.GetRows(sheets[0])
	if err != nil || len(rows) != 25 || rows[0][1] != "MSFT" || rows[0][2] != "IBM" {
		t.Fatalf("sheet %s: %v rows %v", sheets[0], err, rows[:min(2, len(rows))])
	}
	want := testhome.StockPrices(t, "2006-01")["MSFT"]["2005-01"]
	if rows[1][1] != fmt.Sprint(want) {
		t.Fatalf("first MSFT value %q, want %v", rows[1][1], want)
	}

	// Live formulas.
	out2 := filepath.Join(t.TempDir(), "live.xlsx")
	if r := a.Export(app.ExportRequest{Series: []string{"MSFT"}, Per: "A", Agg: "avg", Formulas: true, Path: out2}); r.Error != "" || r.Rows != 11 {
		t.Fatalf("formulas %+v", r)
	}

	for _, tc := range []struct {
		req  app.ExportRequest
		want string
	}{
		{app.ExportRequest{Series: []string{"MSFT"}}, "Choose where to save"},
		{app.ExportRequest{Series: []string{"MSFT"}, Path: "rel.xlsx"}, "not a full path"},
		{app.ExportRequest{Path: out}, "No series given."},
		{app.ExportRequest{Series: []string{"NOPE"}, Path: out}, "NOPE"},
		{app.ExportRequest{Series: []string{"MSFT"}, Path: filepath.Join(t.TempDir(), "x.csv")}, "must end in .xlsx"},
	} {
		if r := a.Export(tc.req); !strings.Contains(r.Error, tc.want) {
			t.Errorf("Export(%+v) error %q, want %q", tc.req, r.Error, tc.want)
		}
	}
	// The file from before is intact after the failed exports.
	if _, err := excelize.OpenFile(out); err != nil {
		t.Fatal(err)
	}

	a.rt.savePath = filepath.Join(t.TempDir(), "chosen")
	if p := a.ChooseExportFile("/tmp/x.xlsx"); p.Path != a.rt.savePath+".xlsx" {
		t.Fatalf("chosen %+v", p)
	}
	if p := a.ExportSuggestion([]string{"SEA.temperature"}); !strings.HasSuffix(p.Path, "SEA.temperature.xlsx") {
		t.Fatalf("suggestion %+v", p)
	}
}

func TestExcelInfo(t *testing.T) {
	a := newTestApp(t)
	e := a.ExcelInfo()
	if !e.Running || e.Error != "" || e.Port == 0 || !strings.HasSuffix(e.ManifestURL, "/addin/manifest.xml") || len(e.Steps) < 3 {
		t.Fatalf("excel %+v", e)
	}
	b, err := os.ReadFile(e.ManifestPath)
	if err != nil || !strings.Contains(string(b), fmt.Sprintf("https://127.0.0.1:%d/", e.Port)) {
		t.Fatalf("manifest on disk: %v %.200s", err, b)
	}
	if !exists(e.CAPath) || len(e.CASHA256) != 95 || e.CATrusted {
		// The test machine does not trust a CA made a moment ago.
		t.Fatalf("CA %+v", e)
	}
	if !strings.Contains(e.TrustCommand, e.CAPath) {
		t.Fatalf("trust command %q", e.TrustCommand)
	}
}

func TestSettings(t *testing.T) {
	a := newTestApp(t)
	s := a.GetSettings()
	if s.Error != "" || s.File != a.settings || !s.HomeFixed || s.ActiveHome != a.home || s.DefaultPort != 17825 {
		t.Fatalf("settings %+v", s)
	}
	bad := s
	bad.Server = "not a url"
	if r := a.SaveSettings(bad); !strings.Contains(r.Error, "want a URL") || exists(a.settings) {
		t.Fatalf("bad server: %+v", r)
	}
	bad.Server = "http://127.0.0.1:1, http://127.0.0.1:1/"
	if r := a.SaveSettings(bad); !strings.Contains(r.Error, `Server 2 "http://127.0.0.1:1": the same server as entry 1`) || exists(a.settings) {
		t.Fatalf("a server twice: %+v", r)
	}
	// A server nobody listens on: saved, the sync runs and reports
	// offline in words, the local data keeps serving.
	s.Server, s.Token, s.Datasets = "http://127.0.0.1:1", "tok", []string{"stocks", " ", "stocks"}
	r := a.SaveSettings(s)
	if r.Error != "" || !strings.Contains(r.Message, "sync restarted") || !slices.Equal(r.Datasets, []string{"stocks"}) {
		t.Fatalf("save %+v", r)
	}
	saved, err := companion.LoadSettings(companion.FolderSettingsPath(a.home))
	if err != nil || saved.Server != "http://127.0.0.1:1" || saved.Token != "tok" {
		t.Fatalf("saved %+v %v", saved, err)
	}
	if user, err := companion.LoadSettings(a.settings); err != nil || user.Server != "" || user.Token != "" {
		t.Fatalf("the server went into the user's settings: %+v %v", user, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		sy := a.SyncProgress()
		if sy.Configured && sy.LastError != "" {
			if !strings.Contains(sy.LastError, "Cannot reach the server") {
				t.Fatalf("sync error words %q", sy.LastError)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sync error reported: %+v", sy)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st := a.Status(); st.Server != "http://127.0.0.1:1" || st.Online || len(st.Datasets) != 3 {
		t.Fatalf("status while offline %+v", st)
	}
	if p := a.Pause(); !p.Paused {
		t.Fatalf("pause %+v", p)
	}
	if p := a.Resume(); p.Paused {
		t.Fatalf("resume %+v", p)
	}
	sy := a.SetDatasets([]string{"iowa", "stocks"})
	if sy.Error != "" || !slices.Equal(sy.Subscribed, []string{"iowa", "stocks"}) {
		t.Fatalf("set datasets %+v", sy)
	}
	if saved, _ := companion.LoadSettings(companion.FolderSettingsPath(a.home)); !slices.Equal(saved.Datasets, []string{"iowa", "stocks"}) {
		t.Fatalf("datasets not saved: %+v", saved)
	}
	if sy := a.SetDatasets([]string{"../etc"}); !strings.Contains(sy.Error, "invalid dataset name") {
		t.Fatalf("bad dataset %+v", sy)
	}
	// Offline again.
	s = a.GetSettings()
	s.Server, s.Token = "", ""
	if r := a.SaveSettings(s); r.Error != "" || !strings.Contains(r.Message, "offline") {
		t.Fatalf("offline %+v", r)
	}
	if sy := a.SyncProgress(); sy.Configured {
		t.Fatalf("still configured %+v", sy)
	}
}

// TestSettingsFollowFolder: the server and token saved for one data folder
// stay with it: the same settings file opened with --home on another folder
// does not sync that folder; reopening the first one does. A settings file
// from before (server in the user's file) keeps syncing the folder it names,
// never a --home one.
func TestSettingsFollowFolder(t *testing.T) {
	homeA, homeB := t.TempDir(), t.TempDir()
	settings := filepath.Join(t.TempDir(), "settings.json")
	open := func(home string) views {
		a := viewsOf(app.New(app.Options{Home: home, SettingsFile: settings, Port: -1}))
		t.Cleanup(func() { a.App.Close(context.Background()) })
		return a
	}
	a := open(homeA)
	s := a.GetSettings()
	s.Server, s.Token = "http://127.0.0.1:1", "tok"
	if r := a.SaveSettings(s); r.Error != "" {
		t.Fatal(r.Error)
	}
	if !a.SyncProgress().Configured {
		t.Fatal("home A: sync not configured")
	}
	a.App.Close(context.Background())

	b := open(homeB)
	if s := b.GetSettings(); s.Server != "" || s.Token != "" {
		t.Fatalf("home B shows home A's server: %+v", s)
	}
	if sy := b.SyncProgress(); sy.Configured {
		t.Fatalf("home B syncs from home A's server: %+v", sy)
	}
	b.App.Close(context.Background())

	a = open(homeA)
	if s := a.GetSettings(); s.Server != "http://127.0.0.1:1" || s.Token != "tok" || !a.SyncProgress().Configured {
		t.Fatalf("home A lost its server: %+v", s)
	}
	a.App.Close(context.Background())

	// An old settings file: the server in the user's file, for home C.
	homeC := t.TempDir()
	old := filepath.Join(t.TempDir(), "old.json")
	if err := companion.SaveSettings(old, companion.Settings{Home: homeC, Server: "http://127.0.0.1:1", Token: "tok"}); err != nil {
		t.Fatal(err)
	}
	c := viewsOf(app.New(app.Options{SettingsFile: old, Port: -1}))
	t.Cleanup(func() { c.App.Close(context.Background()) })
	if s := c.GetSettings(); s.Server != "http://127.0.0.1:1" || s.ActiveHome != homeC {
		t.Fatalf("old settings, its own home: %+v", s)
	}
	c.App.Close(context.Background())
	d := viewsOf(app.New(app.Options{Home: homeB, SettingsFile: old, Port: -1}))
	t.Cleanup(func() { d.App.Close(context.Background()) })
	if s := d.GetSettings(); s.Server != "" || d.SyncProgress().Configured {
		t.Fatalf("old settings applied to a --home folder: %+v", s)
	}
}

// TestSettingsHome: without --home, the saved home is used; saving another
// one restarts the companion on it.
func TestSettingsHome(t *testing.T) {
	home1, home2 := t.TempDir(), t.TempDir()
	testhome.CookSamples(t, home1)
	settings := filepath.Join(t.TempDir(), "settings.json")
	if err := companion.SaveSettings(settings, companion.Settings{Home: home1}); err != nil {
		t.Fatal(err)
	}
	rt := &recRuntime{}
	a := viewsOf(app.New(app.Options{SettingsFile: settings, Port: -1, Runtime: rt}))
	defer a.App.Close(t.Context())
	if st := a.Status(); st.Home != home1 || len(st.Datasets) != 3 {
		t.Fatalf("status %+v", st)
	}
	s := a.GetSettings()
	s.Home = home2
	r := a.SaveSettings(s)
	if r.Error != "" || r.ActiveHome != home2 || !strings.Contains(r.Message, "restarted") {
		t.Fatalf("save %+v", r)
	}
	if st := a.Status(); st.Home != home2 || len(st.Datasets) != 0 || st.Error != "" {
		t.Fatalf("status after the move %+v", st)
	}
	// home1 is free again.
	st, err := localcache.Open(home1, nil)
	if err != nil {
		t.Fatalf("home1 still locked: %v", err)
	}
	st.Close()
}

// TestHomeInUse: a home another process holds shows why, in words, on
// every view; nothing panics.
func TestHomeInUse(t *testing.T) {
	home := t.TempDir()
	testhome.CookSamples(t, home)
	st, err := localcache.Open(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := openTestApp(t, home)
	want := "Another EnergyScope program"
	for what, msg := range map[string]string{
		"status": a.Status().Error, "hello": a.Hello().Error, "search": a.Search("MSFT").Error,
		"info": a.Info("MSFT").Error, "series": a.Series("MSFT", "", "", "", "").Error,
		"formula": a.Formula("MSFT", "", "", app.GetOptions{}).Error, "excel": a.ExcelInfo().Error,
		"sync": a.SyncProgress().Error, "export": a.Export(app.ExportRequest{Series: []string{"MSFT"}, Path: "/tmp/x.xlsx"}).Error,
	} {
		if !strings.HasPrefix(msg, want) {
			t.Errorf("%s: %q", what, msg)
		}
	}
}

func TestReady(t *testing.T) {
	home := t.TempDir()
	ready := filepath.Join(t.TempDir(), "ready")
	a := viewsOf(app.New(app.Options{Home: home, SettingsFile: filepath.Join(t.TempDir(), "s.json"), Port: -1, ReadyFile: ready, Started: time.Now().Add(-time.Second)}))
	defer a.App.Close(t.Context())
	if ms := a.Ready("status"); ms < 1000 {
		t.Fatalf("ready %d ms", ms)
	}
	b, err := os.ReadFile(ready)
	if err != nil || !strings.HasSuffix(string(b), " status\n") {
		t.Fatalf("ready file %q %v", b, err)
	}
	os.Remove(ready)
	a.Ready("explorer")
	if exists(ready) {
		t.Fatal("ready file written twice")
	}
}

func TestFloatsJSON(t *testing.T) {
	b, err := json.Marshal(struct {
		V app.Floats
		F app.Float
		N app.Floats
	}{app.Floats{1, math.NaN(), 2.5, math.Inf(1), -3e-7}, app.Float(math.NaN()), nil})
	if err != nil || string(b) != `{"V":[1,null,2.5,null,-3e-07],"F":null,"N":[]}` {
		t.Fatalf("%s %v", b, err)
	}
}

// TestSyncFromServer: an app with an empty home, pointed at a real server
// in Settings, downloads the datasets and shows them live.
func TestSyncFromServer(t *testing.T) {
	srv, srvURL := testserver.SampleServer(t)

	a := openTestApp(t, t.TempDir())
	if st := a.Status(); len(st.Datasets) != 0 || st.Error != "" {
		t.Fatalf("empty home %+v", st)
	}
	// A list whose first server is down: the app syncs from the second.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	s := a.GetSettings()
	s.Server = dead + ", " + srvURL
	if r := a.SaveSettings(s); r.Error != "" {
		t.Fatal(r.Error)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		sy := a.SyncProgress()
		live := 0
		for _, d := range sy.Datasets {
			if d.State == "live" && d.Local && d.Lag == 0 {
				live++
			}
		}
		if sy.Online && live == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not live after 60 s: %+v", sy)
		}
		time.Sleep(50 * time.Millisecond)
	}
	st := a.Status()
	if !st.Online || len(st.Datasets) != 3 || st.Datasets[2].State != "live" || st.Datasets[2].LastSyncMS == 0 {
		t.Fatalf("status %+v", st)
	}
	if sy := a.SyncProgress(); sy.Current != srvURL || sy.Failovers < 1 || st.Current != srvURL || st.Failovers < 1 {
		t.Fatalf("the server in use: sync %q (%d failovers), status %q (%d); want %s past %s", sy.Current, sy.Failovers, st.Current, st.Failovers, srvURL, dead)
	}
	if len(a.rt.named(app.EventSync)) == 0 {
		t.Fatal("no sync:progress events")
	}
	if r := a.Search("MSFT"); len(r.Hits) == 0 || r.Hits[0].ID != "MSFT" {
		t.Fatalf("search after sync %+v", r)
	}
	// A live update shows in the Explorer's data.
	when := time.Date(2010, 4, 1, 0, 0, 0, 0, time.UTC).Unix()
	if _, _, err := srv.Ingest("stocks", []format.Record{{Op: format.Upsert, SeriesID: "MSFT", Period: when, Value: 99.5}}); err != nil {
		t.Fatal(err)
	}
	for {
		s := a.Series("MSFT", "2010-04", "2010-04", "", "")
		if len(s.Values) == 1 && s.Values[0] == 99.5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("live update not seen: %+v", s)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(a.rt.named(app.EventStatus)) == 0 {
		t.Fatal("no status:changed event after the update")
	}
	// The Explorer follows the series: the event names it.
	found := false
	for _, e := range a.rt.named(app.EventSeries) {
		if ch, ok := e.Data[0].(app.SeriesChanged); ok && ch.Dataset == "stocks" && slices.Contains(ch.IDs, "MSFT") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no series:changed event for stocks:MSFT: %+v", a.rt.named(app.EventSeries))
	}
	// The lag is the store's: as soon as the store has the update, none.
	for _, d := range a.SyncProgress().Datasets {
		if d.Name == "stocks" && (d.Lag != 0 || d.Seq < d.HeadSeq) {
			t.Fatalf("stocks after the update: %+v", d)
		}
	}
}

// TestCompare: series of two units aligned on the union of their dates,
// the second unit on the right-hand axis; more than MaxCompare refused.
func TestCompare(t *testing.T) {
	a := newTestApp(t)
	c := a.Compare([]string{"MSFT", "iowa:Fossil Fuels", "MSFT"}, "2001", "2003", "", "")
	if c.Error != "" || len(c.Series) != 2 || strings.Join(c.Units, "|") != "USD|thousand MWh" {
		t.Fatalf("compare %+v", c)
	}
	if len(c.Times) != 36 || c.Series[0].Axis != 0 || c.Series[1].Axis != 1 || c.Series[1].Dataset != "iowa" {
		t.Fatalf("compare: %d dates, series %+v", len(c.Times), c.Series)
	}
	msft := a.Series("MSFT", "2001", "2003", "", "")
	n := 0
	for i, v := range c.Series[1].Values {
		if !math.IsNaN(v) {
			n++
		}
		if c.Series[0].Values[i] != msft.Values[i] {
			t.Fatalf("MSFT %d: %v vs %v", i, c.Series[0].Values[i], msft.Values[i])
		}
	}
	if n != 3 {
		t.Fatalf("annual series has %d points in 2001-2003", n)
	}
	many := []string{"MSFT", "IBM", "GOOG", "AAPL", "AMZN", "iowa:Renewables", "iowa:Fossil Fuels", "SEA.wind", "SEA.temperature"}
	if r := a.Compare(many, "", "", "", ""); !strings.Contains(r.Error, "at most 8") {
		t.Fatalf("9 series: %+v", r.Error)
	}
	if r := a.Compare([]string{"NOPE"}, "", "", "", ""); r.Error == "" {
		t.Fatal("unknown series compared")
	}
	// One formula for the comparison: the ids as one list.
	f := a.CompareFormula([]string{"MSFT", "iowa:Fossil Fuels"}, "2001", "2003", app.GetOptions{})
	if f.Error != "" || f.Text != `=ES.Get("MSFT,iowa:Fossil Fuels","2001","2003")` || f.Cols != 3 || f.Rows != 36 {
		t.Fatalf("compare formula %+v", f)
	}
	if f := a.CompareFormula([]string{"MSFT", "a,b"}, "", "", app.GetOptions{}); !strings.Contains(f.Error, "cannot be typed") {
		t.Fatalf("comma id: %+v", f)
	}
}

// TestInfoRef: an id in two datasets is named dataset:id in the formula of
// the one the bare id does not reach.
func TestInfoRef(t *testing.T) {
	home := t.TempDir()
	testhome.CookSamples(t, home)
	csv := filepath.Join(t.TempDir(), "more.csv")
	if err := os.WriteFile(csv, []byte("series_id,period,value\nMSFT,2020-01-01,1.5\nONLYHERE,2020-01-01,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testhome.CookFile(t, home, "zmore", csv, cook.InputOptions{})
	a := openTestApp(t, home)
	bare := a.Info("MSFT")
	other := a.Info("zmore:MSFT")
	if bare.Error != "" || other.Error != "" || bare.Dataset == other.Dataset {
		t.Fatalf("infos %+v %+v", bare, other)
	}
	byBare := bare
	if byBare.Dataset != "stocks" {
		byBare, other = other, bare
	}
	if byBare.Ref != "MSFT" || other.Ref != other.Dataset+":MSFT" || !strings.Contains(other.Formula, `"`+other.Dataset+`:MSFT"`) {
		t.Fatalf("refs %q %q, formula %q", byBare.Ref, other.Ref, other.Formula)
	}
	if r := a.Info("zmore:ONLYHERE"); r.Ref != "ONLYHERE" {
		t.Fatalf("unique id ref %q", r.Ref)
	}
}

// TestOpenFolder: the Export view's "Show in folder" opens the folder of
// the written file; a folder gone is said in words.
func TestOpenFolder(t *testing.T) {
	home := t.TempDir()
	testhome.CookSamples(t, home)
	var opened []string
	a := viewsOf(app.New(app.Options{Home: home, SettingsFile: filepath.Join(t.TempDir(), "s.json"), Port: -1,
		OpenPath: func(dir string) error { opened = append(opened, dir); return nil }}))
	defer a.App.Close(context.Background())
	dir := t.TempDir()
	file := filepath.Join(dir, "out.xlsx")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := a.OpenFolder(file); r.Error != "" || r.Path != dir || len(opened) != 1 || opened[0] != dir {
		t.Fatalf("open %+v, opened %q", r, opened)
	}
	if r := a.OpenFolder(filepath.Join(dir, "gone", "x.xlsx")); !strings.Contains(r.Error, "not there") || len(opened) != 1 {
		t.Fatalf("gone: %+v", r)
	}
}

// TestSyncLagAfterRestart: the Sync and Status views' lag is the store's.
// A restarted app whose store already holds every record the server has
// gets a catch-up with nothing in it, so the sync engine never learns
// the store's seq (it reports 0 until the next delta arrives) while the
// welcome told it the server's head: its own lag is the head's seq, the
// "lag of 5" the Sync view showed long after the store had caught up.
func TestSyncLagAfterRestart(t *testing.T) {
	srv, srvURL := testserver.SampleServer(t)
	home := t.TempDir()
	a := openTestApp(t, home)
	// A list whose first server is down: the app syncs from the second.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	s := a.GetSettings()
	s.Server = dead + ", " + srvURL
	if r := a.SaveSettings(s); r.Error != "" {
		t.Fatal(r.Error)
	}
	deadline := time.Now().Add(60 * time.Second)
	stocks := func(a *testApp) (app.SyncDataset, bool) {
		for _, d := range a.SyncProgress().Datasets {
			if d.Name == "stocks" {
				return d, true
			}
		}
		return app.SyncDataset{}, false
	}
	waitFor := func(a *testApp, what string, ok func(app.SyncDataset) bool) app.SyncDataset {
		t.Helper()
		for {
			if d, found := stocks(a); found && ok(d) {
				return d
			}
			if time.Now().After(deadline) {
				d, _ := stocks(a)
				t.Fatalf("%s: not after 60 s: %+v", what, d)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor(a, "first sync", func(d app.SyncDataset) bool { return d.State == "live" && d.Local })
	// Five updates, one delta each, so the server's head moves by five.
	var head uint64
	for i := range 5 {
		when := time.Date(2010, time.Month(4+i), 1, 0, 0, 0, 0, time.UTC).Unix()
		_, seq, err := srv.Ingest("stocks", []format.Record{{Op: format.Upsert, SeriesID: "MSFT", Period: when, Value: 90 + float64(i)}})
		if err != nil {
			t.Fatal(err)
		}
		head = seq
	}
	if head < 5 {
		t.Fatalf("server head %d after five ingests", head)
	}
	waitFor(a, "updates applied", func(d app.SyncDataset) bool { return d.Seq == head })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.App.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// The same folder again: its server comes with it; nothing new to fetch.
	b := openTestApp(t, home)
	d := waitFor(b, "live after restart", func(d app.SyncDataset) bool { return d.State == "live" && d.HeadSeq == head })
	if d.Seq != head || d.Lag != 0 {
		t.Fatalf("restarted on a current store: seq %d, server seq %d, lag %d (want seq %d, lag 0)", d.Seq, d.HeadSeq, d.Lag, head)
	}
	for _, ds := range b.Status().Datasets {
		if ds.Name == "stocks" && (ds.Seq != head || ds.Lag != 0 || ds.HeadSeq != head) {
			t.Fatalf("status after restart: %+v", ds)
		}
	}
}

// TestMostRecentPoints: a series longer than MaxPoints shows its most
// recent MaxPoints points, in the Explorer's series and in a comparison,
// with a note that says how many were left out.
func TestMostRecentPoints(t *testing.T) {
	home := t.TempDir()
	csv := filepath.Join(t.TempDir(), "long.csv")
	const n = app.MaxPoints + 100
	start := time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)
	b := []byte("series_id,period,value\n")
	for i := range n {
		b = fmt.Appendf(b, "LONG,%s,%d\n", start.Add(time.Duration(i)*time.Hour).Format("2006-01-02T15:04:05"), i)
	}
	if err := os.WriteFile(csv, b, 0o644); err != nil {
		t.Fatal(err)
	}
	testhome.CookFile(t, home, "long", csv, cook.InputOptions{Frequency: "H"})
	a := openTestApp(t, home)
	s := a.Series("LONG", "", "", "", "")
	first := start.Add(100 * time.Hour).Unix()
	if s.Error != "" || !s.Truncated || len(s.Times) != app.MaxPoints || len(s.Values) != app.MaxPoints ||
		s.Times[0] != first || s.Values[0] != 100 || s.Values[app.MaxPoints-1] != n-1 ||
		!strings.Contains(s.Note, fmt.Sprintf("most recent %d of %d points", app.MaxPoints, n)) {
		t.Fatalf("series: %d points from %d (%v), truncated %v, note %q, error %q", len(s.Times), s.Times[0], s.Values[0], s.Truncated, s.Note, s.Error)
	}
	c := a.Compare([]string{"LONG"}, "", "", "", "")
	if c.Error != "" || !c.Truncated || len(c.Times) != app.MaxPoints || c.Times[0] != first ||
		len(c.Series) != 1 || len(c.Series[0].Values) != app.MaxPoints || c.Series[0].Values[0] != 100 ||
		!strings.Contains(c.Note, fmt.Sprintf("most recent %d of %d dates", app.MaxPoints, n)) {
		t.Fatalf("compare: %d dates, truncated %v, note %q, error %q", len(c.Times), c.Truncated, c.Note, c.Error)
	}
	if s := a.Series("LONG", "2010-01-01", "", "", ""); s.Truncated || s.Note != "" || s.Error != "" || len(s.Times) == 0 {
		t.Fatalf("a range under MaxPoints: truncated %v, note %q, error %q", s.Truncated, s.Note, s.Error)
	}
}
