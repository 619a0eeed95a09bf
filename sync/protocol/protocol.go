// Package protocol is the wire format between the central server and the
// companions: JSON control messages in websocket text frames, and two kinds
// of binary frames (snapshot file chunks and delta batches). It is shared
// by sync/client and server/hub and documented in PROTOCOL.md beside it.
//
// Version 2 seals every control message and every delta frame with a
// CRC-32C that the receiver verifies before it acts on anything, and
// carries a checksum of the history chain in each subscription so that a
// server restored from a backup, which accepted other records under the
// seqs a companion already applied, is detected (see Chain).
//
// It imports localcache/format only: the record type and its batch codec
// are format's (record.go), so the write-ahead log of localcache/delta and
// the wire share one encoding of a record.
package protocol

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/crc64"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
)

// Protocol versions this build speaks. Version 1 (no checksums) is
// refused with a message naming both ranges. Version 3 adds the vintage
// messages (TVintage, TRevisions); a client sends them only when
// welcome.version >= VersionVintages.
const (
	VersionMin = 2
	VersionMax = 3
	// VersionVintages is the first version with vintage and revisions.
	VersionVintages = 3
)

// Limits both ends enforce.
const (
	// MaxChunk is the largest payload of a chunk frame.
	MaxChunk = 1 << 20
	// MaxDeltaBytes bounds the encoded records of one delta frame; the
	// server splits larger batches.
	MaxDeltaBytes = 1 << 20
	// MaxControl bounds a JSON control message.
	MaxControl = 1 << 20
	// MaxFrame is the read limit of a connection.
	MaxFrame = MaxChunk + 4096
	// MaxSubs bounds the entries of one hello or subscribe message; a
	// client with more datasets sends several subscribes. A message with
	// more is refused (ErrTooManySubs).
	MaxSubs = 1024
)

// Message types (the "type" field of a control message).
const (
	THello        = "hello"
	TSubscribe    = "subscribe"
	TFetch        = "fetch"
	TAck          = "ack"
	TPing         = "ping"
	TWelcome      = "welcome"
	TSnapshot     = "snapshot"
	TCatchupBegin = "catchup_begin"
	TCatchupEnd   = "catchup_end"
	THeartbeat    = "heartbeat"
	TReset        = "reset"
	TError        = "error"
	TFileEnd      = "file_end"
	// Version 3: as-of reads (a vintage's manifest, then fetch with its
	// snapshot id) and the revisions of one period.
	TVintage   = "vintage"
	TRevisions = "revisions"
)

// MaxAsOf bounds a vintage request's asof (an RFC 3339 time, a date, an
// es snapshot id or a tag name) and a revisions request's series and
// period.
const MaxAsOf = 256

// VintageInfo is one vintage of a dataset (a lake commit); it mirrors
// server/lake.Vintage's JSON names.
type VintageInfo struct {
	Snapshot        string    `json:"snapshot"` // es snapshot id
	IcebergSnapshot int64     `json:"iceberg_snapshot"`
	CommittedAt     time.Time `json:"committed_at"`
	CoversSeq       uint64    `json:"covers_seq"`
	Rows            int64     `json:"rows"`
	Tags            []string  `json:"tags,omitempty"`
}

// Revision is the value one period had in one vintage.
type Revision struct {
	Vintage VintageInfo `json:"vintage"`
	Value   float64     `json:"value"`
	// Present is false when the period had no value in that vintage.
	Present bool `json:"present"`
}

// Sub is what a client holds of one dataset when it subscribes.
type Sub struct {
	Dataset  string `json:"dataset"`
	Epoch    uint64 `json:"epoch"`
	Snapshot string `json:"snapshot,omitempty"` // "" when the client has none
	Seq      uint64 `json:"seq"`
	// Base is the covers_through_seq of Snapshot, and Chain the Chain of
	// the records (Base, Seq] the client applied on top of it ("" when it
	// holds none). The server compares it with its own history.
	Base  uint64 `json:"base,omitempty"`
	Chain string `json:"chain,omitempty"`
}

