//go:build race

package format

// raceEnabled scales the exhaustive loops down under the race detector,
// which makes them several times slower without finding more there.
const raceEnabled = true
