package main

import (
	"math/rand/v2"
	"strings"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// query is one "series X, dates A..B" request. Every engine (our store,
// the resident path, DuckDB table, DuckDB over Parquet) is asked the same
// queries, drawn by makeQueries from the same seed.
type query struct {
	ID       string
	Row      uint32 // index row in the snapshot the queries were drawn from
	From, To int64  // unix seconds UTC, inclusive
	Freq     format.Frequency
}

const year = 365 * 86400

// makeQueries draws n queries: a series uniformly at random among those
// with at least one point, and a random 1-year range inside its span (the
// whole span when it is shorter than a year). Same snapshot and seed, same
// queries.
func makeQueries(s *snapshot.Snapshot, n int, seed uint64) []query {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	ns := s.NumSeries()
	// Range ends on day boundaries for date snapshots (so that every engine
	// agrees on which days are in), on hour boundaries for intraday ones.
	align := int64(86400)
	if s.Manifest.PeriodType == format.PeriodTimestamp {
		align = 3600
	}
	out := make([]query, 0, n)
	for len(out) < n && ns > 0 {
		row := uint32(r.IntN(ns))
		in := s.Info(row)
		if in.Count == 0 {
			continue
		}
		from, to := in.First, in.Last
		if span := in.Last - in.First; span > year {
			from = in.First + r.Int64N(span-year+1)
			from -= floorMod(from, align)
			if from < in.First {
				from += align
			}
			to = from + year - 1
		}
		out = append(out, query{ID: strings.Clone(in.ID), Row: row, From: from, To: to, Freq: in.Frequency})
	}
	return out
}

func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// queriesFromSnapshot opens the snapshot, draws the queries and closes it
// again (unmapping: callers measure RSS after).
func queriesFromSnapshot(dir string, n int, seed uint64) ([]query, error) {
	s, err := snapshot.Open(dir)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return makeQueries(s, n, seed), nil
}

func utc(sec int64) time.Time { return time.Unix(sec, 0).UTC() }
