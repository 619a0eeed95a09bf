package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/energyscope/energyscope/functions"
	"github.com/energyscope/energyscope/internal/wiring"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/lake"
)

func openStore(home string) (*localcache.Store, error) { return openStoreIn(home, nil) }

// openStoreIn is openStore with the home's snapshots opened from lk (a
// lake opened with --catalog/--warehouse flags), or from the home's
// embedded lake if lk is nil.
func openStoreIn(home string, lk *lake.Lake) (*localcache.Store, error) {
	if _, err := os.Stat(home); err != nil {
		return nil, fmt.Errorf("home %s: %w", home, err)
	}
	if !serverHome(home) {
		return localcache.Open(home, withLake(home, &localcache.Options{ReadOnly: true}, lk, os.Stderr))
	}
	// A server home: its live rows are in its delta log, read into this
	// process's memory over the snapshots.
	st, err := localcache.Open(home, withLake(home, &localcache.Options{ReadOnly: true, DeltaInMemory: true, CompactRows: -1, CompactBytes: -1}, lk, os.Stderr))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := server.OverlayHomeLog(ctx, home, st); err != nil {
		fmt.Fprintf(os.Stderr, "warning: live rows of the server home not read: %v\n", err)
	}
	return st, nil
}

// parseBound reads a FROM/TO argument with ES.Get's date grammar
// (functions.ParseDate): the same text gives the same range in es get, es
// export, the app and Excel, and a TO that names a year, quarter, month or
// day covers all of it. "" and "-" leave the bound open.
func parseBound(e *env, s string, isEnd bool) (int64, error) {
	if strings.TrimSpace(s) == "-" {
		s = ""
	}
	return functions.ParseDate(s, e.clock(), isEnd)
}

// parseRange reads FROM and TO; a bad date is a usage error (exit 2), a
// reversed range a plain one (exit 1), worded as ES.Get words it.
// The names say which argument a message is about (FROM and TO, --from and --to).
func parseRange(e *env, fromArg, toArg, fromName, toName string) (from, to int64, err error) {
	if from, err = parseBound(e, fromArg, false); err != nil {
		return 0, 0, usagef("%s: %v", fromName, err)
	}
	if to, err = parseBound(e, toArg, true); err != nil {
		return 0, 0, usagef("%s: %v", toName, err)
	}
	if from > to {
		return 0, 0, fmt.Errorf("%w: start %s is after end %s", errReversed, strings.TrimSpace(fromArg), strings.TrimSpace(toArg))
	}
	return from, to, nil
}

// errReversed is a range whose start is after its end.
var errReversed = errors.New("reversed range")

// viewResolved is st.View, retrying an unknown id as the one id that
// differs only by case; otherwise the error names the nearest ids. fn
// reads the points under the store's fault guard (a data file truncated
// underneath fails the call instead of killing the process).
func viewResolved(st *localcache.Store, ref string, from, to int64, fn func(localcache.Result) error) error {
	err := st.View(ref, from, to, fn)
	if !errors.Is(err, localcache.ErrNotFound) {
		return err
	}
	r, near := functions.Resolve(wiring.Source{Store: st}, ref)
	if r != "" {
		if err2 := st.View(r, from, to, fn); !errors.Is(err2, localcache.ErrNotFound) {
			return err2
		}
	}
	return fmt.Errorf("%w%s", err, functions.DidYouMean(near))
}

func formatPeriod(unix int64, intraday bool) string {
	t := time.Unix(unix, 0).UTC()
	if intraday {
		return t.Format("2006-01-02T15:04:05Z")
	}
	return t.Format("2006-01-02")
}

