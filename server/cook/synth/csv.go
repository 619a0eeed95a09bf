package synth

import (
	"bufio"
	"bytes"
	"io"
)

const csvHeader = "series_id,period,value,unit,name,source,frequency\n"

// WriteCSV writes the dataset as CSV with header
// series_id,period,value,unit,name,source,frequency. Fields are quoted per
// RFC 4180 only when needed (names may contain commas).
func WriteCSV(w io.Writer, o Options) (Stats, error) {
	p, err := newPlan(o)
	if err != nil {
		return Stats{}, err
	}
	bw := bufio.NewWriterSize(w, 4<<20)
	var st Stats
	if _, err := bw.WriteString(csvHeader); err != nil {
		return st, err
	}
	s := p.newSeriesGen()
	const flushAt = 256 << 10
	buf := make([]byte, 0, flushAt+64<<10)
	var pre, suf []byte
	for pos := 0; pos < p.n; pos++ {
		s.load(int(p.perm[pos]))
		pre = appendCSVField(pre[:0], s.g.id)
		pre = append(pre, ',')
		suf = append(suf[:0], ',')
		suf = appendCSVField(suf, []byte(s.g.unit))
		suf = append(suf, ',')
		suf = appendCSVField(suf, s.g.name)
		suf = append(suf, ',')
		suf = appendCSVField(suf, []byte(s.g.source))
		suf = append(suf, ',')
		suf = append(suf, freqCode[s.f]...)
		suf = append(suf, '\n')
		for j := 0; j < s.length; j++ {
			c := s.cents()
			buf = append(buf, pre...)
			buf = s.cur.appendPeriod(buf)
			buf = append(buf, ',')
			buf = appendCents(buf, c)
			buf = append(buf, suf...)
			s.cur.next()
			if len(buf) >= flushAt {
				if _, err := bw.Write(buf); err != nil {
					return st, err
				}
				buf = buf[:0]
			}
		}
		st.Rows += int64(s.length)
		st.Series++
	}
	if _, err := bw.Write(buf); err != nil {
		return st, err
	}
	return st, bw.Flush()
}

// appendCSVField appends f, quoted the way encoding/csv would quote it.
func appendCSVField(b, f []byte) []byte {
	if !fieldNeedsQuotes(f) {
		return append(b, f...)
	}
	b = append(b, '"')
	for _, c := range f {
		if c == '"' {
			b = append(b, '"')
		}
		b = append(b, c)
	}
	return append(b, '"')
}

func fieldNeedsQuotes(f []byte) bool {
	if len(f) == 0 {
		return false
	}
	if string(f) == `\.` || bytes.ContainsAny(f, "\",\r\n") {
		return true
	}
	return f[0] == ' ' || f[0] == '\t'
}
