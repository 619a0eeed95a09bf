package client

import (
	"math/rand/v2"
	"time"
)

// backoff is full jitter: uniform in [0, min(max, min*2^attempts)].
func (e *Engine) backoff() time.Duration {
	ceil := e.opts.MinBackoff << min(e.attempts, 20)
	if ceil > e.opts.MaxBackoff || ceil <= 0 {
		ceil = e.opts.MaxBackoff
	}
	e.attempts++
	return time.Duration(rand.Int64N(int64(ceil) + 1))
}

// retryDelay is the wait before the n-th retry of a failing apply:
// exponential between MinBackoff and MaxBackoff with equal jitter (at
// least half the step, so a failing disk is never retried in a loop).
func (e *Engine) retryDelay(n int) time.Duration {
	ceil := e.opts.MinBackoff << min(n-1, 20)
	if ceil > e.opts.MaxBackoff || ceil <= 0 {
		ceil = e.opts.MaxBackoff
	}
	return ceil/2 + time.Duration(rand.Int64N(int64(ceil/2)+1))
}
