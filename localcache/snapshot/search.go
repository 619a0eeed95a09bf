package snapshot

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// searchIndex is a lowercased copy of every id and name, built on the first
// Search (never at Open), and orders that make a search cost about the
// number of hits it returns rather than the number of series.
//
// ids and names hold the folded ids and names, each followed by '\n' (a
// query word never holds one), in rank order: by id length, then row,
// which is how Search breaks ties of score. One bytes.Index pass finds
// every substring match, and a scan in rank order can stop at the first
// hit that could not make the list, since every later hit ranks lower.
//
// byID and byName order the rows by their folded id and name, so that the
// best-ranked hits (exact id, id prefix, name prefix) are a binary search
// away: a query whose prefix hits fill the list (most one-letter queries)
// never scans.
type searchIndex struct {
	ids, names     []byte
	idOff, nameOff []uint32 // record k of ids starts at idOff[k]; len n+1
	perm           []uint32 // perm[k] = row of record k
	rank           []uint32 // rank[row] = k
	byID, byName   []uint32 // rows by folded id, by folded name
}

func (si *searchIndex) id(r uint32) []byte {
	k := si.rank[r]
	return si.ids[si.idOff[k] : si.idOff[k+1]-1]
}

func (si *searchIndex) name(r uint32) []byte {
	k := si.rank[r]
	return si.names[si.nameOff[k] : si.nameOff[k+1]-1]
}

func (s *Snapshot) searcher() *searchIndex {
	if si := s.searchIx.Load(); si != nil {
		return si
	}
	s.isolateMeta()
	x := s.index
	n := uint32(x.N)
	// Rank order: a counting sort by id length (stable, so by row within).
	maxLen := 0
	idSize, nameSize := 0, 0
	for r := uint32(0); r < n; r++ {
		maxLen = max(maxLen, len(x.ID(r)))
		idSize += len(x.ID(r)) + 1
		nameSize += len(x.Name(r)) + 1
	}
	count := make([]uint32, maxLen+2)
	for r := uint32(0); r < n; r++ {
		count[len(x.ID(r))+1]++
	}
	for l := 1; l < len(count); l++ {
		count[l] += count[l-1]
	}
	si := &searchIndex{
		ids:     make([]byte, 0, idSize),
		names:   make([]byte, 0, nameSize),
		idOff:   make([]uint32, n+1),
		nameOff: make([]uint32, n+1),
		perm:    make([]uint32, n),
		rank:    make([]uint32, n),
	}
	for r := uint32(0); r < n; r++ {
		l := len(x.ID(r))
		si.perm[count[l]] = r
		si.rank[r] = count[l]
		count[l]++
	}
	for k, r := range si.perm {
		si.idOff[k] = uint32(len(si.ids))
		si.ids = append(appendLower(si.ids, x.ID(r)), '\n')
		si.nameOff[k] = uint32(len(si.names))
		si.names = append(appendLower(si.names, x.Name(r)), '\n')
	}
	si.idOff[n], si.nameOff[n] = uint32(len(si.ids)), uint32(len(si.names))
	si.byID = si.order(si.id)
	si.byName = si.order(si.name)
	s.searchIx.CompareAndSwap(nil, si)
	return s.searchIx.Load()
}

// order returns the rows sorted by key (ties by row). The sort compares
// the keys' first 16 bytes as integers and only ties in full: most ids
// share a prefix, and the index is built while a user waits.
func (si *searchIndex) order(key func(uint32) []byte) []uint32 {
	type item struct {
		hi, lo uint64 // the key's first 16 bytes, big-endian, 0-padded
		row    uint32
	}
	items := make([]item, len(si.rank))
	var b [16]byte
	for i := range items {
		n := copy(b[:], key(uint32(i)))
		clear(b[n:])
		items[i] = item{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:]), uint32(i)}
	}
	slices.SortFunc(items, func(a, b item) int {
		switch {
		case a.hi != b.hi:
			return cmp.Compare(a.hi, b.hi)
		case a.lo != b.lo:
			return cmp.Compare(a.lo, b.lo)
		}
		// Keys shorter than 16 bytes are 0-padded: equal prefixes can
		// still differ in length, which bytes.Compare sees.
		if c := bytes.Compare(key(a.row), key(b.row)); c != 0 {
			return c
		}
		return cmp.Compare(a.row, b.row)
	})
	rows := make([]uint32, len(items))
	for i, it := range items {
		rows[i] = it.row
	}
	return rows
}

// prefixed returns the rows of order (sorted by key) whose key starts
// with q.
func prefixed(order []uint32, key func(uint32) []byte, q []byte) []uint32 {
	lo := sort.Search(len(order), func(i int) bool { return bytes.Compare(key(order[i]), q) >= 0 })
	hi := lo + sort.Search(len(order)-lo, func(i int) bool { return !bytes.HasPrefix(key(order[lo+i]), q) })
	return order[lo:hi]
}

