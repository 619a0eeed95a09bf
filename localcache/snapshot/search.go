package snapshot

import (
	"bytes"
	"sort"
	"strings"
	"unicode/utf8"
)

// searchIndex is a lowercased copy of every id and name, built on the first
// Search (never at Open): "id\x00name\n" per series, with the start offset
// of each row. One bytes.Index pass over the blob finds every substring
// match; a match position maps back to its row by binary search.
type searchIndex struct {
	blob  []byte
	start []uint32 // start[row] = offset of row's id in blob; len = n+1
}

func (s *Snapshot) searcher() *searchIndex {
	if si := s.searchIx.Load(); si != nil {
		return si
	}
	x := s.index
	size := 0
	for r := uint32(0); r < uint32(x.N); r++ {
		size += len(x.ID(r)) + len(x.Name(r)) + 2
	}
	si := &searchIndex{blob: make([]byte, 0, size), start: make([]uint32, x.N+1)}
	for r := uint32(0); r < uint32(x.N); r++ {
		si.start[r] = uint32(len(si.blob))
		si.blob = appendLower(si.blob, x.ID(r))
		si.blob = append(si.blob, 0)
		si.blob = appendLower(si.blob, x.Name(r))
		si.blob = append(si.blob, '\n')
	}
	si.start[x.N] = uint32(len(si.blob))
	s.searchIx.CompareAndSwap(nil, si)
	return s.searchIx.Load()
}

// appendLower appends s folded the way Search folds the query
// (strings.ToLower), with a fast path for ASCII.
func appendLower(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return append(dst, strings.ToLower(s)...)
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// Match is one search hit.
type Match struct {
	Row   uint32
	ID    string // copy
	Name  string // copy
	Score int    // higher is better
}

// Ranking, best first.
const (
	scoreExactID    = 100
	scoreIDPrefix   = 80
	scoreNamePrefix = 60
	scoreIDPart     = 50 // the query starts a dot/underscore-separated part of the id
	scoreNameWord   = 40 // the query starts a word of the name
	scoreIDSub      = 30
	scoreNameSub    = 20
)

// Search finds series whose id or name contains query (case-insensitive),
// ranked: exact id, id prefix, name prefix, id part, name word, substring;
// ties by shorter id, then id order. A query of several words must match
// every word (each in the id or the name); the rank is that of the first.
func (s *Snapshot) Search(query string, limit int) []Match {
	words := strings.Fields(strings.ToLower(query))
	if len(words) == 0 || limit <= 0 || s.index.N == 0 {
		return nil
	}
	si := s.searcher()
	first := []byte(words[0])
	var hits []Match
	lastRow := -1
	for off := 0; off < len(si.blob); {
		i := bytes.Index(si.blob[off:], first)
		if i < 0 {
			break
		}
		pos := off + i
		row := sort.Search(len(si.start)-1, func(r int) bool { return si.start[r+1] > uint32(pos) })
		// Continue after this row: one hit per row, scored on the whole row.
		off = int(si.start[row+1])
		if row == lastRow {
			continue
		}
		lastRow = row
		rec := si.blob[si.start[row] : si.start[row+1]-1]
		sep := bytes.IndexByte(rec, 0)
		id, name := rec[:sep], rec[sep+1:]
		ok := true
		for _, w := range words[1:] {
			if !bytes.Contains(id, []byte(w)) && !bytes.Contains(name, []byte(w)) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		hits = append(hits, Match{Row: uint32(row), Score: score(id, name, first)})
	}
	sort.SliceStable(hits, func(a, b int) bool {
		if hits[a].Score != hits[b].Score {
			return hits[a].Score > hits[b].Score
		}
		// Shorter id first (the id alone: the name's length must not
		// decide, and Store.Search merges datasets by id length too).
		la, lb := len(s.index.ID(hits[a].Row)), len(s.index.ID(hits[b].Row))
		if la != lb {
			return la < lb
		}
		return hits[a].Row < hits[b].Row
	})
	if len(hits) > limit {
		hits = hits[:limit]
	}
	for i := range hits {
		hits[i].ID = strings.Clone(s.index.ID(hits[i].Row))
		hits[i].Name = strings.Clone(s.index.Name(hits[i].Row))
	}
	return hits
}

func score(id, name, q []byte) int {
	switch {
	case bytes.Equal(id, q):
		return scoreExactID
	case bytes.HasPrefix(id, q):
		return scoreIDPrefix
	case bytes.HasPrefix(name, q):
		return scoreNamePrefix
	case startsPart(id, q, "._-"):
		return scoreIDPart
	case startsPart(name, q, " ,-/(."):
		return scoreNameWord
	case bytes.Contains(id, q):
		return scoreIDSub
	}
	return scoreNameSub
}

func startsPart(s, q []byte, seps string) bool {
	for off := 0; ; {
		i := bytes.Index(s[off:], q)
		if i < 0 {
			return false
		}
		p := off + i
		if p == 0 || strings.IndexByte(seps, s[p-1]) >= 0 {
			return true
		}
		off = p + 1
	}
}
