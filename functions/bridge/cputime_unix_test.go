//go:build unix

package bridge

import (
	"syscall"
	"time"
)

// cpuTime is the process's user+system CPU time: benchmarks report it
// beside wall time, because on a shared machine wall time measures the
// neighbours too.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
