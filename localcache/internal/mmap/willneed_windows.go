package mmap

// WillNeed is advice the Windows build does not give (see the unix build).
func WillNeed(b []byte) {}
