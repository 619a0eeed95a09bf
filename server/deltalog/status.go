package deltalog

import "github.com/nats-io/nats.go"

// Connected reports whether the Log's connection to NATS is up, and its
// state when it is not ("RECONNECTING", "CLOSED", ...). While it is down
// a follower receives nothing and does not know it: an ordered
// consumer waits for the reconnection (server /healthz reports it as a
// stream wait).
func (l *Log) Connected() (bool, string) {
	st := l.nc.Status()
	return st == nats.CONNECTED, st.String()
}