// Head is the server's state of one dataset.
type Head struct {
	Dataset  string `json:"dataset"`
	Epoch    uint64 `json:"epoch"`
	Snapshot string `json:"snapshot"`
	Seq      uint64 `json:"seq"`
	// Bytes is the size of the snapshot's files, for progress.
	Bytes int64 `json:"bytes"`
}

// Message is every control message; Type says which fields are set.
type Message struct {
	Type string `json:"type"`

	// hello
	Proto  []int  `json:"proto,omitempty"` // [min, max]
	Client string `json:"client,omitempty"`
	// hello, subscribe
	Subs []Sub `json:"subs,omitempty"`

	// welcome, heartbeat
	Version int    `json:"version,omitempty"`
	Heads   []Head `json:"heads,omitempty"`

	// snapshot, catchup_begin/end, ack, fetch, file_end, reset
	Dataset  string           `json:"dataset,omitempty"`
	Manifest *format.Manifest `json:"manifest,omitempty"`
	// catchup_begin: (From, To]; catchup_end, ack: Seq
	From uint64 `json:"from,omitempty"`
	To   uint64 `json:"to,omitempty"`
	Seq  uint64 `json:"seq,omitempty"`

	// fetch, file_end
	Snapshot string `json:"snapshot,omitempty"`
	File     string `json:"file,omitempty"`
	SHA256   string `json:"sha256,omitempty"`
	Offset   int64  `json:"offset,omitempty"`

	// reset: why, a ResetCode; error: what, an error Code (absent: other)
	Code Code `json:"code,omitempty"`
	// reset, error
	Reason       string `json:"reason,omitempty"`
	RetryAfterMs int64  `json:"retry_after_ms,omitempty"`

	// Version 3. vintage, revisions, error: the request id the client
	// chose, echoed in the answer (an error answering a request carries
	// it too).
	Req uint64 `json:"req,omitempty"`
	// vintage: the WHEN asked for (echoed in the answer)
	AsOf string `json:"asof,omitempty"`
	// vintage answer: the resolved vintage (its manifest in Manifest)
	Vintage *VintageInfo `json:"vintage,omitempty"`
	// revisions: the series and period asked for, and (answer) every
	// value the period had across retained vintages, oldest first
	Series    string     `json:"series,omitempty"`
	Period    string     `json:"period,omitempty"`
	Revisions []Revision `json:"revisions,omitempty"`
}

// ErrMalformed wraps every decoding failure.
var ErrMalformed = errors.New("malformed message")

// ErrUnknownType: a control message of a type this version does not know
// (wrapped together with ErrMalformed; the error names the type).
var ErrUnknownType = errors.New("unknown type")

// ErrUnknownFrame: a binary frame of a kind this version does not know
// (wrapped together with ErrMalformed).
var ErrUnknownFrame = errors.New("unknown binary frame kind")

// ErrTooManySubs: a hello or subscribe with more than MaxSubs entries
// (wrapped together with ErrMalformed).
var ErrTooManySubs = errors.New("too many subscriptions in one message")

// ErrChecksum: a frame whose CRC-32C does not match its bytes (damaged in
// transit), or that carries none (a version 1 peer). Wrapped together
// with ErrMalformed; nothing of such a frame may be applied.
var ErrChecksum = errors.New("frame checksum mismatch")

// ErrNoChecksum: a control message without a checksum, as version 1
// peers send (wraps ErrChecksum). DecodeUnverified reads it, to answer a
// version 1 hello or report a version 1 server's refusal.
var ErrNoChecksum = fmt.Errorf("%w: no checksum (protocol version 1?)", ErrChecksum)

// Code is the typed reason of a reset (a ResetCode) or an error.
type Code string

// ResetCode says why a server sent reset.
type ResetCode = Code

