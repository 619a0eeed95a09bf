package format

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// copyDir copies the snapshot directory src into a fresh temp directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "snap")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func wantCorruption(t *testing.T, err error, file string) *CorruptionError {
	t.Helper()
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T), want a *CorruptionError naming %s", err, err, file)
	}
	if ce.File != file {
		t.Fatalf("corruption error names %q, want %q: %v", ce.File, file, err)
	}
	return ce
}

// TestVerifyCatchesEveryFlip flips one byte at many random positions of
// each cooked file: Verify checks SHA-256, so every flip must be caught,
// and blamed on the flipped file.
func TestVerifyCatchesEveryFlip(t *testing.T) {
	for _, hourly := range []bool{false, true} {
		src, _ := writeSnap(t, goldenTable(hourly), WriteOptions{BatchRows: 16})
		if _, err := Verify(src); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(7, 0))
		for _, name := range cookedFiles {
			orig := readFile(t, src, name)
			dir := copyDir(t, src)
			path := filepath.Join(dir, name)
			positions := []int{0, len(orig) - 1}
			for range scaled(40) {
				positions = append(positions, rng.IntN(len(orig)))
			}
			for _, pos := range positions {
				b := append([]byte(nil), orig...)
				b[pos] ^= byte(1 + rng.IntN(255))
				if err := os.WriteFile(path, b, 0o644); err != nil {
					t.Fatal(err)
				}
				_, err := Verify(dir)
				if err == nil {
					t.Fatalf("%s: flip at %d/%d not detected", name, pos, len(orig))
				}
				wantCorruption(t, err, name)
			}
		}
	}
}

// A flip in manifest.json must be caught unless it only touches fields that
// nothing relies on for correctness: created, duplicates, hot_series and the
// dataset name (which the store checks against the directory).
func TestVerifyManifestFlips(t *testing.T) {
	src, orig := writeSnap(t, goldenTable(false), WriteOptions{Epoch: 12, CoversThroughSeq: 345})
	b0 := readFile(t, src, ManifestFile)
	dir := copyDir(t, src)
	rng := rand.New(rand.NewPCG(8, 0))
	tolerated := func(m *Manifest) bool {
		a, b := *m, *orig
		a.Created, a.Duplicates, a.HotSeries, a.Dataset = b.Created, b.Duplicates, b.HotSeries, b.Dataset
		return reflect.DeepEqual(a, b)
	}
	// Every third byte (every 18th under -race), from a random start.
	for pos := rng.IntN(3); pos < len(b0); pos += 18 / scaled(6) {
		b := append([]byte(nil), b0...)
		b[pos] ^= byte(1 + rng.IntN(255))
		if err := os.WriteFile(filepath.Join(dir, ManifestFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := Verify(dir)
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("flip at %d: %v is not a CorruptionError", pos, err)
			}
			continue
		}
		if !tolerated(m) {
			t.Fatalf("flip at %d (%q) went unnoticed and changed the manifest:\n%+v\nwas\n%+v", pos, b[max(0, pos-20):min(len(b), pos+20)], m, orig)
		}
	}
}

func TestVerifyFileProblems(t *testing.T) {
	for _, version := range []int{3, 4, 5} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) { verifyFileProblems(t, version) })
	}
}

