package cook

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// sampleBatch is a three-row long-shaped record batch.
func sampleBatch(t testing.TB) arrow.RecordBatch {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "series_id", Type: arrow.BinaryTypes.String},
		{Name: "period", Type: arrow.BinaryTypes.String},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"A", "A", "B"}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"2024-01-01", "2024-01-02", "2024-01-01"}, nil)
	b.Field(2).(*array.Float64Builder).AppendValues([]float64{1, 2, 3}, nil)
	return b.NewRecordBatch()
}

// arrowStream writes rec as an Arrow IPC stream.
func arrowStream(t testing.TB, rec arrow.RecordBatch, opts ...ipc.Option) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, append([]ipc.Option{ipc.WithSchema(rec.Schema())}, opts...)...)
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// arrowFile writes rec as an Arrow IPC file.
func arrowFile(t testing.TB, rec arrow.RecordBatch, opts ...ipc.Option) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, append([]ipc.Option{ipc.WithSchema(rec.Schema())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ipcFrame is one message of a stream: offsets into the stream's bytes.
type ipcFrame struct {
	meta, metaLen, body int
	bodyLen             int64
	header              byte
}

// ipcFrames lists the messages of a well-formed stream.
func ipcFrames(t testing.TB, data []byte) []ipcFrame {
	t.Helper()
	var out []ipcFrame
	pos := 0
	for pos+8 <= len(data) {
		l := int(binary.LittleEndian.Uint32(data[pos+4:]))
		pos += 8
		if l == 0 {
			break
		}
		info, err := checkIPCMessage(fbuf(data[pos:pos+l]), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ipcFrame{meta: pos, metaLen: l, body: pos + l, bodyLen: info.bodyLen, header: info.header})
		pos += l + int(info.bodyLen)
	}
	return out
}

// fieldPos returns the position in data of field id of the table that the
// uoffset at data[off] points to.
func fieldPos(t testing.TB, data []byte, off, id int) int {
	t.Helper()
	b := fbuf(data)
	tab, vt, vtLen, err := b.table(off)
	if err != nil {
		t.Fatal(err)
	}
	p := b.field(tab, vt, vtLen, id)
	if p < 0 {
		t.Fatalf("field %d absent", id)
	}
	return p
}

// forgeRecordBatch returns a copy of stream with the first record batch
// message changed by fn, which gets the message's metadata (to patch in
// place) and the position of its RecordBatch table's uoffset.
func forgeRecordBatch(t testing.TB, stream []byte, fn func(meta []byte, batch int)) []byte {
	t.Helper()
	out := bytes.Clone(stream)
	for _, f := range ipcFrames(t, stream) {
		if f.header != ipcHeaderRecord {
			continue
		}
		meta := out[f.meta : f.meta+f.metaLen]
		fn(meta, fieldPos(t, meta, 0, 2))
		return out
	}
	t.Fatal("no record batch")
	return nil
}

// forgeBodyLength sets the first record batch's body length to n.
func forgeBodyLength(t testing.TB, stream []byte, n int64) []byte {
	return forgeRecordBatch(t, stream, func(meta []byte, _ int) {
		binary.LittleEndian.PutUint64(meta[fieldPos(t, meta, 0, 3):], uint64(n))
	})
}

// forgedArrowInputs are Arrow IPC streams and files whose headers claim
// lengths far beyond their bytes. Before the checks of ipcscan.go each of
// them ended the process with a fatal out-of-memory.
func forgedArrowInputs(t testing.TB) map[string][]byte {
	rec := sampleBatch(t)
	defer rec.Release()
	stream := arrowStream(t, rec)
	zstream := arrowStream(t, rec, ipc.WithZstd())
	file := arrowFile(t, rec)
	zfile := arrowFile(t, rec, ipc.WithZstd())
	out := map[string][]byte{
		"stream body 2^40": forgeBodyLength(t, stream, 1<<40),
		"stream rows 2^40": forgeRecordBatch(t, stream, func(meta []byte, b int) { binary.LittleEndian.PutUint64(meta[fieldPos(t, meta, b, 0):], 1<<40) }),
		"stream metadata 2^31-1": func() []byte {
			s := bytes.Clone(stream)
			binary.LittleEndian.PutUint32(s[4:], 1<<31-1)
			return s
		}(),
		"zstd stream decompressed 2^40": forgeDecompressed(t, zstream, 1<<40),
		"zstd file decompressed 2^40":   forgeDecompressedFile(t, zfile, 1<<40),
		"file body 2^40":                forgeFileBody(t, file, 1<<40),
	}
	// The stream the server tests post, kept as a file.
	td, err := os.ReadFile("testdata/forged-body-2p40.arrows")
	if err != nil {
		t.Fatal(err)
	}
	out["testdata forged-body-2p40.arrows"] = td
	return out
}

// forgeDecompressed sets the declared decompressed length of every
// compressed buffer of the first record batch of a stream to n.
func forgeDecompressed(t testing.TB, stream []byte, n int64) []byte {
	t.Helper()
	out := bytes.Clone(stream)
	for _, f := range ipcFrames(t, stream) {
		if f.header != ipcHeaderRecord {
			continue
		}
		patchBuffers(t, out[f.meta:f.meta+f.metaLen], out[f.body:f.body+int(f.bodyLen)], n)
		return out
	}
	t.Fatal("no record batch")
	return nil
}

func patchBuffers(t testing.TB, meta, body []byte, n int64) {
	b := fbuf(meta)
	start, cnt, err := b.vector(fieldPos(t, meta, fieldPos(t, meta, 0, 2), 2), 16)
	if err != nil {
		t.Fatal(err)
	}
	for k := range cnt {
		off, _ := b.i64(start + 16*k)
		l, _ := b.i64(start + 16*k + 8)
		if l >= 8 {
			binary.LittleEndian.PutUint64(body[off:], uint64(n))
		}
	}
}

// forgeDecompressedFile is forgeDecompressed for an Arrow IPC file: its
// messages start after the 8-byte magic and end before the footer.
func forgeDecompressedFile(t testing.TB, file []byte, n int64) []byte {
	t.Helper()
	out := bytes.Clone(file)
	pos := 8
	for pos+8 <= len(out) {
		l := int(binary.LittleEndian.Uint32(out[pos+4:]))
		if l == 0 {
			break
		}
		meta := out[pos+8 : pos+8+l]
		info, err := checkIPCMessage(fbuf(meta), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if info.header == ipcHeaderRecord {
			patchBuffers(t, meta, out[pos+8+l:pos+8+l+int(info.bodyLen)], n)
			return out
		}
		pos += 8 + l + int(info.bodyLen)
	}
	t.Fatal("no record batch")
	return nil
}

// forgeFileBody sets the body length of the file's first record batch, in
// its message and in the footer's block, to n.
func forgeFileBody(t testing.TB, file []byte, n int64) []byte {
	t.Helper()
	out := bytes.Clone(file)
	flen := int(binary.LittleEndian.Uint32(out[len(out)-10:]))
	footer := out[len(out)-10-flen : len(out)-10]
	// Footer: version(0), schema(1), dictionaries(2), recordBatches(3);
	// Block { offset: long; metaDataLength: int; pad; bodyLength: long }.
	start, cnt, err := fbuf(footer).vector(fieldPos(t, footer, 0, 3), 24)
	if err != nil || cnt == 0 {
		t.Fatal("no record batch block", err)
	}
	binary.LittleEndian.PutUint64(footer[start+16:], uint64(n))
	off := int(binary.LittleEndian.Uint64(footer[start:]))
	l := int(binary.LittleEndian.Uint32(out[off+4:]))
	meta := out[off+8 : off+8+l]
	binary.LittleEndian.PutUint64(meta[fieldPos(t, meta, 0, 3):], uint64(n))
	return out
}

// TestForgedLengthsCook: es cook of an Arrow file or stream or a Parquet
// file whose headers claim 2^40 bytes (or rows, or a 2 GiB page) fails with a clear error wrapping ErrBadInput
// (it used to die of a fatal out-of-memory).
func TestForgedLengthsCook(t *testing.T) {
	dir := t.TempDir()
	inputs := forgedArrowInputs(t)
	for name, data := range forgedParquetInputs(t) {
		inputs[name] = data
	}
	for name, data := range inputs {
		t.Run(name, func(t *testing.T) {
			ext := ".arrow"
			if strings.HasPrefix(name, "parquet") {
				ext = ".parquet"
			}
			path := filepath.Join(dir, strings.NewReplacer(" ", "_", "(", "", ")", "").Replace(name)+ext)
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			b := NewBuilder()
			_, err := b.AddFile(path, InputOptions{})
			if err == nil && strings.HasSuffix(name, "(read as it is)") {
				// The reader takes its counts from the pages' bytes, not
				// from this header field: the file's three rows.
				if n := len(b.Table().Period); n != 3 {
					t.Fatalf("%d rows, want the 3 the file holds", n)
				}
				return
			}
			var ie *InputError
			if !errors.Is(err, ErrBadInput) || !errors.As(err, &ie) || ie.File != path {
				t.Fatalf("%d bytes: err %v, want an InputError naming the file (ErrBadInput)", len(data), err)
			}
			if n := len(b.Table().Period); n != 0 {
				t.Fatalf("%d rows added", n)
			}
			t.Log(err)
		})
	}
}

// TestArrowStreamReaderUnforged: the checking reader reads what arrow-go
// writes, compressed or not.
func TestArrowStreamReaderUnforged(t *testing.T) {
	rec := sampleBatch(t)
	defer rec.Release()
	for _, opts := range [][]ipc.Option{nil, {ipc.WithZstd()}, {ipc.WithLZ4()}} {
		s := arrowStream(t, rec, opts...)
		if err := checkIPCStream(s); err != nil {
			t.Fatal(err)
		}
		r, err := NewIPCStreamReader(bytes.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		rows := int64(0)
		for r.Next() {
			rows += r.RecordBatch().NumRows()
		}
		if r.Err() != nil || rows != 3 {
			t.Fatalf("rows %d err %v", rows, r.Err())
		}
		r.Release()
	}
}
