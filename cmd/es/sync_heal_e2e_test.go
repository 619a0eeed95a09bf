package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
)

func fileSHA(t *testing.T, p string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// servedSHA is the SHA-256 the manifest of the snapshot home serves of
// dataset gives its file name (a server home keeps it in its lake).
func servedSHA(t *testing.T, home, dataset, name string) [32]byte {
	t.Helper()
	st, err := openStore(home)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sts, err := st.Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range sts {
		if d.Name == dataset {
			var sum [32]byte
			if _, err := hex.Decode(sum[:], []byte(d.Manifest.File(name).SHA256)); err != nil {
				t.Fatal(err)
			}
			return sum
		}
	}
	t.Fatalf("%s does not serve %s", home, dataset)
	return [32]byte{}
}

// testE2EHealDamaged: a companion is SIGKILLed and one byte near the end
// of big's data.arrow is flipped (a disk error, a stray tool). Restarted,
// it opens (sizes and headers are fine) and goes live; its background
// scrub then finds the damaged chunk and marks big damaged. The sync
// engine notices, downloads big from the server again and installs it
// over the damage, while stocks keeps serving; then big follows live rows.
func testE2EHealDamaged(t *testing.T, big *bigDataset) {
	srv := newE2EServer(t, big.home(t))
	cookStocks(t, srv.home)
	srv.start("127.0.0.1:0")
	h := srv.head("big")
	c := newE2ECompanion(t, "companion", srv.url, srv.read)
	c.start()
	c.waitState("big", h.Snapshot, 0, 120*time.Second)
	c.waitState("stocks", srv.head("stocks").Snapshot, 0, 60*time.Second)
	msft := esGet(t, c.home, "MSFT")
	c.p.kill()

	rel := filepath.Join(localcache.DatasetsDir, "big", format.SnapshotsDir, h.Snapshot, format.DataFile)
	want := servedSHA(t, srv.home, "big", format.DataFile) // the server's copy is in its lake
	data := filepath.Join(c.home, rel)
	f, err := os.OpenFile(data, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	b := []byte{0}
	off := st.Size() - 4096 // in the last chunk: the scrub reaches it last
	f.ReadAt(b, off)
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if fileSHA(t, data) == want {
		t.Fatal("the flip did not change the file")
	}

	c.start()
	deadline := time.Now().Add(90 * time.Second)
	for fileSHA(t, data) != want {
		if got := esGet(t, c.home, "MSFT"); got != msft {
			t.Fatalf("stocks stopped serving while big healed:\n%s", lastBytes(got, 300))
		}
		if time.Now().After(deadline) {
			t.Fatalf("big's data.arrow not downloaded again within 90 s; companion log:\n%s", lastBytes(c.p.stderr.String(), 3000))
		}
		time.Sleep(250 * time.Millisecond)
	}
	last, err := srv.post("big", []tickRow{tickRowN(0)})
	if err != nil {
		t.Fatal(err)
	}
	c.waitState("big", h.Snapshot, last, 60*time.Second)
	checkSameDataset(t, srv.home, c, "big", []string{"TICK.0"})
	if !bytes.Equal([]byte(esGet(t, c.home, "MSFT")), []byte(msft)) {
		t.Fatal("stocks changed")
	}
}