func verifyFileProblems(t *testing.T, version int) {
	src, _ := writeSnap(t, goldenTable(false), WriteOptions{Version: version})
	cases := []struct {
		name     string
		file     string
		mutate   func(t *testing.T, dir string)
		versions []int // nil: every version
	}{
		{"manifest missing", ManifestFile, func(t *testing.T, dir string) { rm(t, dir, ManifestFile) }, nil},
		{"data missing", DataFile, func(t *testing.T, dir string) { rm(t, dir, DataFile) }, nil},
		{"index missing", IndexFile, func(t *testing.T, dir string) { rm(t, dir, IndexFile) }, nil},
		{"hash missing", HashFile, func(t *testing.T, dir string) { rm(t, dir, HashFile) }, nil},
		{"data truncated", DataFile, func(t *testing.T, dir string) { truncate(t, dir, DataFile, -1) }, nil},
		{"hash extended", HashFile, func(t *testing.T, dir string) { truncate(t, dir, HashFile, +1) }, nil},
		{"garbage manifest", ManifestFile, func(t *testing.T, dir string) { put(t, dir, ManifestFile, []byte("{not json")) }, nil},
		{"empty manifest", ManifestFile, func(t *testing.T, dir string) { put(t, dir, ManifestFile, nil) }, nil},
		{"manifest version from the future", ManifestFile, func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *Manifest) { m.Version = FormatVersion + 1 })
		}, nil},
		{"manifest version 0", ManifestFile, func(t *testing.T, dir string) { editManifest(t, dir, func(m *Manifest) { m.Version = 0 }) }, nil},
		{"manifest version 1 over index.hash of the version written", HashFile, func(t *testing.T, dir string) { editManifest(t, dir, func(m *Manifest) { m.Version = 1 }) }, nil},
		{"manifest version 2 over index.hash of the version written", HashFile, func(t *testing.T, dir string) { editManifest(t, dir, func(m *Manifest) { m.Version = 2 }) }, nil},
		{"manifest version 3 over index.hash 4", HashFile, func(t *testing.T, dir string) { editManifest(t, dir, func(m *Manifest) { m.Version = 3 }) }, []int{4, 5}},
		{"manifest version 4 over index.hash 3", HashFile, func(t *testing.T, dir string) { editManifest(t, dir, func(m *Manifest) { m.Version = 4 }) }, []int{3}},
		{"inline id byte rewritten with its checksums", HashFile, func(t *testing.T, dir string) {
			// Row 4 is "a", inside its record like every golden id.
			rewriteHash(t, dir, func(b []byte, recAt uint64) { b[recAt+4*uint64(b[36])+recordHead]++ })
		}, []int{3}},
		{"inline id byte rewritten with its checksums", HashFile, func(t *testing.T, dir string) {
			rewriteHash4(t, dir, func(b []byte, dirAt, posAt, recAt uint64) {
				b[recAt+v4Stride*uint64(binary.LittleEndian.Uint32(b[posAt+4*4:]))+recordHead]++ // row 4's record
			})
		}, []int{4, 5}},
		{"directory entry rewritten with its checksums", HashFile, func(t *testing.T, dir string) {
			rewriteHash4(t, dir, func(b []byte, dirAt, posAt, recAt uint64) { b[dirAt+4*3]++ })
		}, []int{4, 5}},
		{"directory entry beyond the records, checksums fixed", HashFile, func(t *testing.T, dir string) {
			rewriteHash4(t, dir, func(b []byte, dirAt, posAt, recAt uint64) { binary.LittleEndian.PutUint32(b[dirAt+4*5:], 1<<30) })
		}, []int{4, 5}},
		{"row table entry rewritten with its checksums", HashFile, func(t *testing.T, dir string) {
			rewriteHash4(t, dir, func(b []byte, dirAt, posAt, recAt uint64) { b[posAt+4*2] ^= 1 })
		}, []int{4, 5}},
		{"record's hash tag rewritten with its checksums", HashFile, func(t *testing.T, dir string) {
			rewriteHash4(t, dir, func(b []byte, dirAt, posAt, recAt uint64) { b[recAt+v4TagAt]++ })
		}, []int{4}},
		{"manifest version 4 over index.hash 5", HashFile, func(t *testing.T, dir string) { editManifest(t, dir, func(m *Manifest) { m.Version = 4 }) }, []int{5}},
		{"manifest version 5 over index.hash 4", HashFile, func(t *testing.T, dir string) { editManifest(t, dir, func(m *Manifest) { m.Version = 5 }) }, []int{4}},
		{"record's first period rewritten with its checksums", HashFile, func(t *testing.T, dir string) {
			rewriteHash4(t, dir, func(b []byte, dirAt, posAt, recAt uint64) { b[recAt+v5FirstAt]++ })
		}, []int{5}},
		{"record's last period rewritten with its checksums", HashFile, func(t *testing.T, dir string) {
			rewriteHash4(t, dir, func(b []byte, dirAt, posAt, recAt uint64) { b[recAt+v4Stride+v5LastAt]-- })
		}, []int{5}},
		{"record's bounds dropped (noBounds) with its checksums", HashFile, func(t *testing.T, dir string) {
			rewriteHash4(t, dir, func(b []byte, dirAt, posAt, recAt uint64) {
				binary.LittleEndian.PutUint64(b[recAt+v5FirstAt:], math.MaxUint64)
			})
		}, []int{5}},
		{"base of the periods rewritten with its checksums", HashFile, func(t *testing.T, dir string) {
			rewriteHash4(t, dir, func(b []byte, dirAt, posAt, recAt uint64) { b[32]++ })
		}, []int{5}},
		{"record's row rewritten with its checksums", HashFile, func(t *testing.T, dir string) {
			rewriteHash4(t, dir, func(b []byte, dirAt, posAt, recAt uint64) { b[recAt+v4Stride+v4RowAt] ^= 1 })
		}, []int{4, 5}},
		{"bucket count wrong, checksums fixed", HashFile, func(t *testing.T, dir string) {
			rewriteHash4(t, dir, func(b []byte, dirAt, posAt, recAt uint64) { b[12]++ })
		}, []int{4, 5}},
		{"id length rewritten with its checksums", HashFile, func(t *testing.T, dir string) {
			rewriteHash(t, dir, func(b []byte, recAt uint64) { b[recAt+14]-- }) // row 0's id length
		}, nil},
		{"inline length out of range", HashFile, func(t *testing.T, dir string) {
			rewriteHash(t, dir, func(b []byte, recAt uint64) { b[32] = maxInline + 8; b[36] = byte(recordStride(maxInline + 8)) })
		}, []int{3}},
		{"record stride wrong", HashFile, func(t *testing.T, dir string) {
			rewriteHash(t, dir, func(b []byte, recAt uint64) { b[36] += 8 })
		}, []int{3}},
		{"hot record rewritten with its checksums", HashFile, func(t *testing.T, dir string) {
			rewriteHash(t, dir, func(b []byte, recAt uint64) { b[recAt+4]++ }) // row 0's offset
		}, nil},
		{"reserved header byte set, checksums fixed", HashFile, func(t *testing.T, dir string) {
			rewriteHash(t, dir, func(b []byte, recAt uint64) { b[40] = 1 })
		}, nil},
		{"batch table rewritten with its checksums", HashFile, func(t *testing.T, dir string) {
			rewriteHash(t, dir, func(b []byte, recAt uint64) {
				b[batchAt] += 8 // batch 0's period offset
			})
		}, nil},
		{"wrong sha256", IndexFile, func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *Manifest) { m.File(IndexFile).SHA256 = strings.Repeat("0", 64) })
		}, nil},
		{"chunk hash wrong", DataFile, func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *Manifest) { m.File(DataFile).Chunks[0] = strings.Repeat("a", 64) })
		}, nil},
		{"epoch does not match id", ManifestFile, func(t *testing.T, dir string) { editManifestRaw(t, dir, func(m *Manifest) { m.Epoch++ }) }, nil},
		{"seq does not match id", ManifestFile, func(t *testing.T, dir string) { editManifestRaw(t, dir, func(m *Manifest) { m.CoversThroughSeq = 7 }) }, nil},
		{"id of other files", ManifestFile, func(t *testing.T, dir string) {
			editManifestRaw(t, dir, func(m *Manifest) { m.SnapshotID = "e0-s0-000000000000" })
		}, nil},
		{"batch count wrong", DataFile, func(t *testing.T, dir string) { editManifest(t, dir, func(m *Manifest) { m.Batches++ }) }, nil},
		{"series count wrong", IndexFile, func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *Manifest) { m.Series++; m.HotSeries++ })
		}, nil},
		{"row count wrong", IndexFile, func(t *testing.T, dir string) { editManifest(t, dir, func(m *Manifest) { m.Rows-- }) }, nil},
		{"period type wrong", IndexFile, func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *Manifest) { m.PeriodType = PeriodTimestamp })
		}, nil},
	}
	for _, c := range cases {
		if c.versions != nil && !slices.Contains(c.versions, version) {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			dir := copyDir(t, src)
			c.mutate(t, dir)
			_, err := Verify(dir)
			if err == nil {
				t.Fatal("Verify passed")
			}
			wantCorruption(t, err, c.file)
		})
	}
}

