package format

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// A record is one live update of a dataset, as the write-ahead log of
// localcache/delta stores it and the sync protocol carries it: both write
// a batch of records with EncodeBatch, so the log and the wire share one
// encoding (FORMAT.md, "Write-ahead log", is its spec).
//
// Payload of a batch: uvarint record count, then per record: uvarint seq,
// byte op, zigzag varint period, 8 bytes value (IEEE 754 LE), uvarint id
// length + id, byte hasMeta, and if 1 four uvarint-length strings (name,
// unit, source, frequency).

// Op is what a record does to its point.
type Op uint8

const (
	// Upsert sets the value at (series, normalized period).
	Upsert Op = 1
	// Delete removes the point at (series, normalized period).
	Delete Op = 2
)

func (o Op) String() string {
	switch o {
	case Upsert:
		return "upsert"
	case Delete:
		return "delete"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// RecordMeta is series metadata carried by a record; a record with
// metadata may create a series that the snapshot does not have.
type RecordMeta struct {
	Name      string
	Unit      string
	Source    string
	Frequency Frequency
}

// Record is one update.
type Record struct {
	Seq      uint64
	Op       Op
	SeriesID string
	Period   int64       // unix seconds UTC; normalized to the series' bucket on apply
	Value    float64     // ignored for Delete
	Meta     *RecordMeta // optional
}

// ErrBadRecord wraps every validation failure of a batch.
var ErrBadRecord = errors.New("bad delta record")

// MaxRecordMetaLen bounds each metadata string of a record.
const MaxRecordMetaLen = 4096

// ValidateRecords checks a batch before anything is written: ops, ids
// (the rules of ValidSeriesID, shared with cook), finite values, periods
// within [MinRecordPeriod, MaxPeriod] (a record outside them would be
// logged and acknowledged and then make every compaction of the dataset
// fail), known frequencies, and strictly increasing seqs.
func ValidateRecords(batch []Record) error {
	var prev uint64
	for i := range batch {
		r := &batch[i]
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: record %d (seq %d, series %q): %s", ErrBadRecord, i, r.Seq, r.SeriesID, fmt.Sprintf(format, args...))
		}
		if r.Seq == 0 {
			return bad("seq 0 is reserved")
		}
		if i > 0 && r.Seq <= prev {
			return bad("seq %d does not follow %d: seqs must strictly increase", r.Seq, prev)
		}
		prev = r.Seq
		if r.Op != Upsert && r.Op != Delete {
			return bad("unknown op %d", r.Op)
		}
		if err := ValidSeriesID(r.SeriesID); err != nil {
			return bad("%v", err)
		}
		if r.Period < MinRecordPeriod || r.Period > MaxPeriod {
			return bad("period %d is outside the range a snapshot can hold", r.Period)
		}
		if r.Op == Upsert && (math.IsNaN(r.Value) || math.IsInf(r.Value, 0)) {
			return bad("value %v is not a finite number", r.Value)
		}
		if r.Meta != nil {
			if r.Meta.Frequency != "" {
				if _, err := ParseFrequency(string(r.Meta.Frequency)); err != nil {
					return bad("%v", err)
				}
			}
			if len(r.Meta.Name) > MaxRecordMetaLen || len(r.Meta.Unit) > MaxRecordMetaLen || len(r.Meta.Source) > MaxRecordMetaLen {
				return bad("metadata longer than %d bytes", MaxRecordMetaLen)
			}
		}
	}
	return nil
}

// MinEncodedRecord is the fewest bytes a record takes in a batch: seq,
// op, period, value, id length, hasMeta.
const MinEncodedRecord = 1 + 1 + 1 + 8 + 1 + 1

// EncodeBatch appends the encoding of batch to dst.
func EncodeBatch(dst []byte, batch []Record) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(batch)))
	for i := range batch {
		r := &batch[i]
		dst = binary.AppendUvarint(dst, r.Seq)
		dst = append(dst, byte(r.Op))
		dst = binary.AppendVarint(dst, r.Period)
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(r.Value))
		dst = appendString(dst, r.SeriesID)
		if r.Meta == nil {
			dst = append(dst, 0)
			continue
		}
		dst = append(dst, 1)
		dst = appendString(dst, r.Meta.Name)
		dst = appendString(dst, r.Meta.Unit)
		dst = appendString(dst, r.Meta.Source)
		dst = appendString(dst, string(r.Meta.Frequency))
	}
	return dst
}

// EncodedSize is the exact number of bytes EncodeBatch writes for r (the
// batch's record count not included): EncodeBatch of n records is
// BatchHeaderSize(n) plus the sum of their EncodedSize.
func EncodedSize(r *Record) int {
	n := uvarintLen(r.Seq) + 1 + varintLen(r.Period) + 8 + stringLen(r.SeriesID) + 1
	if r.Meta != nil {
		n += stringLen(r.Meta.Name) + stringLen(r.Meta.Unit) + stringLen(r.Meta.Source) + stringLen(string(r.Meta.Frequency))
	}
	return n
}

// BatchHeaderSize is the number of bytes EncodeBatch writes before the
// records of a batch of n (the uvarint count).
func BatchHeaderSize(n int) int { return uvarintLen(uint64(n)) }

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// varintLen is the length of binary.AppendVarint's zigzag encoding.
func varintLen(v int64) int {
	u := uint64(v) << 1
	if v < 0 {
		u = ^u
	}
	return uvarintLen(u)
}

func stringLen(s string) int { return uvarintLen(uint64(len(s))) + len(s) }

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

var errShortBatch = errors.New("truncated payload")

// DecodeBatch decodes bytes written by EncodeBatch (all of p: trailing
// bytes are an error). It never panics on arbitrary input. It does not
// validate the records (ValidateRecords does); the strings are copies.
func DecodeBatch(p []byte) ([]Record, error) {
	d := batchDecoder{b: p}
	n := d.uvarint()
	if d.err == nil && n > uint64(len(p)) { // every record takes more than a byte
		return nil, fmt.Errorf("record count %d exceeds payload", n)
	}
	out := make([]Record, 0, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		var r Record
		r.Seq = d.uvarint()
		r.Op = Op(d.byte())
		r.Period = d.varint()
		r.Value = math.Float64frombits(d.uint64())
		r.SeriesID = d.string()
		if d.byte() == 1 {
			r.Meta = &RecordMeta{Name: d.string(), Unit: d.string(), Source: d.string()}
			r.Meta.Frequency = Frequency(d.string())
		}
		out = append(out, r)
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%d trailing bytes", len(d.b))
	}
	return out, nil
}

type batchDecoder struct {
	b   []byte
	err error
}

func (d *batchDecoder) uvarint() uint64 { return decodeVarint(d, binary.Uvarint) }

func (d *batchDecoder) varint() int64 { return decodeVarint(d, binary.Varint) }

// decodeVarint reads one varint from d with read (binary.Uvarint or
// binary.Varint); 0 once d has failed.
func decodeVarint[T uint64 | int64](d *batchDecoder, read func([]byte) (T, int)) T {
	if d.err != nil {
		return 0
	}
	v, n := read(d.b)
	if n <= 0 {
		d.err = errShortBatch
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *batchDecoder) byte() byte {
	if d.err != nil || len(d.b) < 1 {
		d.err = errShortBatch
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *batchDecoder) uint64() uint64 {
	if d.err != nil || len(d.b) < 8 {
		d.err = errShortBatch
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *batchDecoder) string() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.err = errShortBatch
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
