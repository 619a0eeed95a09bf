package functions

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// What happens when an id is not found: an id that differs from a stored one only by
// case is that series when no other id folds to it; otherwise the error names the
// nearest ids. Both go through Source.Search, so they cost nothing on the path of an id
// that exists.

// maxSuggest is how many near ids a "did you mean" names.
const maxSuggest = 3

// SuggestPerCall is how many unknown ids of one call get near ids named: finding them
// takes a few searches that may scan every id, so a range of a thousand misspelt ids
// costs a bounded time. Every unknown id still resolves by case (one search).
const SuggestPerCall = 10

// EditDistance is the optimal-string-alignment distance between a and b, ignoring ASCII
// case: insertions, deletions, substitutions and swaps of two neighbours cost 1 each
// ("MSTF" is 1 from "MSFT"). It works on bytes; both strings are clipped to 64 bytes.
func EditDistance(a, b string) int {
	a, b = strings.ToLower(clipBytes(a)), strings.ToLower(clipBytes(b))
	if a == b {
		return 0
	}
	// Three rows of the dynamic programme: i-2, i-1, i.
	n := len(b)
	pp, p, c := make([]int, n+1), make([]int, n+1), make([]int, n+1)
	for j := range p {
		p[j] = j
	}
	for i := 1; i <= len(a); i++ {
		c[0] = i
		for j := 1; j <= n; j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			c[j] = min(p[j]+1, c[j-1]+1, p[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				c[j] = min(c[j], pp[j-2]+1)
			}
		}
		pp, p, c = p, c, pp
	}
	return p[n]
}

func clipBytes(s string) string {
	if len(s) > 64 {
		return s[:64]
	}
	return s
}

// Nearest returns up to n of candidates closest to word by EditDistance, closest first
// (ties in the candidates' order), among those close enough to be a typo: at most half
// of word's length away, and at least 1. Repeats are dropped.
func Nearest(word string, candidates []string, n int) []string {
	limit := max(1, len(word)/2)
	type near struct {
		s string
		d int
	}
	var out []near
	for _, c := range candidates {
		if d := EditDistance(word, c); d <= limit && !slices.ContainsFunc(out, func(x near) bool { return x.s == c }) {
			out = append(out, near{c, d})
		}
	}
	slices.SortStableFunc(out, func(a, b near) int { return a.d - b.d })
	names := make([]string, 0, min(n, len(out)))
	for i := 0; i < len(out) && i < n; i++ {
		names = append(names, out[i].s)
	}
	return names
}

// Resolve looks an id that src does not have up by search: ref is the reference of the
// one series whose id equals id ignoring case (with the dataset prefix kept if id had
// one), or "" if there is none or several; near lists up to three ids close to id (the
// case variants when several fold to it). Search errors count as no match.
func Resolve(src Source, id string) (ref string, near []string) { return resolve(src, id, true) }

// resolve is Resolve; without suggest it only looks for the id's case variants.
func resolve(src Source, id string, suggest bool) (ref string, near []string) {
	prefix, bare := "", id
	if i := strings.IndexByte(id, ':'); i > 0 {
		prefix, bare = id[:i+1], id[i+1:]
	}
	if strings.TrimSpace(bare) == "" || src == nil {
		return "", nil
	}
	var ids, folded []string
	seen := map[string]bool{}
	add := func(query string) {
		hits, err := src.Search(query, 50)
		if err != nil {
			return
		}
		for _, h := range hits {
			if prefix != "" && !strings.EqualFold(h.Dataset+":", prefix) {
				continue
			}
			key := h.Dataset + ":" + h.ID
			if seen[key] {
				continue
			}
			seen[key] = true
			ids = append(ids, h.ID)
			if strings.EqualFold(h.ID, bare) {
				folded = append(folded, h.ID)
			}
		}
	}
	add(bare)
	if len(folded) == 1 {
		return prefix + folded[0], nil
	}
	if len(folded) > 1 {
		return "", folded[:min(len(folded), maxSuggest)]
	}
	if !suggest {
		return "", nil
	}
	// A typo: ids that share the first one or two or the last two or three characters
	// (the store ranks ids that start with a query first).
	add(bare[:1])
	if len(bare) >= 3 {
		add(bare[:2])
		add(bare[len(bare)-2:])
	}
	if len(bare) >= 5 {
		add(bare[len(bare)-3:])
	}
	return "", Nearest(bare, ids, maxSuggest)
}

// DidYouMean is " did you mean A, B or C?" for the names given, or "".
func DidYouMean(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return "; did you mean " + names[0] + "?"
	}
	return "; did you mean " + strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1] + "?"
}

// seek calls get(id); if the Source does not have id, it retries with the series Resolve
// finds, and otherwise returns a not-found error that names the nearest ids and wraps
// ErrNotFound.
//
// budget counts down the unknown ids of the call that may still get near ids named
// (see SuggestPerCall).
func seek[T any](src Source, id string, budget *int, get func(ref string) (T, error)) (T, string, error) {
	v, err := get(id)
	if !errors.Is(err, ErrNotFound) {
		return v, id, err
	}
	ref, near := resolve(src, id, spend(budget))
	if ref != "" {
		if v2, err2 := get(ref); err2 == nil {
			return v2, ref, nil
		}
	}
	return v, id, &notFoundError{id: id, near: near}
}

// notFoundError is a series the Source does not have, with the ids near it.
type notFoundError struct {
	id   string
	near []string
}

func (e *notFoundError) Error() string {
	return fmt.Sprintf("series %q not found%s", clip(e.id), DidYouMean(e.near))
}
func (e *notFoundError) Unwrap() error { return ErrNotFound }

// spend takes one from the budget of suggestions, if any is left.
func spend(budget *int) bool {
	if *budget <= 0 {
		return false
	}
	*budget--
	return true
}
