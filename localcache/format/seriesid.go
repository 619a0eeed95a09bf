package format

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// MaxSeriesIDLen is the longest series id, in bytes, that cook and live
// ingest accept. One limit for both: a series cooked with a longer id could
// never be updated live.
const MaxSeriesIDLen = 1024

// ErrBadSeriesID is wrapped by ValidSeriesID's errors.
var ErrBadSeriesID = errors.New("bad series id")

// ValidSeriesID checks the rules every series id follows, whether it comes
// from a cooked file or a live update: 1..MaxSeriesIDLen bytes of valid
// UTF-8 without a NUL byte (which C strings, Excel and many tools cut
// at). Other characters, a quoted newline included, are the id as given.
func ValidSeriesID[T ~string | ~[]byte](id T) error {
	if len(id) == 0 {
		return fmt.Errorf("%w: empty", ErrBadSeriesID)
	}
	if len(id) > MaxSeriesIDLen {
		return fmt.Errorf("%w: %d bytes, longer than %d", ErrBadSeriesID, len(id), MaxSeriesIDLen)
	}
	ascii := true
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c == 0 {
			return fmt.Errorf("%w: NUL byte at byte %d", ErrBadSeriesID, i)
		}
		ascii = ascii && c < utf8.RuneSelf
	}
	if !ascii && !utf8.ValidString(string(id)) {
		return fmt.Errorf("%w: not valid UTF-8", ErrBadSeriesID)
	}
	return nil
}
