//go:build !linux

package xlsx_test

import "time"

// cpuTime is not measured off Linux.
func cpuTime() time.Duration { return -1 }