// recordAt returns the record of off (record offsets, len n+1) that holds
// byte pos, searching forward from record k (off[k] <= pos).
func recordAt(off []uint32, pos uint32, k int) int {
	// Hits of a frequent word are in the next few records: step, then
	// gallop, then binary search.
	for range 4 {
		if off[k+1] > pos {
			return k
		}
		k++
	}
	step := 8
	for k+step < len(off)-1 && off[k+step] <= pos {
		k += step
		step *= 2
	}
	hi := min(k+step, len(off)-1)
	return k + sort.Search(hi-k, func(i int) bool { return off[k+i+1] > pos })
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
//
// The best limit hits are kept in a bounded heap. Those ranked by a prefix
// come from binary searches of the sorted ids and names; the others from a
// scan, in rank order, of the ids and then the names for the query's
// longest word, which stops as soon as no later hit could make the list.
func (s *Snapshot) Search(query string, limit int) []Match {
	words := strings.Fields(strings.ToLower(query))
	if len(words) == 0 || limit <= 0 || s.index.N == 0 {
		return nil
	}
	si := s.searcher()
	bw := make([][]byte, len(words))
	for i, w := range words {
		bw[i] = []byte(w)
	}
	first := bw[0]
	t := topK{si: si, limit: limit, h: make([]Match, 0, min(limit, 1024))}
	hasAll := func(r uint32) bool {
		id, name := si.id(r), si.name(r)
		for _, w := range bw {
			if !bytes.Contains(id, w) && !bytes.Contains(name, w) {
				return false
			}
		}
		return true
	}

	// Ids that start with the first word; exact ones among them.
	for _, r := range prefixed(si.byID, si.id, first) {
		sc := scoreIDPrefix
		if len(si.id(r)) == len(first) {
			sc = scoreExactID
		}
		if t.wants(sc, r) && hasAll(r) {
			t.push(sc, r)
		}
	}
	// Names that start with it (whose id does not).
	for _, r := range prefixed(si.byName, si.name, first) {
		if t.wants(scoreNamePrefix, r) && !bytes.HasPrefix(si.id(r), first) && hasAll(r) {
			t.push(scoreNamePrefix, r)
		}
	}

	// Every other hit contains the first word, which bounds the scores
	// best; a first word of one or two letters gives way to a longer one,
	// which has fewer hits.
	drive, driveFirst := first, true
	for _, w := range bw[1:] {
		if len(drive) < 3 && len(w) > len(drive) {
			drive, driveFirst = w, false
		}
	}
	// scan visits the records of blob that hold drive, in rank order, and
	// stops at the first that could not make the list scoring best.
	scan := func(blob []byte, off []uint32, best int, skip func(r uint32) bool) {
		if !t.wants(best, si.perm[0]) {
			return // not even the best-ranked record could
		}
		k := 0
		for pos := 0; pos < len(blob); {
			i := bytes.Index(blob[pos:], drive)
			if i < 0 {
				return
			}
			k = recordAt(off, uint32(pos+i), k)
			pos = int(off[k+1]) // one hit per record
			r := si.perm[k]
			if !t.wants(best, r) {
				return
			}
			if skip(r) || !hasAll(r) {
				continue
			}
			id, name := si.id(r), si.name(r)
			if bytes.HasPrefix(id, first) || bytes.HasPrefix(name, first) {
				continue // ranked above
			}
			if sc := score(id, name, first); t.wants(sc, r) {
				t.push(sc, r)
			}
		}
	}
	// Hits in the id score an id part at best (prefixes are done) ...
	scan(si.ids, si.idOff, scoreIDPart, func(uint32) bool { return false })
	// ... and the rest, whose id lacks drive, a name word if drive is
	// the first word.
	best := scoreIDPart
	if driveFirst {
		best = scoreNameWord
	}
	scan(si.names, si.nameOff, best, func(r uint32) bool { return bytes.Contains(si.id(r), drive) })

	hits := t.h
	slices.SortFunc(hits, func(a, b Match) int {
		switch {
		case a.Row == b.Row:
			return 0
		case t.less(a, b):
			return -1
		}
		return 1
	})
	for i := range hits {
		hits[i].ID = strings.Clone(s.index.ID(hits[i].Row))
		hits[i].Name = strings.Clone(s.index.Name(hits[i].Row))
	}
	return hits
}

// topK keeps the best limit matches in a heap whose root is the worst of
// them, so that a query matching most series costs no sort and no slice
// of every hit.
type topK struct {
	si    *searchIndex
	limit int
	h     []Match
}

// less reports whether a ranks before b: higher score, then rank (shorter
// id, then row; the id alone: the name's length must not decide, and
// Store.Search merges datasets by id length too).
func (t *topK) less(a, b Match) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return t.si.rank[a.Row] < t.si.rank[b.Row]
}

// wants reports whether a hit of row r scoring sc would enter the list.
func (t *topK) wants(sc int, r uint32) bool {
	return len(t.h) < t.limit || t.less(Match{Row: r, Score: sc}, t.h[0])
}

// push adds a hit that wants admitted.
func (t *topK) push(sc int, r uint32) {
	m := Match{Row: r, Score: sc}
	h := t.h
	if len(h) < t.limit {
		h = append(h, m)
		for i := len(h) - 1; i > 0; {
			p := (i - 1) / 2
			if !t.less(h[p], h[i]) {
				break
			}
			h[p], h[i] = h[i], h[p]
			i = p
		}
		t.h = h
		return
	}
	h[0] = m
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		w := l
		if r := l + 1; r < len(h) && t.less(h[l], h[r]) {
			w = r
		}
		if !t.less(h[i], h[w]) {
			return
		}
		h[i], h[w] = h[w], h[i]
		i = w
	}
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
