package deltalog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"

	"github.com/energyscope/energyscope/localcache/format"
)

// A message of a dataset's stream is one batch:
//
//	payload: "ESDL" | version byte (1) | uint32 LE CRC-32C of body | body
//	body:    format.EncodeBatch(records) (the WAL's and the wire's codec)
//	headers: Nats-Msg-Id: the append's idempotency key
//	         Es-Seq: "<first>-<last>", the records' seqs (decimal)
//
// A skip message (Log.Advance) holds no record: an empty batch whose
// Es-Seq names the seqs it leaves unused, so the next message starts
// above them.
//
// The checksum is the WAL frame's (CRC-32C over the encoded batch): a
// message is checked end to end, whatever JetStream's own checks. Es-Seq
// lets a reader find a record seq's message without decoding bodies; it
// must agree with the body.
const (
	msgMagic   = "ESDL"
	msgVersion = 1
	msgHeader  = len(msgMagic) + 1 + 4

	hdrSeq = "Es-Seq"

	// MaxKeyLen bounds an idempotency key (a NATS header value).
	MaxKeyLen = 128

	streamPrefix  = "ES_DELTA_"
	subjectPrefix = "es.delta."
	metaDataset   = "es-dataset"
	metaAfter     = "es-after"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// token maps a dataset name onto the characters a stream name and a
// subject token allow, case-insensitively and injectively (doc.go).
func token(dataset string) string {
	var b strings.Builder
	for _, c := range []byte(strings.ToLower(dataset)) {
		switch c {
		case '_':
			b.WriteString("__")
		case '.':
			b.WriteString("_D")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// StreamName is the JetStream stream that holds dataset's log.
func StreamName(dataset string) string { return streamPrefix + token(dataset) }

// Subject is the subject dataset's batches are published on.
func Subject(dataset string) string { return subjectPrefix + token(dataset) }

func checkName(dataset string) error {
	if err := format.ValidDatasetName(dataset); err != nil {
		return fmt.Errorf("%w: %v", ErrBadName, err)
	}
	return nil
}

// CheckKey returns ErrBadKey (wrapped) for a key Append refuses: empty,
// over MaxKeyLen bytes, or a byte outside printable ASCII (a space
// included), so that an HTTP header cannot inject another header.
func CheckKey(key string) error { return checkKey(key) }

func checkKey(key string) error {
	if key == "" || len(key) > MaxKeyLen {
		return fmt.Errorf("%w: %d bytes (1 to %d)", ErrBadKey, len(key), MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return fmt.Errorf("%w: byte %#x at %d (printable ASCII without spaces only)", ErrBadKey, key[i], i)
		}
	}
	return nil
}

// encodeMessage appends batch's payload to dst.
func encodeMessage(dst []byte, batch []format.Record) []byte {
	start := len(dst)
	dst = append(dst, msgMagic...)
	dst = append(dst, msgVersion, 0, 0, 0, 0)
	dst = format.EncodeBatch(dst, batch)
	binary.LittleEndian.PutUint32(dst[start+len(msgMagic)+1:], crc32.Checksum(dst[start+msgHeader:], castagnoli))
	return dst
}

func seqHeader(first, last uint64) string {
	return strconv.FormatUint(first, 10) + "-" + strconv.FormatUint(last, 10)
}

// parseSeqHeader reads an Es-Seq value.
func parseSeqHeader(v string) (first, last uint64, err error) {
	a, b, ok := strings.Cut(v, "-")
	if ok {
		first, err = strconv.ParseUint(a, 10, 64)
		if err == nil {
			last, err = strconv.ParseUint(b, 10, 64)
		}
	}
	if !ok || err != nil || first == 0 || last < first {
		return 0, 0, fmt.Errorf("bad %s header %q", hdrSeq, v)
	}
	return first, last, nil
}

var errBadEnvelope = errors.New("not a delta log message")

// decodeMessage checks payload against its Es-Seq header and returns its
// records: the envelope and checksum, the record codec, the records'
// validity (format.ValidateRecords) and seqs first..last, contiguous. It
// never panics on arbitrary input.
func decodeMessage(seqHdr string, payload []byte) ([]format.Record, error) {
	first, last, err := parseSeqHeader(seqHdr)
	if err != nil {
		return nil, err
	}
	if len(payload) < msgHeader || string(payload[:len(msgMagic)]) != msgMagic {
		return nil, errBadEnvelope
	}
	if v := payload[len(msgMagic)]; v != msgVersion {
		return nil, fmt.Errorf("message version %d, this build reads %d", v, msgVersion)
	}
	body := payload[msgHeader:]
	if want, got := binary.LittleEndian.Uint32(payload[len(msgMagic)+1:]), crc32.Checksum(body, castagnoli); want != got {
		return nil, fmt.Errorf("checksum %08x, computed %08x", want, got)
	}
	recs, err := format.DecodeBatch(body)
	if err != nil {
		return nil, fmt.Errorf("records: %w", err)
	}
	if len(recs) == 0 {
		return nil, nil // a skip message
	}
	if uint64(len(recs)) != last-first+1 {
		return nil, fmt.Errorf("%d records, header says %d..%d", len(recs), first, last)
	}
	for i := range recs {
		if recs[i].Seq != first+uint64(i) {
			return nil, fmt.Errorf("record %d has seq %d, header says %d..%d", i, recs[i].Seq, first, last)
		}
	}
	if err := format.ValidateRecords(recs); err != nil {
		return nil, err
	}
	return recs, nil
}
