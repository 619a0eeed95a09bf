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
// Security model, in one paragraph: the server listens on 127.0.0.1 only.
// A request whose Host is not 127.0.0.1:PORT, localhost:PORT or
// [::1]:PORT is refused with 421 (DNS rebinding: a hostile name resolved to
// 127.0.0.1 still carries its own Host). A request with an Origin header is
// a browser's: it passes only if the origin is the bridge's own (the
// add-in, which the bridge serves, is same-origin) or listed in
// Options.AllowOrigins, else 403; such requests need no token, because a
// browser does not let a page forge Origin. A request without Origin passes
// if the browser marked it Sec-Fetch-Site: same-origin; any other client
// (scripts, curl, Power Query) must send Authorization: Bearer TOKEN, the
// per-install token in <home>/bridge.json (mode 0600), else 401. CORS and
// Private Network Access preflights are answered for allowed origins only.
// The add-in's static files need no credentials. Loopback is shared by all
// users of the machine: a local process that speaks HTTP can claim to be a
// same-origin browser, so the token and the Origin rule keep other web
// pages out, not other local accounts (whose files the OS protects).
package bridge
