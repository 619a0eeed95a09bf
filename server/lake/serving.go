package lake

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"runtime/debug"
	"strconv"

	"github.com/apache/iceberg-go/puffin"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/energyscope/energyscope/localcache/format"
)

// The serving index of a vintage is one Puffin file registered as the
// statistics file of its Iceberg snapshot (FORMAT.md, "The lake").
const (
	// PageSize is the alignment of every artifact blob in the Puffin
	// file, so that each can be memory-mapped in place.
	PageSize = 4096

	BlobManifest = "energyscope-manifest-v1"
	BlobHash     = "energyscope-index-hash-v1"
	BlobIndex    = "energyscope-index-v1"
	BlobData     = "energyscope-data-v1"
	BlobTail     = "energyscope-tail-v1"
	// BlobPadding fills the gap before an artifact blob; readers skip it.
	BlobPadding = "energyscope-padding-v1"

	// Blob properties.
	PropFile   = "file"   // the artifact's file name in a snapshot directory
	PropSHA256 = "sha256" // hex SHA-256 of the blob (as in manifest.json)
	// In the table metadata's copy of the blob metadata only (the Puffin
	// footer has its own offset and length fields): where the blob lies,
	// so that a reader locates the artifacts without reading the footer.
	PropOffset = "offset"
	PropLength = "length"

	// Snapshot summary keys.
	SummarySnapshot   = "energyscope.snapshot-id"
	SummaryEpoch      = "energyscope.epoch"
	SummaryCoversSeq  = "energyscope.covers-through-seq"
	SummaryRows       = "energyscope.rows"
	SummaryRollbackOf = "energyscope.rollback-of" // iceberg snapshot id a rollback restored

	createdBy = "energyscope lake 1"
)

// artifactBlobs lists the snapshot files in Puffin order: small first.
var artifactBlobs = []struct{ file, blob string }{
	{format.ManifestFile, BlobManifest},
	{format.HashFile, BlobHash},
	{format.IndexFile, BlobIndex},
	{format.DataFile, BlobData},
	{format.TailFile, BlobTail},
}

func blobTypeOf(file string) string {
	for _, a := range artifactBlobs {
		if a.file == file {
			return a.blob
		}
	}
	return ""
}

// puffinAlign is PageSize; a test lowers it to write a Puffin file whose
// blobs are not page-aligned (which readers must refuse).
var puffinAlign int64 = PageSize

// recordOffsets: the table metadata's blob entries carry offset and
// length; a test turns it off to write the layout of earlier publishes.
var recordOffsets = true

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writePuffin writes the serving artifacts of src as a Puffin file under
// the table's metadata directory and returns the statistics file to
// register (its snapshot ids still unset: see forSnapshot) and the
// file's location. The file does not depend on the Iceberg snapshot it
// will be registered for (its blobs carry snapshot-id and
// sequence-number -1, "not known when written", as Iceberg's deletion
// vectors do), so one Puffin file serves every attempt of a publish.
// Every artifact blob starts on a PageSize boundary (padding blobs fill
// the gaps).
func writePuffin(fs iceio.WriteFileIO, tableLocation string, src *source) (table.StatisticsFile, string, error) {
	loc := fmt.Sprintf("%s/metadata/es-serving-%s-%s.puffin", tableLocation, src.m.SnapshotID, uuid.NewString())
	f, err := fs.Create(loc)
	if err != nil {
		return table.StatisticsFile{}, "", err
	}
	sf, err := writePuffinTo(f, loc, src)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fs.Remove(loc)
		return table.StatisticsFile{}, "", fmt.Errorf("write serving index: %w", err)
	}
	return sf, loc, nil
}

// forSnapshot is sf registered for snap.
func forSnapshot(sf table.StatisticsFile, snap *table.Snapshot) table.StatisticsFile {
	sf.SnapshotID = snap.SnapshotID
	sf.BlobMetadata = append([]table.BlobMetadata(nil), sf.BlobMetadata...)
	for i := range sf.BlobMetadata {
		sf.BlobMetadata[i].SnapshotID = snap.SnapshotID
		sf.BlobMetadata[i].SequenceNumber = snap.SequenceNumber
	}
	return sf
}

