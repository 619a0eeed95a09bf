//go:build unix

package lake

import (
	"syscall"
	"time"
)

// cpuTime is the process's user+system CPU time so far (benchmarks report
// CPU beside wall time: the machine they run on is shared).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
