package server

import "net"

// serveForBench serves s as es serve does.
func serveForBench(s *Server, ln net.Listener) (stop func()) {
	hs := s.HTTPServer()
	go hs.Serve(s.LimitListener(ln))
	return func() { hs.Close() }
}