// scaled scales a loop count down under the race detector.
func scaled(n int) int {
	if raceEnabled {
		return max(1, n/6)
	}
	return n
}

func rm(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func put(t *testing.T, dir, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// truncate changes a file's size by delta bytes.
func truncate(t *testing.T, dir, name string, delta int64) {
	t.Helper()
	st, err := os.Stat(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, name), st.Size()+delta); err != nil {
		t.Fatal(err)
	}
}

// editManifest rewrites manifest.json after edit, with a snapshot id that
// matches the edited manifest so that only the intended problem remains.
func editManifest(t *testing.T, dir string, edit func(*Manifest)) {
	t.Helper()
	editManifestRaw(t, dir, func(m *Manifest) {
		edit(m)
		m.SnapshotID = snapshotID(m)
	})
}

// editManifestRaw rewrites manifest.json after edit and nothing else.
func editManifestRaw(t *testing.T, dir string, edit func(*Manifest)) {
	t.Helper()
	var m Manifest
	if err := json.Unmarshal(readFile(t, dir, ManifestFile), &m); err != nil {
		t.Fatal(err)
	}
	edit(&m)
	b, err := json.Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	put(t, dir, ManifestFile, b)
}

// rewriteHash edits a version 2 or 3 index.hash, then fixes its checksums and
// the manifest's entry, so that only the rebuilt comparison can catch it.
// rewriteHash4 is rewriteHash for a version 4 or 5 index.hash: edit sees the
// positions of the directory, the row table and the records, and both
// table checksums and the header's are recomputed.
func rewriteHash4(t *testing.T, dir string, edit func(b []byte, dirAt, posAt, recAt uint64)) {
	t.Helper()
	b := readFile(t, dir, HashFile)
	if v := binary.LittleEndian.Uint32(b[8:]); v != hashVersion4 && v != hashVersion5 {
		t.Fatalf("index.hash version %d, want 4 or 5", v)
	}
	k, n, nb := binary.LittleEndian.Uint32(b[12:]), binary.LittleEndian.Uint32(b[16:]), binary.LittleEndian.Uint32(b[24:])
	dirAt, posAt, recAt, _ := hotLayout4(uint64(k), uint64(n), uint64(nb))
	edit(b, dirAt, posAt, recAt)
	binary.LittleEndian.PutUint32(b[20:], crc32.Checksum(b[dirAt:recAt], castagnoli))
	binary.LittleEndian.PutUint32(b[28:], hotCRC(b, dirAt, recAt))
	binary.LittleEndian.PutUint32(b[60:], crc32.Checksum(b[:60], castagnoli))
	putHash(t, dir, b)
}

func rewriteHash(t *testing.T, dir string, edit func(b []byte, recAt uint64)) {
	t.Helper()
	b := readFile(t, dir, HashFile)
	if binary.LittleEndian.Uint32(b[8:]) >= hashVersion4 {
		rewriteHash4(t, dir, func(b []byte, _, _, recAt uint64) { edit(b, recAt) })
		return
	}
	log2, n, nb := binary.LittleEndian.Uint32(b[12:]), binary.LittleEndian.Uint32(b[16:]), binary.LittleEndian.Uint32(b[24:])
	stride := uint64(HotRecordSize)
	if binary.LittleEndian.Uint32(b[8:]) == hashVersion3 {
		stride = uint64(binary.LittleEndian.Uint32(b[36:]))
	}
	slotAt, recAt, _ := hotLayout(uint64(log2), uint64(n), uint64(nb), stride)
	edit(b, recAt)
	binary.LittleEndian.PutUint32(b[28:], hotCRC(b, slotAt, recAt))
	binary.LittleEndian.PutUint32(b[60:], crc32.Checksum(b[:60], castagnoli))
	putHash(t, dir, b)
}

// putHash replaces dir's index.hash with b and its entry in the manifest.
func putHash(t *testing.T, dir string, b []byte) {
	t.Helper()
	put(t, dir, HashFile, b)
	fi, err := HashFileInfo(filepath.Join(dir, HashFile))
	if err != nil {
		t.Fatal(err)
	}
	editManifest(t, dir, func(m *Manifest) { *m.File(HashFile) = fi })
}
