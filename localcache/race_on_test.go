//go:build race

package localcache_test

const raceEnabled = true