// Codes of an error about one dataset (error.dataset). A client keeps
// serving what it holds of that dataset in either case.
const (
	// ErrorUnknownDataset: the server has no such dataset.
	ErrorUnknownDataset Code = "unknown_dataset"
	// ErrorDamaged: the server has the dataset but cannot serve it (its
	// snapshot is damaged or its CURRENT lost; error.reason says which)
	// until it is replaced there. The client subscribes again later (at
	// its next connection) and follows the replacement.
	ErrorDamaged Code = "damaged"

	// Codes of an error answering a vintage or revisions request (version
	// 3; error.req names the request).
	//
	// ErrorUnknownVintage: WHEN names no retained vintage (an unknown or
	// expired snapshot id or tag).
	ErrorUnknownVintage Code = "unknown_vintage"
	// ErrorBeforeFirstVintage: WHEN is before the dataset's first
	// retained vintage.
	ErrorBeforeFirstVintage Code = "before_first_vintage"
	// ErrorNoLake: the server keeps no vintages (no lake), or its catalog
	// cannot be reached now (error.reason says which).
	ErrorNoLake Code = "no_lake"
	// ErrorUnknownSeries: the dataset has no such series.
	ErrorUnknownSeries Code = "unknown_series"
)

const (
	// ResetAhead: the client's seq is above the server's head (the server
	// lost records it had acknowledged).
	ResetAhead ResetCode = "ahead"
	// ResetDiverged: the client's chain over its records differs from the
	// server's over the same seqs (the server was restored from a backup
	// and accepted other records since).
	ResetDiverged ResetCode = "diverged"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcField is the checksum's place at the end of a control message:
// `,"crc":"` + 8 hex digits + `"}`. A JSON decoder that does not know the
// field (a version 1 peer) ignores it.
var closeBrace = []byte{'}'}

const (
	crcPrefix = `,"crc":"`
	crcLen    = len(crcPrefix) + 8 + 2
)

// DecodeMessage verifies the checksum of a control message, then parses
// and validates it.
func DecodeMessage(b []byte) (*Message, error) {
	if len(b) > MaxControl {
		return nil, fmt.Errorf("%w: %d bytes exceeds %d", ErrMalformed, len(b), MaxControl)
	}
	n := len(b) - crcLen
	if n < 1 || !bytes.Equal(b[n:n+len(crcPrefix)], []byte(crcPrefix)) || b[len(b)-1] != '}' || b[len(b)-2] != '"' {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, ErrNoChecksum)
	}
	var want [4]byte
	if _, err := hex.Decode(want[:], b[n+len(crcPrefix):len(b)-2]); err != nil {
		return nil, fmt.Errorf("%w: %w: %v", ErrMalformed, ErrChecksum, err)
	}
	// The checksum covers the message as it was before the field was
	// added: b[:n] + "}".
	got := crc32.Update(crc32.Update(0, castagnoli, b[:n]), castagnoli, closeBrace)
	if got != binary.BigEndian.Uint32(want[:]) {
		return nil, fmt.Errorf("%w: %w: control message", ErrMalformed, ErrChecksum)
	}
	return DecodeUnverified(b)
}