func writePuffinTo(f io.Writer, loc string, src *source) (_ table.StatisticsFile, err error) {
	defer guardFault(debug.SetPanicOnFault(true), &err)
	cw := &countingWriter{w: f}
	w, err := puffin.NewWriter(cw)
	if err != nil {
		return table.StatisticsFile{}, err
	}
	if err := w.SetCreatedBy(createdBy); err != nil {
		return table.StatisticsFile{}, err
	}
	if err := w.AddProperties(map[string]string{SummarySnapshot: src.m.SnapshotID, "dataset": src.m.Dataset}); err != nil {
		return table.StatisticsFile{}, err
	}
	fields := []int32{fieldSeriesID, fieldPeriod, fieldValue}
	sf := table.StatisticsFile{StatisticsPath: loc}
	const unknown = -1
	for _, a := range artifactBlobs {
		b, ok := src.files[a.file]
		if !ok {
			continue
		}
		if pad := (puffinAlign - cw.n%puffinAlign) % puffinAlign; pad != 0 {
			if _, err := w.AddBlob(puffin.BlobMetadataInput{Type: BlobPadding, SnapshotID: unknown, SequenceNumber: unknown, Fields: []int32{}}, make([]byte, pad)); err != nil {
				return table.StatisticsFile{}, err
			}
		}
		sum, ok := src.sums[a.file]
		if !ok {
			h := sha256.Sum256(b)
			sum = hex.EncodeToString(h[:])
		}
		props := map[string]string{PropFile: a.file, PropSHA256: sum}
		bm, err := w.AddBlob(puffin.BlobMetadataInput{Type: puffin.BlobType(a.blob), SnapshotID: unknown, SequenceNumber: unknown, Fields: fields, Properties: props}, b)
		if err != nil {
			return table.StatisticsFile{}, err
		}
		tprops := map[string]string{PropFile: a.file, PropSHA256: sum}
		if recordOffsets {
			tprops[PropOffset] = strconv.FormatInt(bm.Offset, 10)
			tprops[PropLength] = strconv.FormatInt(bm.Length, 10)
		}
		sf.BlobMetadata = append(sf.BlobMetadata, table.BlobMetadata{Type: table.BlobType(a.blob), Fields: fields, Properties: tprops})
	}
	footerStart := cw.n
	if err := w.Finish(); err != nil {
		return table.StatisticsFile{}, err
	}
	sf.FileSizeInBytes = cw.n
	sf.FileFooterSizeInBytes = cw.n - footerStart
	return sf, nil
}

// Blob is one serving artifact inside a vintage's Puffin file.
type Blob struct {
	File   string `json:"file"`   // name in a snapshot directory (manifest.json, data.arrow, ...)
	Type   string `json:"type"`   // Puffin blob type
	Offset int64  `json:"offset"` // byte offset in the Puffin file, a multiple of PageSize
	Length int64  `json:"length"`
	SHA256 string `json:"sha256"`
}

// ServingIndex locates a vintage's serving artifacts.
type ServingIndex struct {
	Vintage Vintage `json:"vintage"`
	// Location is the Puffin file's URI; Path the local path when the
	// warehouse is file:// (empty otherwise).
	Location string `json:"location"`
	Path     string `json:"path,omitempty"`
	Size     int64  `json:"size"`
	Blobs    []Blob `json:"blobs"`
}

// Blob returns the artifact named file, or false.
func (s *ServingIndex) Blob(file string) (Blob, bool) {
	for _, b := range s.Blobs {
		if b.File == file {
			return b, true
		}
	}
	return Blob{}, false
}

// readFooter reads the Puffin footer of the statistics file and returns
// the artifact blobs. Padding and unknown blob types are skipped; every
// artifact must carry its file name and SHA-256, the manifest, index,
// hash and data must be present, and offsets must be page-aligned.
func readFooter(fs iceio.IO, loc string, v Vintage) ([]Blob, int64, error) {
	f, err := fs.Open(loc)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	r, err := puffin.NewReader(f)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	var out []Blob
	seen := map[string]bool{}
	for _, b := range r.Blobs() {
		if b.Type == BlobPadding || b.Properties[PropFile] == "" {
			continue
		}
		file := b.Properties[PropFile]
		if blobTypeOf(file) != string(b.Type) {
			return nil, 0, fmt.Errorf("blob %s for file %q: unknown artifact", b.Type, file)
		}
		if b.Offset%PageSize != 0 {
			return nil, 0, fmt.Errorf("blob %s at offset %d: not page-aligned", b.Type, b.Offset)
		}
		if b.CompressionCodec != nil && *b.CompressionCodec != "" {
			return nil, 0, fmt.Errorf("blob %s: compressed (%s)", b.Type, *b.CompressionCodec)
		}
		if seen[file] {
			return nil, 0, fmt.Errorf("file %q twice", file)
		}
		seen[file] = true
		out = append(out, Blob{File: file, Type: string(b.Type), Offset: b.Offset, Length: b.Length, SHA256: b.Properties[PropSHA256]})
	}
	for _, need := range []string{format.ManifestFile, format.IndexFile, format.HashFile, format.DataFile} {
		if !seen[need] {
			return nil, 0, fmt.Errorf("no %s blob", need)
		}
	}
	return out, st.Size(), nil
}

func parseUint(props map[string]string, key string) uint64 {
	n, _ := strconv.ParseUint(props[key], 10, 64)
	return n
}
