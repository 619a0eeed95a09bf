// Command memlat times a chain of dependent reads at random 64-byte lines
// of 1.5 GiB of anonymous memory, in 2 MiB pages or in 4 KiB ones: what a
// cache miss and its TLB miss cost on this machine (BENCHMARKS.md "Warming
// large snapshots"):
//
//	cd bench && go run ./memlat huge && go run ./memlat small
package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] != "huge" && os.Args[1] != "small" {
		fmt.Fprintln(os.Stderr, "usage: memlat huge|small")
		os.Exit(2)
	}
	huge := os.Args[1] == "huge"
	const size = 1536 << 20
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		panic(err)
	}
	if huge {
		unix.Madvise(b, unix.MADV_HUGEPAGE)
	} else {
		unix.Madvise(b, unix.MADV_NOHUGEPAGE)
	}
	n := size / 64
	idx := make([]uint32, n)
	for i := range idx {
		idx[i] = uint32(i)
	}
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(n, func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
	p := unsafe.Pointer(unsafe.SliceData(b))
	for i := 0; i < n; i++ {
		*(*uint64)(unsafe.Add(p, uintptr(idx[i])*64)) = uint64(idx[(i+1)%n]) * 64
	}
	var off uint64
	const steps = 5_000_000
	t := time.Now()
	for range steps {
		off = *(*uint64)(unsafe.Add(p, uintptr(off)))
	}
	d := time.Since(t)
	// The huge pages the kernel gave (it may give fewer than asked).
	ah := ""
	sm, _ := os.ReadFile("/proc/self/smaps_rollup")
	for _, l := range strings.Split(string(sm), "\n") {
		if strings.HasPrefix(l, "AnonHugePages:") {
			ah = strings.Join(strings.Fields(l), " ")
		}
	}
	fmt.Printf("%s %.1f ns/access (%s; end %d)\n", os.Args[1], float64(d.Nanoseconds())/steps, ah, off)
}