// DecodeUnverified parses and validates a control message without
// checking its checksum. Only for messages of a version 1 peer, to say
// why the connection cannot go on; never act on their content.
func DecodeUnverified(b []byte) (*Message, error) {
	if len(b) > MaxControl {
		return nil, fmt.Errorf("%w: %d bytes exceeds %d", ErrMalformed, len(b), MaxControl)
	}
	var m Message
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	bad := func(format string, args ...any) (*Message, error) {
		return nil, fmt.Errorf("%w: %s: %s", ErrMalformed, m.Type, fmt.Sprintf(format, args...))
	}
	if len(m.Subs) > MaxSubs {
		return nil, fmt.Errorf("%w: %s: %w: %d entries, at most %d", ErrMalformed, m.Type, ErrTooManySubs, len(m.Subs), MaxSubs)
	}
	switch m.Type {
	case THello:
		if len(m.Proto) != 2 || m.Proto[0] > m.Proto[1] || m.Proto[0] < 0 {
			return bad("proto must be [min, max]")
		}
		for _, s := range m.Subs {
			if format.ValidDatasetName(s.Dataset) != nil {
				return bad("invalid dataset %q", s.Dataset)
			}
		}
	case TSubscribe:
		for _, s := range m.Subs {
			if format.ValidDatasetName(s.Dataset) != nil {
				return bad("invalid dataset %q", s.Dataset)
			}
		}
	case TFetch:
		if format.ValidDatasetName(m.Dataset) != nil || m.File == "" || m.Offset < 0 || len(m.SHA256) != 64 {
			return bad("need dataset, snapshot, file, sha256 and offset >= 0")
		}
	case TAck:
		if format.ValidDatasetName(m.Dataset) != nil {
			return bad("invalid dataset")
		}
	case TSnapshot:
		if m.Manifest == nil {
			return bad("no manifest")
		}
		if err := m.Manifest.Validate(); err != nil {
			return bad("%v", err)
		}
	case TVintage:
		// The request carries asof; the answer the vintage and its
		// manifest.
		if format.ValidDatasetName(m.Dataset) != nil || m.Req == 0 {
			return bad("need dataset and req")
		}
		if m.Vintage == nil {
			if m.AsOf == "" || len(m.AsOf) > MaxAsOf {
				return bad("need asof (1..%d bytes)", MaxAsOf)
			}
			break
		}
		if m.Manifest == nil || m.Vintage.Snapshot != m.Manifest.SnapshotID {
			return bad("the answer needs the vintage's manifest")
		}
		if err := m.Manifest.Validate(); err != nil {
			return bad("%v", err)
		}
	case TRevisions:
		if format.ValidDatasetName(m.Dataset) != nil || m.Req == 0 {
			return bad("need dataset and req")
		}
		if m.Series == "" || len(m.Series) > MaxAsOf || m.Period == "" || len(m.Period) > MaxAsOf {
			return bad("need series and period (1..%d bytes each)", MaxAsOf)
		}
	case TPing, TWelcome, TCatchupBegin, TCatchupEnd, THeartbeat, TReset, TError, TFileEnd:
	default:
		return nil, fmt.Errorf("%w: %w %q", ErrMalformed, ErrUnknownType, m.Type)
	}
	return &m, nil
}

// Encode marshals a control message and seals it with its CRC-32C (a
// last "crc" field).
func (m *Message) Encode() []byte {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // only plain fields: cannot fail
	}
	return SealControl(b)
}

// SealControl adds the checksum field to the JSON object b (which must
// end with '}'), reusing b's memory. Encode uses it; tests use it to send
// crafted messages that pass the checksum.
func SealControl(b []byte) []byte {
	if len(b) == 0 || b[len(b)-1] != '}' {
		return b
	}
	sum := crc32.Checksum(b, castagnoli)
	b = append(b[:len(b)-1], crcPrefix...)
	b = hex.AppendEncode(b, binary.BigEndian.AppendUint32(make([]byte, 0, 4), sum))
	return append(b, '"', '}')
}

// EncodeUnverified marshals a control message without a checksum, as a
// version 1 peer does (tests of the refusal).
func (m *Message) EncodeUnverified() []byte {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// Binary frames start with a kind byte.
const (
	KindChunk byte = 1
	KindDelta byte = 2
)

// Chunk is a piece of a snapshot file: bytes [Offset, Offset+len(Data)) of
// the file whose SHA-256 is SHA256.
type Chunk struct {
	SHA256 [32]byte
	Offset int64
	Data   []byte
}

// ChunkHeader is the length of a chunk frame before its data: kind,
// sha256[32], offset u64. A chunk frame is ChunkHeader+len(Data) bytes.
const ChunkHeader = 1 + 32 + 8

// AppendChunk encodes a chunk frame: kind, sha256[32], offset u64, data.
func AppendChunk(dst []byte, c *Chunk) []byte {
	dst = append(dst, KindChunk)
	dst = append(dst, c.SHA256[:]...)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(c.Offset))
	return append(dst, c.Data...)
}

// DeltaFrame carries records (From, To] of a dataset, in seq order.
type DeltaFrame struct {
	Dataset string
	Records []format.Record
}

