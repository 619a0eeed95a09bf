package format

import "testing"

// TestValidDatasetNamePortable: names a Windows or macOS companion cannot
// hold as a directory are refused; ordinary names stay valid.
func TestValidDatasetNamePortable(t *testing.T) {
	for _, bad := range []string{"CON", "con", "Nul", "aux", "PRN", "com1", "COM9", "lpt1", "LPT0", "nul.txt", "CON.tar.gz", "com3.csv",
		"a.", "prices.", "a b", "a ", " a", ".hidden", "", "a/b", `a\b`} {
		if err := ValidDatasetName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, good := range []string{"a", "A", "eia", "prices.v2", "conv", "console", "com10", "lpt", "com", "nul_x", "auxiliary", "x.con", "COM1x"} {
		if err := ValidDatasetName(good); err != nil {
			t.Errorf("%q refused: %v", good, err)
		}
	}
}
