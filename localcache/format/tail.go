package format

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/energyscope/energyscope/localcache/format/internal/tailhook"
)

// TailBlockRows is the target number of rows of a row group of
// tail.parquet. Row groups are cut only at series boundaries, so a longer
// series gets a row group of its own. A row group is the unit of decoding:
// a cold read decodes the whole group once, then serves from a cache. See
// FORMAT.md for why 8Ki and not 64Ki.
const TailBlockRows = 1 << 13

// zstdSpare is the spare capacity, in values, after a decoded value
// column: ZSTD's fast loops need 16 bytes of room past the output.
const zstdSpare = 8

// Column positions in tail.parquet (the same columns as data.arrow).
const (
	tailSeries = DataSeries
	tailPeriod = DataPeriod
	tailValue  = DataValue
)

// ErrNoTailWriter: Write was asked for a cold tier by a binary that does
// not link the Parquet writer. Import
// github.com/energyscope/energyscope/localcache/format/tailwrite (for its
// side effect) in the binary; nothing was written.
var ErrNoTailWriter = errors.New("format: this binary cannot write tail.parquet (the cold tier): it does not import localcache/format/tailwrite")

// tailKV is the key-value metadata of tail.parquet's footer.
func tailKV() [][2]string {
	return [][2]string{{metaFileKey, "tail"}, {metaVersionKey, strconv.Itoa(fileVersion)}}
}

// tailGroups is c's rows (the cold tier) as row groups, one per entry of
// c.batches; the slices alias c.
func (c *cooked) tailGroups() []tailhook.Group {
	gs := make([]tailhook.Group, len(c.batches))
	for i, b := range c.batches {
		lo, hi := c.start[b.r0], c.start[b.r1]
		g := tailhook.Group{Series: c.series[lo:hi], Values: c.value[lo:hi]}
		if c.periodType == PeriodTimestamp {
			g.Secs = c.secs[lo:hi]
		} else {
			g.Days = c.days[lo:hi]
		}
		gs[i] = g
	}
	return gs
}

// writeTail writes c's rows (the cold tier) to w as Parquet, one row group
// per entry of c.batches, with the writer tailwrite registered.
func (c *cooked) writeTail(w io.Writer) error {
	write := tailhook.Write
	if write == nil {
		return ErrNoTailWriter
	}
	return write(w, c.periodType == PeriodTimestamp, tailKV(), c.tailGroups())
}

// unsafeCast reinterprets a slice of A as a slice of B of the same size.
func unsafeCast[A, B any](s []A) []B {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*B)(unsafe.Pointer(&s[0])), len(s))
}

func bufio1M(w io.Writer) *bufio.Writer { return bufio.NewWriterSize(w, 1<<20) }

func writeTailFile(s sink, c *cooked) (FileInfo, error) {
	return s.writeFile(TailFile, func(bw io.Writer) error {
		// noClose keeps the Parquet writer from closing the file before
		// the buffer is flushed and synced.
		return c.writeTail(noClose{bw})
	})
}

type noClose struct{ io.Writer }

// Tail is tail.parquet read over bytes the caller owns (a mapping). Opening
// parses the footer (proportional to the number of row groups); a block is
// decoded by Block into fresh Go memory that does not alias the bytes.
type Tail struct {
	b         []byte
	pt        PeriodType
	NumBlocks int
	blockRows []int64
	chunks    [][3]chunkRef // per row group: series, period, value
	TotalRows int64
}

// OpenTail parses tail.parquet's footer and checks its schema and file
// metadata against the format. maxRows bounds the rows the footer may
// claim (the manifest's row count): Block allocates per row, and the file
// is not hashed before a cold read.
func OpenTail(b []byte, pt PeriodType, maxRows int64) (*Tail, error) {
	f, err := parseTailFooter(b)
	if err != nil {
		return nil, corrupt(TailFile, -1, "%v", err)
	}
	if v, ok := f.kv[metaFileKey]; !ok || v != "tail" {
		return nil, corrupt(TailFile, -1, "not an energyscope tail file")
	}
	if v, ok := f.kv[metaVersionKey]; !ok || v != strconv.Itoa(fileVersion) {
		return nil, corrupt(TailFile, -1, "format version mismatch")
	}
	if err := f.checkSchema(pt); err != nil {
		return nil, corrupt(TailFile, -1, "%v", err)
	}
	t := &Tail{b: b, pt: pt, NumBlocks: len(f.rowGroups)}
	t.blockRows = make([]int64, t.NumBlocks)
	t.chunks = make([][3]chunkRef, t.NumBlocks)
	leaves := tailLeaves(pt) // [0] is the root; column col is leaves[col+1]
	for i, rg := range f.rowGroups {
		n := rg.numRows
		if err := checkRows(i, n); err != nil {
			return nil, corrupt(TailFile, -1, "%v", err)
		}
		t.blockRows[i] = n
		t.TotalRows += n
		if t.TotalRows > maxRows {
			return nil, corrupt(TailFile, -1, "more than %d rows", maxRows)
		}
		if len(rg.columns) != 3 {
			return nil, corrupt(TailFile, -1, "row group %d has %d columns, want 3", i, len(rg.columns))
		}
		for col, cc := range rg.columns {
			switch {
			case !cc.hasMeta || cc.externalFile:
				return nil, corrupt(TailFile, -1, "row group %d column %d: no metadata in the file", i, col)
			case cc.typ != leaves[col+1].typ:
				return nil, corrupt(TailFile, -1, "row group %d column %d: physical type %d, want %d", i, col, cc.typ, leaves[col+1].typ)
			case cc.hasDict:
				return nil, corrupt(TailFile, -1, "row group %d column %d has a dictionary page", i, col)
			}
			t.chunks[i][col] = chunkRef{off: cc.dataPage, size: cc.compressed, codec: cc.codec}
		}
	}
	return t, nil
}

