package main

// es vintages, es tag, es rollback and es get --asof: a server home's
// lake vintages from the command line (README "Vintages").

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/lake"
)

// openHomeLake opens home's lake for reading (also while es serve runs:
// the catalog is shared, commits are compare-and-swap).
func openHomeLake(home string, lf *lakeFlags) (*lake.Lake, error) {
	if !lf.set() && !hasLake(home) {
		return nil, fmt.Errorf("home %s has no lake (es serve keeps one in %s/%s; or give --catalog and --warehouse)", home, home, lake.Dir)
	}
	return lf.open(home, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func runVintages(e *env, args []string) error {
	var home, dataset string
	var asJSON bool
	var lf lakeFlags
	fs := newFlags(e, "vintages", &home)
	fs.StringVar(&dataset, "dataset", "", "the dataset (required)")
	fs.BoolVar(&asJSON, "json", false, "print a JSON array (snapshot, iceberg_snapshot, committed_at, covers_seq, rows, tags, rollback_of, ...)")
	lf.add(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if dataset == "" || len(pos) > 0 {
		return usagef("want --dataset NAME and no arguments")
	}
	l, err := openHomeLake(home, &lf)
	if err != nil {
		return err
	}
	defer l.Close()
	ctx := context.Background()
	vs, err := l.Vintages(ctx, dataset)
	if err != nil {
		return err
	}
	if vs == nil {
		vs = []lake.Vintage{}
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(vs)
	}
	cur, _ := l.Current(ctx, dataset)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\tSNAPSHOT\tICEBERG SNAPSHOT\tCOMMITTED\tEPOCH\tCOVERS SEQ\tROWS\tTAGS\tROLLBACK OF")
	for _, v := range vs {
		mark := ""
		if v.IcebergSnapshot == cur.IcebergSnapshot {
			mark = "*"
		}
		id := v.Snapshot
		if !v.Serving {
			id = "(" + orDefault(v.Operation, "commit") + " without a serving index)"
		}
		rollbackOf := ""
		if v.RollbackOf != 0 {
			// The restored vintage's es id when it is still listed,
			// else its Iceberg snapshot id (it may have been expired).
			rollbackOf = strconv.FormatInt(v.RollbackOf, 10)
			for _, o := range vs {
				if o.IcebergSnapshot == v.RollbackOf && o.Serving {
					rollbackOf = o.Snapshot + " (" + rollbackOf + ")"
				}
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\n", mark, id, v.IcebergSnapshot, v.CommittedAt.Format(time.RFC3339),
			v.Epoch, v.CoversSeq, v.Rows, strings.Join(v.Tags, ","), rollbackOf)
	}
	return tw.Flush()
}

// refuseWhileServing is the error of a command that changes the lake
// while es serve holds the home: it names the HTTP route to use instead.
func refuseWhileServing(home, route string, err error) error {
	return fmt.Errorf("home %s is in use by a running es serve: use %s on the server instead, or stop it first: %w", home, route, err)
}

func runTag(e *env, args []string) error {
	var home, dataset, vintage, name string
	var lf lakeFlags
	fs := newFlags(e, "tag", &home)
	fs.StringVar(&dataset, "dataset", "", "the dataset (required)")
	fs.StringVar(&vintage, "vintage", "", "the vintage: an es snapshot id, an RFC 3339 time, a date, a tag or an Iceberg snapshot id (required)")
	fs.StringVar(&name, "name", "", "the tag (required): a letter, then letters, digits, '_', '.', '-'")
	lf.add(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if dataset == "" || vintage == "" || name == "" || len(pos) > 0 {
		return usagef("want --dataset NAME --vintage V --name TAG")
	}
	// Hold the home's lock while tagging: a running server changes its
	// lake itself (POST /v1/datasets/NAME/tags).
	st, err := localcache.Open(home, &localcache.Options{CompactRows: -1, CompactBytes: -1})
	if errors.Is(err, localcache.ErrHomeLocked) {
		return refuseWhileServing(home, "POST /v1/datasets/"+dataset+`/tags {"vintage": V, "name": TAG}`, err)
	} else if err != nil {
		return err
	}
	defer st.Close()
	l, err := openHomeLake(home, &lf)
	if err != nil {
		return err
	}
	defer l.Close()
	ctx := context.Background()
	v, err := l.Resolve(ctx, dataset, vintage)
	if err != nil {
		return err
	}
	if err := l.Tag(ctx, dataset, v, name); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "tagged %s vintage %s (iceberg snapshot %d, committed %s) as %s: kept forever\n",
		dataset, v.Snapshot, v.IcebergSnapshot, v.CommittedAt.Format(time.RFC3339), name)
	return nil
}

func runRollback(e *env, args []string) error {
	var home, dataset, to string
	var lf lakeFlags
	fs := newFlags(e, "rollback", &home)
	fs.StringVar(&dataset, "dataset", "", "the dataset (required)")
	fs.StringVar(&to, "to", "", "the vintage to make current again: an es snapshot id, an RFC 3339 time, a date, a tag or an Iceberg snapshot id (required)")
	lf.add(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if dataset == "" || to == "" || len(pos) > 0 {
		return usagef("want --dataset NAME --to V")
	}
	l, err := openHomeLake(home, &lf)
	if err != nil {
		return err
	}
	defer l.Close()
	// The rollback is a server operation (a new epoch, published): run
	// the server's code on the home, which takes its lock.
	srv, err := server.New(server.Options{Home: home, Lake: l, CompactRows: -1, CompactBytes: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if errors.Is(err, localcache.ErrHomeLocked) {
		return refuseWhileServing(home, "POST /v1/datasets/"+dataset+"/rollback?to="+url.QueryEscape(to), err)
	} else if err != nil {
		return err
	}
	defer srv.Close()
	res, err := srv.Rollback(context.Background(), dataset, to)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "rolled back %s to vintage %s (committed %s): now serving %s, epoch %d, %d rows (one new lake commit; companions download the new epoch)\n",
		dataset, res.From.Snapshot, res.From.CommittedAt.Format(time.RFC3339), res.Manifest.SnapshotID, res.Manifest.Epoch, res.Manifest.Rows)
	if res.Dropped > 0 {
		fmt.Fprintf(e.stdout, "%d pending updates not yet in a snapshot were dropped, as a PUT drops them\n", res.Dropped)
	}
	return nil
}

// getAsOf is es get --asof WHEN: the series as the vintage WHEN names had
// it, read from home's lake (also while es serve runs).
func getAsOf(e *env, home string, lf *lakeFlags, ref, when string, from, to int64) error {
	l, err := openHomeLake(home, lf)
	if err != nil {
		return err
	}
	defer l.Close()
	a, err := server.NewAsOf(l, server.AsOfOptions{})
	if err != nil {
		return err
	}
	defer a.Close()
	dataset, id, err := asofDataset(home, l, ref)
	if err != nil {
		return err
	}
	ctx := context.Background()
	v, err := a.Resolve(ctx, dataset, when)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	err = a.View(ctx, dataset, v, id, from, to, func(res localcache.Result) error {
		pointsCSV(&out, res)
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "as of vintage %s of %s (committed %s)\n", v.Snapshot, dataset, v.CommittedAt.Format(time.RFC3339))
	_, err = e.stdout.Write(out.Bytes())
	return err
}

// asofDataset finds the dataset of ref ("id" or "dataset:id"): the one
// the home serves it from (its snapshots opened from l, the lake the
// flags name), or the one named.
func asofDataset(home string, l *lake.Lake, ref string) (dataset, id string, err error) {
	if i := strings.IndexByte(ref, ':'); i > 0 {
		return ref[:i], ref[i+1:], nil
	}
	st, err := openStoreIn(home, l)
	if err != nil {
		return "", "", err
	}
	defer st.Close()
	in, err := st.Info(ref)
	if err != nil {
		return "", "", fmt.Errorf("%w (for a series only older vintages have, give --dataset)", err)
	}
	return in.Dataset, in.ID, nil
}
