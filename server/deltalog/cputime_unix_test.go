//go:build unix

package deltalog

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) the test process has used:
// benchmarks report it beside wall time, which on a shared machine is
// mostly other processes' noise (fsync latency above all).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
