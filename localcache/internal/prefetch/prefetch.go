// Package prefetch asks the CPU to start loading the cache lines of a
// range of memory that will be read next, without waiting for them
// (PREFETCHT0 on amd64, PRFM PLDL1KEEP on arm64, nothing elsewhere). A
// lookup gives it the points it returns: the caller's reads of them then
// find lines already on their way, where the hardware prefetcher would
// start fetching ahead only after the first few misses (BENCHMARKS.md
// "Prefetching the points").
//
// A prefetch never faults, whatever the address.
package prefetch