// BlockRows is the number of rows of block i.
func (t *Tail) BlockRows(i int) int64 { return t.blockRows[i] }

// Block decodes the period and value columns of row group i. The result
// owns its memory (it does not alias the file's bytes) and has no Series.
func (t *Tail) Block(i int) (b *Batch, err error) {
	if i < 0 || i >= t.NumBlocks {
		return nil, corrupt(TailFile, -1, "block %d out of range (%d blocks)", i, t.NumBlocks)
	}
	defer func() {
		if p := recover(); p != nil {
			b, err = nil, corrupt(TailFile, -1, "row group %d: %v", i, p)
		}
	}()
	n := t.blockRows[i]
	period, value := t.chunks[i][tailPeriod], t.chunks[i][tailValue]
	// Spare capacity after the values lets ZSTD decode into them with its
	// fast loops (see decodeChunk).
	b = &Batch{Values: make([]float64, n, n+zstdSpare)[:n]}
	if t.pt == PeriodTimestamp {
		b.Secs = make([]int64, n)
		if err := decodeChunk(t.b, period, i, tailPeriod, b.Secs); err != nil {
			return nil, err
		}
		for k, ms := range b.Secs {
			b.Secs[k] = ms / 1000
		}
	} else {
		b.Days = make([]int32, n)
		if err := decodeChunk(t.b, period, i, tailPeriod, b.Days); err != nil {
			return nil, err
		}
	}
	if err := decodeChunk(t.b, value, i, tailValue, b.Values); err != nil {
		return nil, err
	}
	return b, nil
}

// BlockSeries decodes the series column of row group i (for Verify).
func (t *Tail) BlockSeries(i int) (s []uint32, err error) {
	if i < 0 || i >= t.NumBlocks {
		return nil, corrupt(TailFile, -1, "block %d out of range (%d blocks)", i, t.NumBlocks)
	}
	defer func() {
		if p := recover(); p != nil {
			s, err = nil, corrupt(TailFile, -1, "row group %d: %v", i, p)
		}
	}()
	out := make([]int32, t.blockRows[i])
	if err := decodeChunk(t.b, t.chunks[i][tailSeries], i, tailSeries, out); err != nil {
		return nil, err
	}
	return unsafeCast[int32, uint32](out), nil
}

// TailRule places series in the cold tier at cook time. It is applied by
// Write after normalization, when the last period of every series is
// known. Series without points stay hot unless a list names them.
type TailRule struct {
	text     string
	kind     string // "before", "list" or "fraction"
	before   int64  // unix seconds
	ids      map[string]struct{}
	fraction float64
}

// ParseTailRule parses the cook's --tail argument:
//
//	before=2020-01-01   series whose last period is before that date (or RFC 3339 time)
//	list=FILE           the series ids listed in FILE, one per line ('#' comments, blank lines ignored)
//	fraction=0.8        that fraction of the series with points whose last period is
//	                    oldest (ties by id), rounded down
func ParseTailRule(s string) (*TailRule, error) {
	kind, arg, ok := strings.Cut(s, "=")
	if !ok || arg == "" {
		return nil, fmt.Errorf("tail rule %q: want before=DATE, list=FILE or fraction=F", s)
	}
	r := &TailRule{text: s, kind: kind}
	switch kind {
	case "before":
		t, err := parseTailTime(arg)
		if err != nil {
			return nil, fmt.Errorf("tail rule %q: %v", s, err)
		}
		r.before = t
	case "list":
		b, err := os.ReadFile(arg)
		if err != nil {
			return nil, fmt.Errorf("tail rule %q: %w", s, err)
		}
		r.ids = map[string]struct{}{}
		for _, line := range bytes.Split(b, []byte("\n")) {
			line = bytes.TrimSpace(line)
			if len(line) == 0 || line[0] == '#' {
				continue
			}
			r.ids[string(line)] = struct{}{}
		}
	case "fraction":
		f, err := strconv.ParseFloat(arg, 64)
		if err != nil || !(f >= 0 && f <= 1) {
			return nil, fmt.Errorf("tail rule %q: fraction must be a number in [0, 1]", s)
		}
		r.fraction = f
	default:
		return nil, fmt.Errorf("tail rule %q: unknown rule %q (want before, list or fraction)", s, kind)
	}
	return r, nil
}

