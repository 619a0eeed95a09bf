package format

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/energyscope/energyscope/internal/fileutil"
)

// Names of the files of a snapshot directory.
const (
	ManifestFile = "manifest.json"
	DataFile     = "data.arrow"
	IndexFile    = "index.arrow"
	HashFile     = "index.hash"
	TailFile     = "tail.parquet"

	// FormatName and FormatVersion identify the snapshot format in
	// manifest.json. FormatVersion is what Write writes; readers take
	// MinFormatVersion..FormatVersion. Version 2 added the hot records to
	// index.hash (hot.go), version 3 the ids inside them, version 4 put
	// them in hash order behind a bucket directory (hot4.go), version 5
	// each series' first and last period in its record (hot4.go);
	// data.arrow, index.arrow and tail.parquet are the same in all five
	// and carry fileVersion in their own metadata.
	FormatName       = "energyscope-snapshot"
	FormatVersion    = 5
	MinFormatVersion = 1

	// ChunkSize is the unit of transfer and of per-chunk hashes.
	ChunkSize = 4 << 20
)

// FileInfo describes one file of a snapshot.
type FileInfo struct {
	Name   string   `json:"name"`
	Size   int64    `json:"size"`
	SHA256 string   `json:"sha256"`
	Chunks []string `json:"chunks"` // SHA-256 of each ChunkSize piece, in order
}

// Manifest is manifest.json. Everything in it except Created is a function
// of the rows, so that two cooks of the same rows agree on it.
type Manifest struct {
	Format           string     `json:"format"`
	Version          int        `json:"version"`
	Dataset          string     `json:"dataset"`
	Epoch            uint64     `json:"epoch"`
	SnapshotID       string     `json:"snapshot_id"`
	CoversThroughSeq uint64     `json:"covers_through_seq"`
	Rows             int64      `json:"rows"`
	Series           int        `json:"series"`
	HotSeries        int        `json:"hot_series"`
	Batches          int        `json:"batches"`
	PeriodType       PeriodType `json:"period_type"`
	Duplicates       int64      `json:"duplicates"`
	Created          time.Time  `json:"created"`
	Files            []FileInfo `json:"files"`
}

// File returns the entry for name, or nil.
func (m *Manifest) File(name string) *FileInfo {
	for i := range m.Files {
		if m.Files[i].Name == name {
			return &m.Files[i]
		}
	}
	return nil
}

var (
	datasetNameRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	snapshotIDRE   = regexp.MustCompile(`^e[0-9]+-s[0-9]+-[0-9a-f]{12}$`)
	errMissingFile = errors.New("missing")
)

// ValidDatasetName reports whether name may name a dataset (it becomes a
// directory name on the server and on every companion, Windows and macOS
// included): 1 to 64 of letters, digits, '_', '-', '.', starting with a
// letter or digit, not ending with '.', and not a name Windows reserves for
// a device (CON, PRN, AUX, NUL, COM0-9, LPT0-9, in any case, with or
// without an extension, e.g. "nul.txt"). Names that differ only by case
// are one directory on Windows and macOS: a home must not hold both, which
// the creators of datasets check (this function sees one name).
func ValidDatasetName(name string) error {
	if !datasetNameRE.MatchString(name) {
		return fmt.Errorf("invalid dataset name %q: use letters, digits, '_', '-', '.' (at most 64, not starting with '.')", name)
	}
	if strings.HasSuffix(name, ".") {
		return fmt.Errorf("invalid dataset name %q: a name may not end with '.' (Windows drops it)", name)
	}
	if reservedDeviceName(name) {
		return fmt.Errorf("invalid dataset name %q: Windows reserves it for a device", name)
	}
	return nil
}

// reservedDeviceName reports whether Windows treats name as a device:
// the part before the first '.' is CON, PRN, AUX, NUL, COMn or LPTn (n a
// digit), in any case.
func reservedDeviceName(name string) bool {
	base, _, _ := strings.Cut(name, ".")
	switch strings.ToUpper(base) {
	case "CON", "PRN", "AUX", "NUL":
		return true
	}
	if len(base) == 4 && base[3] >= '0' && base[3] <= '9' {
		switch strings.ToUpper(base[:3]) {
		case "COM", "LPT":
			return true
		}
	}
	return false
}