func runGet(e *env, args []string) error {
	var home, dataset, asof string
	var lf lakeFlags
	fs := newFlags(e, "get", &home)
	fs.StringVar(&dataset, "dataset", "", "look the series up in this dataset only")
	fs.StringVar(&asof, "asof", "", "read the series as the lake vintage WHEN had it (an RFC 3339 time, a date, an es snapshot id or a tag; a server home)")
	lf.add(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	pos, optArgs := splitOptionArgs(pos)
	if len(pos) < 1 || len(pos) > 3 {
		return usagef("want SERIES [FROM [TO]] [key=value ...]")
	}
	pos = append(pos, "", "")
	from, to, err := parseRange(e, pos[1], pos[2], "FROM", "TO")
	if err != nil {
		return err
	}
	ref := pos[0]
	if dataset != "" {
		ref = dataset + ":" + ref
	}
	if asof != "" {
		if len(optArgs) > 0 || strings.Contains(pos[0], ",") {
			return usagef("--asof reads one series, without key=value options")
		}
		return getAsOf(e, home, &lf, ref, asof, from, to)
	}
	if lf.set() {
		return usagef("--catalog, --warehouse and --s3-endpoint go with --asof")
	}
	st, err := openStore(home)
	if err != nil {
		return err
	}
	defer st.Close()
	if len(optArgs) > 0 || strings.Contains(pos[0], ",") {
		return getFrame(e, st, pos[0], dataset, from, to, optArgs)
	}
	// The CSV is made under the guard, then written: a fault cannot stop
	// it half way.
	var out bytes.Buffer
	err = viewResolved(st, ref, from, to, func(res localcache.Result) error {
		pointsCSV(&out, res)
		return nil
	})
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(out.Bytes())
	return err
}

// pointsCSV writes res's points as es get prints them: a period,value
// header, then one line a point. It copies out of the mapping, so it runs
// inside the store's view (its fault guard).
func pointsCSV(out *bytes.Buffer, res localcache.Result) {
	out.WriteString("period,value\n")
	intraday := res.Frequency.Intraday()
	buf := make([]byte, 0, 64)
	for i := 0; i < res.Points.Len(); i++ {
		buf = append(buf[:0], formatPeriod(res.Points.Unix(i), intraday)...)
		buf = append(buf, ',')
		buf = strconv.AppendFloat(buf, res.Points.Values[i], 'g', -1, 64)
		buf = append(buf, '\n')
		out.Write(buf)
	}
}

// infoJSON is the JSON shape of es info.
type infoJSON struct {
	ID          string  `json:"id"`
	Dataset     string  `json:"dataset"`
	Name        string  `json:"name"`
	Unit        string  `json:"unit"`
	Source      string  `json:"source"`
	Frequency   string  `json:"frequency"`
	First       string  `json:"first"`
	Last        string  `json:"last"`
	Count       int     `json:"count"`
	LatestValue float64 `json:"latest_value"`
	Tier        string  `json:"tier"`
	Batch       uint32  `json:"batch"`
	Offset      uint32  `json:"offset"`
	SnapshotID  string  `json:"snapshot_id"`
	Epoch       uint64  `json:"epoch"`
	Seq         uint64  `json:"seq"`
	Updated     string  `json:"updated"`
}

func runInfo(e *env, args []string) error {
	var home string
	fs := newFlags(e, "info", &home)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one SERIES")
	}
	st, err := openStore(home)
	if err != nil {
		return err
	}
	defer st.Close()
	in, err := st.Info(pos[0])
	if err != nil {
		return err
	}
	intraday := in.Frequency.Intraday()
	tier := "hot"
	if in.Tier == format.Cold {
		tier = "cold"
	}
	out := infoJSON{ID: in.ID, Dataset: in.Dataset, Name: in.Name, Unit: in.Unit, Source: in.Source,
		Frequency: string(in.Frequency), Count: in.Count, LatestValue: in.LatestValue, Tier: tier,
		Batch: in.Batch, Offset: in.Offset, SnapshotID: in.SnapshotID, Epoch: in.Epoch, Seq: in.Seq,
		Updated: time.Unix(in.Updated, 0).UTC().Format(time.RFC3339)}
	if in.Count > 0 {
		out.First, out.Last = formatPeriod(in.First, intraday), formatPeriod(in.Last, intraday)
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func runSearch(e *env, args []string) error {
	var home string
	fs := newFlags(e, "search", &home)
	limit := fs.Int("limit", 20, "maximum results")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("want a QUERY")
	}
	st, err := openStore(home)
	if err != nil {
		return err
	}
	defer st.Close()
	q := strings.Join(pos, " ")
	hits, err := st.Search(q, *limit)
	if err != nil {
		return err
	}
	if len(hits) == 0 {
		return fmt.Errorf("%w %q", errNoMatch, q)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tDATASET")
	for _, h := range hits {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", h.ID, h.Name, h.Dataset)
	}
	return tw.Flush()
}

// errNoMatch is a search without a hit (exit 1, as ES.Search gives #N/A).
var errNoMatch = errors.New("no series match")

func runLs(e *env, args []string) error {
	var home string
	fs := newFlags(e, "ls", &home)
	if _, err := parse(fs, args); err != nil {
		return err
	}
	root := filepath.Join(home, localcache.DatasetsDir)
	ents, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(e.stdout, "no datasets in %s\n", home)
		return nil
	} else if err != nil {
		return err
	}
	if err := lsPending(e, home); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DATASET\tSNAPSHOT\tCURRENT\tROWS\tSERIES\tPERIOD\tSIZE\tCREATED")
	for _, d := range ents {
		if !d.IsDir() {
			continue
		}
		dsDir := filepath.Join(root, d.Name())
		cur, _ := format.ReadCurrent(dsDir)
		snaps, _ := os.ReadDir(filepath.Join(dsDir, format.SnapshotsDir))
		for _, s := range snaps {
			if strings.HasPrefix(s.Name(), format.TempPrefix) {
				continue
			}
			m, err := format.ReadManifest(filepath.Join(dsDir, format.SnapshotsDir, s.Name()))
			if err != nil {
				fmt.Fprintf(tw, "%s\t%s\t\t\t\t\t\tERROR: %v\n", d.Name(), s.Name(), err)
				continue
			}
			var size int64
			for _, f := range m.Files {
				size += f.Size
			}
			mark := ""
			if s.Name() == cur {
				mark = "*"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", d.Name(), m.SnapshotID, mark, m.Rows, m.Series, m.PeriodType, humanBytes(size), m.Created.Format(time.RFC3339))
		}
	}
	return tw.Flush()
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func runVerify(e *env, args []string) error {
	var home, dataset string
	fs := newFlags(e, "verify", &home)
	fs.StringVar(&dataset, "dataset", "", "verify only this dataset")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	root := filepath.Join(home, localcache.DatasetsDir)
	ents, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("no datasets: %w", err)
	}
	bad, checked := 0, 0
	for _, d := range ents {
		if !d.IsDir() || (dataset != "" && d.Name() != dataset) {
			continue
		}
		dsDir := filepath.Join(root, d.Name())
		cur, err := format.ReadCurrent(dsDir)
		if err != nil {
			fmt.Fprintf(e.stdout, "FAIL %s: CURRENT: %v\n", d.Name(), err)
			bad++
			if !verifyWAL(e, d.Name(), filepath.Join(dsDir, localcache.WALDir)) {
				bad++
			}
			continue
		}
		snaps, _ := os.ReadDir(filepath.Join(dsDir, format.SnapshotsDir))
		sawCurrent := false
		for _, s := range snaps {
			if strings.HasPrefix(s.Name(), format.TempPrefix) || !s.IsDir() {
				continue
			}
			checked++
			sawCurrent = sawCurrent || s.Name() == cur
			m, err := format.Verify(filepath.Join(dsDir, format.SnapshotsDir, s.Name()))
			if err != nil {
				fmt.Fprintf(e.stdout, "FAIL %s/%s: %v\n", d.Name(), s.Name(), err)
				bad++
				continue
			}
			fmt.Fprintf(e.stdout, "ok   %s/%s: %d rows, %d series\n", d.Name(), s.Name(), m.Rows, m.Series)
		}
		if !sawCurrent && hasLake(home) {
			// A server home's published snapshot lives in its lake only.
			checked++
			if m, err := verifyInLake(home, d.Name(), cur); err != nil {
				fmt.Fprintf(e.stdout, "FAIL %s/%s (lake): %v\n", d.Name(), cur, err)
				bad++
			} else {
				fmt.Fprintf(e.stdout, "ok   %s/%s (lake): %d rows, %d series\n", d.Name(), cur, m.Rows, m.Series)
			}
		} else if !sawCurrent {
			fmt.Fprintf(e.stdout, "FAIL %s: CURRENT names %s, which is missing\n", d.Name(), cur)
			bad++
		}
		if !verifyWAL(e, d.Name(), filepath.Join(dsDir, localcache.WALDir)) {
			bad++
		}
		checked++
	}
	if checked == 0 && bad == 0 {
		return errors.New("nothing to verify")
	}
	if bad > 0 {
		return fmt.Errorf("%d problem(s) found", bad)
	}
	return nil
}

// verifyWAL checks a dataset's write-ahead log (every frame's CRC, seqs
// increasing) and prints one line; it reports whether the log is sound. A
// torn tail is sound: the next open cuts it, and a running writer may be
// appending it right now.
func verifyWAL(e *env, dataset, dir string) bool {
	c, err := delta.VerifyWAL(dir)
	if err != nil {
		fmt.Fprintf(e.stdout, "FAIL %s/%s: %v\n", dataset, localcache.WALDir, err)
		return false
	}
	line := fmt.Sprintf("ok   %s/%s: %d records in %d frames, %d segments", dataset, localcache.WALDir, c.Records, c.Frames, c.Segments)
	if c.Records > 0 {
		line += fmt.Sprintf(", seq %d..%d", c.FirstSeq, c.LastSeq)
	}
	if c.TornTail > 0 {
		line += fmt.Sprintf("; a torn tail of %d bytes (an interrupted append, cut at the next open)", c.TornTail)
	}
	fmt.Fprintln(e.stdout, line)
	return true
}

// lsPending prints each dataset's applied seq and pending delta.
func lsPending(e *env, home string) error {
	st, err := openStore(home)
	if err != nil {
		return err
	}
	defer st.Close()
	ds, err := st.Status()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DATASET\tEPOCH\tSEQ\tSNAPSHOT SEQ\tPENDING RECORDS\tPENDING ROWS\tWAL\tHEALTH")
	for _, d := range ds {
		health := d.Health.String()
		if d.Err != nil {
			health += ": " + d.Err.Error()
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", d.Name, d.Manifest.Epoch, d.Seq, d.Manifest.CoversThroughSeq, d.DeltaRecords, d.DeltaRows, humanBytes(d.WALBytes), health)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout)
	return nil
}