// TailList is the rule that places exactly the given series ids in the
// cold tier.
func TailList(ids ...string) *TailRule {
	r := &TailRule{text: "list", kind: "list", ids: make(map[string]struct{}, len(ids))}
	for _, id := range ids {
		r.ids[id] = struct{}{}
	}
	return r
}

func (r *TailRule) String() string { return r.text }

func parseTailTime(s string) (int64, error) {
	for _, layout := range []string{"2006-01-02", time.RFC3339, "2006-01-02T15:04:05", "2006-01-02 15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t.Unix(), nil
		}
	}
	return 0, fmt.Errorf("cannot parse %q as a date (YYYY-MM-DD) or an RFC 3339 time", s)
}

// tiers decides the tier of every rank: by the rule when one is given,
// else from the series table (compaction keeps the tiers of its base).
func (c *cooked) tiers(t *Table, ids []string, rule *TailRule) (tier []Tier, cold int) {
	ns := len(c.order)
	tier = make([]Tier, ns)
	length := func(r int) int64 { return c.start[r+1] - c.start[r] }
	kind := ""
	if rule != nil {
		kind = rule.kind
	}
	switch kind {
	case "":
		for r, si := range c.order {
			if t.Series[si].Tier == Cold {
				tier[r] = Cold
			}
		}
	case "list":
		for r, id := range ids {
			if _, ok := rule.ids[id]; ok {
				tier[r] = Cold
			}
		}
	case "fraction":
		var ranks []int
		for r := range ns {
			if length(r) > 0 {
				ranks = append(ranks, r)
			}
		}
		last := func(r int) int64 { return c.periodAt(c.start[r+1] - 1) }
		// Ranks are in id order, so a stable sort by last period breaks
		// ties by id.
		sort.SliceStable(ranks, func(a, b int) bool { return last(ranks[a]) < last(ranks[b]) })
		k := int(math.Floor(rule.fraction * float64(len(ranks))))
		for _, r := range ranks[:k] {
			tier[r] = Cold
		}
	case "before":
		for r := range ns {
			if length(r) > 0 && c.periodAt(c.start[r+1]-1) < rule.before {
				tier[r] = Cold
			}
		}
	}
	for _, x := range tier {
		if x == Cold {
			cold++
		}
	}
	return tier, cold
}

// split moves the rows of cold series out of c into a new cooked and
// compacts the hot rows in place. Both keep one start entry per rank (a
// series of the other tier has no rows there), so cutBatches and the index
// work on either unchanged.
func (c *cooked) split(tier []Tier) (cold *cooked) {
	ns := len(c.order)
	var coldRows int64
	for r := range ns {
		if tier[r] == Cold {
			coldRows += c.start[r+1] - c.start[r]
		}
	}
	cold = &cooked{order: c.order, freq: c.freq, periodType: c.periodType, start: make([]int64, ns+1)}
	cold.series = make([]uint32, 0, coldRows)
	cold.value = make([]float64, 0, coldRows)
	if c.periodType == PeriodTimestamp {
		cold.secs = make([]int64, 0, coldRows)
	} else {
		cold.days = make([]int32, 0, coldRows)
	}
	hotStart := make([]int64, ns+1)
	var w int64
	for r := range ns {
		lo, hi := c.start[r], c.start[r+1]
		hotStart[r] = w
		cold.start[r] = int64(len(cold.value))
		if tier[r] == Cold {
			cold.series = append(cold.series, c.series[lo:hi]...)
			cold.value = append(cold.value, c.value[lo:hi]...)
			if c.secs != nil {
				cold.secs = append(cold.secs, c.secs[lo:hi]...)
			} else {
				cold.days = append(cold.days, c.days[lo:hi]...)
			}
			continue
		}
		copy(c.series[w:], c.series[lo:hi])
		copy(c.value[w:], c.value[lo:hi])
		if c.secs != nil {
			copy(c.secs[w:], c.secs[lo:hi])
		} else {
			copy(c.days[w:], c.days[lo:hi])
		}
		w += hi - lo
	}
	hotStart[ns] = w
	cold.start[ns] = int64(len(cold.value))
	c.start = hotStart
	c.series, c.value = c.series[:w], c.value[:w]
	if c.secs != nil {
		c.secs = c.secs[:w]
	} else {
		c.days = c.days[:w]
	}
	return cold
}