// ParseManifest decodes and validates manifest.json.
func ParseManifest(b []byte) (*Manifest, error) {
	m, ok := parseManifestFast(b)
	if !ok {
		m = Manifest{}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, corrupt(ManifestFile, -1, "%v", err)
		}
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Validate checks the manifest's own consistency (not the files).
func (m *Manifest) Validate() error {
	bad := func(format string, args ...any) error { return corrupt(ManifestFile, -1, format, args...) }
	if m.Format != FormatName {
		return bad("format %q, want %q", m.Format, FormatName)
	}
	if m.Version < MinFormatVersion || m.Version > FormatVersion {
		return bad("unsupported format version %d (this build reads %d to %d)", m.Version, MinFormatVersion, FormatVersion)
	}
	if err := ValidDatasetName(m.Dataset); err != nil {
		return bad("%v", err)
	}
	if !snapshotIDRE.MatchString(m.SnapshotID) {
		return bad("invalid snapshot id %q", m.SnapshotID)
	}
	if m.PeriodType != PeriodDate32 && m.PeriodType != PeriodTimestamp {
		return bad("unknown period type %q", m.PeriodType)
	}
	if m.Rows < 0 || m.Series < 0 || m.HotSeries < 0 || m.HotSeries > m.Series || m.Batches < 0 {
		return bad("negative or inconsistent counts")
	}
	for _, name := range []string{DataFile, IndexFile, HashFile} {
		if m.File(name) == nil {
			return bad("lists no %s", name)
		}
	}
	for _, f := range m.Files {
		switch f.Name {
		case DataFile, IndexFile, HashFile, TailFile:
		default:
			return bad("unknown file %q", f.Name)
		}
		if f.Size < 0 || !isHex64(f.SHA256) {
			return bad("%s: bad size or sha256", f.Name)
		}
		if want := (f.Size + ChunkSize - 1) / ChunkSize; int64(len(f.Chunks)) != want {
			return bad("%s: %d chunk hashes, want %d", f.Name, len(f.Chunks), want)
		}
		for _, c := range f.Chunks {
			if !isHex64(c) {
				return bad("%s: bad chunk hash", f.Name)
			}
		}
	}
	// The id is content-addressed over epoch, sequence and the files'
	// hashes: a manifest whose epoch or covers_through_seq disagrees with
	// it would otherwise pass every other check.
	if id := snapshotID(m); m.SnapshotID != id {
		return bad("snapshot id %q does not match its epoch, sequence and file hashes (%q)", m.SnapshotID, id)
	}
	return nil
}

// ReadManifest reads dir/manifest.json and checks that every listed file
// exists with the recorded size. It reads nothing else.
func ReadManifest(dir string) (*Manifest, error) {
	m, _, err := ReadManifestBytes(dir)
	return m, err
}

// ReadManifestBytes is ReadManifest that also returns the bytes the
// manifest was parsed from.
func ReadManifestBytes(dir string) (*Manifest, []byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, &CorruptionError{File: ManifestFile, Offset: -1, Err: errMissingFile}
		}
		return nil, nil, err
	}
	m, err := ParseManifest(b)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range m.Files {
		st, err := os.Stat(filepath.Join(dir, f.Name))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, nil, &CorruptionError{File: f.Name, Offset: -1, Err: errMissingFile}
			}
			return nil, nil, err
		}
		if st.Size() != f.Size {
			return nil, nil, corrupt(f.Name, -1, "size %d, manifest says %d", st.Size(), f.Size)
		}
	}
	return m, b, nil
}

// chunkHasher computes the whole-file and per-chunk SHA-256 of what is
// written through it.
type chunkHasher struct {
	whole  hash.Hash
	chunk  hash.Hash
	inChk  int64
	size   int64
	chunks []string
}

func newChunkHasher() *chunkHasher {
	return &chunkHasher{whole: sha256.New(), chunk: sha256.New()}
}

