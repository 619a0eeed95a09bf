// Package bridge is the localhost HTTPS server between Excel and the
// store: the Office add-in (package addin, whose files it serves) posts
// batches of ES.* calls to it, subscribes to live values over a websocket,
// and reads the companion's status. It is started by `es companion` and by
// the desktop app; it knows the store only through functions.Source and
// the two small interfaces it declares (StatusSource, ChangeFeed).
//
// What it is not: it gives the functions no meaning (package functions
// does) and holds no data; it does not sync.
//
// Map of the package:
//
//   - bridge.go: Options, Start, Server; routes; the security checks every
//     request passes (Host, Origin, token, CORS and Private Network Access
//     preflights, body and time limits); bridge.json.
//   - peer.go, peer_linux.go, peer_windows.go, peer_other.go: the same-user
//     check of each connection; Metrics.
//   - certs.go: the local CA and the loopback-only server certificate.
//   - decode.go: the /v1/calc request reader (hand-written, fuzzed).
//   - calc.go: answering a batch within a cell budget: evaluate (the meaning,
//     one call after another) and respond (big batches streamed: blocks
//     evaluated and encoded across cores, written in order).
//   - encode.go: the /v1/calc response writer (hand-written JSON, numbers
//     straight from functions.Grid).
//   - live.go: /v1/live, the websocket hub, and the polling fallback for
//     stores without a change feed.
//   - status.go: /v1/status.
//   - addin.go: the add-in's files, with manifest.xml rendered for the port.
//
// Security model. The server listens on 127.0.0.1 only, and loopback is
// shared by every account of the computer (a terminal server runs many
// analysts' Excel side by side), so:
//
//   - Same user (Linux, Windows): the first request of each connection asks
//     the OS who owns the client's end (Linux: the socket's uid, by the
//     netlink sock_diag query ss(8) uses, else from /proc/net/tcp{,6}; Windows: the owning PID from GetExtendedTcpTable,
//     then its token's user SID). Another user, or an owner the OS cannot
//     tell, gets 403 on every request of that connection, which is then
//     closed; this runs before anything else, the add-in's files included.
//     Elsewhere (macOS) there is no such check (PeerCheck is false).
//   - Host: not 127.0.0.1:PORT, localhost:PORT or [::1]:PORT is 421 (DNS
//     rebinding: a hostile name resolved to 127.0.0.1 still carries its own
//     Host).
//   - Origin: a request with one passes only if it is the bridge's own (the
//     add-in, which the bridge serves) or listed in Options.AllowOrigins,
//     else 403, so other web pages cannot use a token they do not have
//     anyway. CORS and Private Network Access preflights are answered for
//     allowed origins only.
//   - Token: every API call, the websocket included, needs Authorization:
//     Bearer TOKEN (or the subprotocol "bearer.TOKEN"), the per-install
//     token in <home>/bridge.json (mode 0600), else 401, whatever Origin or
//     Sec-Fetch-Site say: any local program can send those.
//
// The add-in gets the token with no step by the user: the bridge writes it
// into taskpane.html (the add-in's shared runtime, which loads
// functions.js) as <meta name="es-bridge-token">, served no-store. Where
// the same-user check exists only the bridge's user gets that page; other
// web pages cannot read it (no CORS on /addin/, Host checked). Where it
// does not (macOS), another local account could fetch the page and its
// token: there the OS's account separation is all that keeps it out.
package bridge
