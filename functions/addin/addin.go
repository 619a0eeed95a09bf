// Package addin is the EnergyScope Office add-in for Excel: the XML
// manifest, the custom functions (functions.js, and functions.json
// generated from its JSDoc), the task pane and the icons, embedded so that
// the bridge (functions/bridge) serves them from https://127.0.0.1:PORT/addin/.
// Serving the add-in from the bridge makes it work offline and keeps its
// calls same-origin.
//
// The files are plain browser JavaScript without a build step. The npm
// project beside them (package.json, package-lock.json) is tooling only:
// custom-functions-metadata to regenerate functions.json (`npm ci && npm run
// metadata`), playwright-core for the browser test, and node tests in test/.
// The Go tests check that functions.json is up to date and that the
// manifest is well formed.
package addin

//go:generate go run gen_icons.go

import "embed"

// FS holds the add-in's files.
//
//go:embed manifest.xml functions.js functions.json taskpane.html taskpane.js taskpane.css stub.js icons/*.png
var FS embed.FS

// DefaultOrigin is the bridge origin written in manifest.xml; the bridge
// replaces it with its actual origin when it serves the manifest.
const DefaultOrigin = "https://127.0.0.1:17825"

// ID is the add-in's manifest Id. It must never change: Excel stores it
// with every workbook that uses the functions.
const ID = "6f1c2a8e-4b7d-4e95-9a53-0c2d8e7f1b46"