func (h *chunkHasher) Write(p []byte) (int, error) {
	n := len(p)
	if n >= parallelMin {
		// The whole-file hash on another goroutine, the chunk hashes here.
		done := make(chan struct{})
		go func(b []byte) {
			h.whole.Write(b)
			close(done)
		}(p)
		defer func() { <-done }()
	} else {
		h.whole.Write(p)
	}
	h.size += int64(n)
	for len(p) > 0 {
		take := int64(len(p))
		if room := ChunkSize - h.inChk; take > room {
			take = room
		}
		h.chunk.Write(p[:take])
		h.inChk += take
		p = p[take:]
		if h.inChk == ChunkSize {
			h.chunks = append(h.chunks, hex.EncodeToString(h.chunk.Sum(nil)))
			h.chunk.Reset()
			h.inChk = 0
		}
	}
	return n, nil
}

func (h *chunkHasher) info(name string) FileInfo {
	chunks := h.chunks
	if h.inChk > 0 {
		chunks = append(chunks, hex.EncodeToString(h.chunk.Sum(nil)))
	}
	if chunks == nil {
		chunks = []string{}
	}
	return FileInfo{Name: name, Size: h.size, SHA256: hex.EncodeToString(h.whole.Sum(nil)), Chunks: chunks}
}

// HashFileInfo computes the FileInfo of an existing file by reading it.
func HashFileInfo(path string) (FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return FileInfo{}, err
	}
	defer f.Close()
	h := newChunkHasher()
	if _, err := io.CopyBuffer(h, f, make([]byte, 1<<20)); err != nil {
		return FileInfo{}, err
	}
	return h.info(filepath.Base(path)), nil
}

// VerifyFiles re-reads every file of the snapshot in dir and compares its
// size, SHA-256 and chunk hashes with the manifest. It finds any flipped
// byte.
func VerifyFiles(dir string, m *Manifest) error {
	for _, want := range m.Files {
		got, err := HashFileInfo(filepath.Join(dir, want.Name))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return &CorruptionError{File: want.Name, Offset: -1, Err: errMissingFile}
			}
			return err
		}
		if got.Size != want.Size {
			return corrupt(want.Name, -1, "size %d, manifest says %d", got.Size, want.Size)
		}
		if got.SHA256 != want.SHA256 {
			for i := range got.Chunks {
				if i < len(want.Chunks) && got.Chunks[i] != want.Chunks[i] {
					return corrupt(want.Name, int64(i)*ChunkSize, "SHA-256 mismatch in chunk %d", i)
				}
			}
			return corrupt(want.Name, -1, "SHA-256 mismatch")
		}
		// The chunk hashes are what a transfer verifies and resumes by:
		// a wrong one must not pass because the whole-file hash is right.
		if len(got.Chunks) != len(want.Chunks) {
			return corrupt(want.Name, -1, "%d chunk hashes, manifest lists %d", len(got.Chunks), len(want.Chunks))
		}
		for i := range got.Chunks {
			if got.Chunks[i] != want.Chunks[i] {
				return corrupt(want.Name, int64(i)*ChunkSize, "chunk %d hash disagrees with the manifest", i)
			}
		}
	}
	return nil
}

// manifestBytes is manifest.json's content for m.
func manifestBytes(m *Manifest) ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// WriteFileSync writes b to path (created or truncated) and fsyncs the
// file; the caller fsyncs the directory. It is fileutil.WriteNew, kept
// under this name for the format's callers.
func WriteFileSync(path string, b []byte) error { return fileutil.WriteNew(path, b, 0o644) }

// SyncDir fsyncs a directory so that renames and creations in it are
// durable (fileutil.SyncDir).
func SyncDir(dir string) error { return fileutil.SyncDir(dir) }

// isHex64 reports whether s is 64 lowercase hex digits (a SHA-256). A
// plain loop: a manifest at full scale lists ~600 chunk hashes and a
// regexp per hash cost milliseconds of every open.
func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	// No branch on each byte: a full-scale manifest has 680 hashes, and
	// a branch per byte mispredicted on a third of them (0.14 ms a
	// Validate).
	var bad byte
	for i := 0; i < len(s); i++ {
		bad |= notHex[s[i]]
	}
	return bad == 0
}

// notHex is 1 for every byte but 0-9 and a-f.
var notHex = func() (t [256]byte) {
	for c := range t {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			t[c] = 1
		}
	}
	return t
}()