// AppendDelta encodes a delta frame: kind, dataset length u8, dataset,
// format.EncodeBatch of the records, then the CRC-32C (u32 LE) of
// everything before it.
func AppendDelta(dst []byte, d *DeltaFrame) []byte {
	start := len(dst)
	dst = append(dst, KindDelta, byte(len(d.Dataset)))
	dst = append(dst, d.Dataset...)
	dst = format.EncodeBatch(dst, d.Records)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// DecodeBinary parses a binary frame into a *Chunk or a *DeltaFrame. A
// chunk's Data aliases b.
func DecodeBinary(b []byte) (any, error) {
	if len(b) < 1 {
		return nil, fmt.Errorf("%w: empty binary frame", ErrMalformed)
	}
	switch b[0] {
	case KindChunk:
		if len(b) < ChunkHeader {
			return nil, fmt.Errorf("%w: short chunk frame", ErrMalformed)
		}
		c := &Chunk{Offset: int64(binary.LittleEndian.Uint64(b[1+32:])), Data: b[ChunkHeader:]}
		copy(c.SHA256[:], b[1:1+32])
		if c.Offset < 0 || len(c.Data) > MaxChunk {
			return nil, fmt.Errorf("%w: chunk offset %d, %d bytes", ErrMalformed, c.Offset, len(c.Data))
		}
		return c, nil
	case KindDelta:
		if len(b) < 2+4 || len(b) < 2+int(b[1])+4 {
			return nil, fmt.Errorf("%w: short delta frame", ErrMalformed)
		}
		n := len(b) - 4
		if crc32.Checksum(b[:n], castagnoli) != binary.LittleEndian.Uint32(b[n:]) {
			return nil, fmt.Errorf("%w: %w: delta frame", ErrMalformed, ErrChecksum)
		}
		b = b[:n]
		name := string(b[2 : 2+int(b[1])])
		if err := format.ValidDatasetName(name); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		recs, err := format.DecodeBatch(b[2+int(b[1]):])
		if err != nil {
			return nil, fmt.Errorf("%w: delta: %v", ErrMalformed, err)
		}
		if len(recs) == 0 {
			return nil, fmt.Errorf("%w: empty delta", ErrMalformed)
		}
		if err := format.ValidateRecords(recs); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		return &DeltaFrame{Dataset: name, Records: recs}, nil
	}
	return nil, fmt.Errorf("%w: %w %d", ErrMalformed, ErrUnknownFrame, b[0])
}

// SplitRecords cuts records into groups whose encoded records (the sum
// of format.EncodedSize, exact) stay within MaxDeltaBytes; a single
// record larger than that is a group of its own. The frame around a group
// adds its header, the record count and the checksum, all within
// MaxFrame's margin over MaxDeltaBytes.
func SplitRecords(recs []format.Record) [][]format.Record {
	var out [][]format.Record
	start, size := 0, 0
	for i := range recs {
		n := format.EncodedSize(&recs[i])
		if size+n > MaxDeltaBytes && i > start {
			out = append(out, recs[start:i])
			start, size = i, 0
		}
		size += n
	}
	if start < len(recs) {
		out = append(out, recs[start:])
	}
	return out
}

// Chain is the checksum of the history chain a subscription carries: a
// CRC-64 over the snapshot id the records rest on and then each record in
// seq order, in format.EncodeBatch's encoding, 4,096 records per batch (so
// that both ends, encoding in the same groups, get the same bytes). Two
// ends with the same snapshot and the same records have the same chain;
// a server that gave other records the same seqs has another. "" when
// there are no records.
func Chain(snapshot string, recs []format.Record) string {
	if len(recs) == 0 {
		return ""
	}
	h := crc64.New(crc64Table)
	h.Write([]byte(snapshot))
	var buf []byte
	for len(recs) > 0 {
		n := min(len(recs), chainGroup)
		buf = format.EncodeBatch(buf[:0], recs[:n])
		h.Write(buf)
		recs = recs[n:]
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

const chainGroup = 4096

var crc64Table = crc64.MakeTable(crc64.ECMA)
