package bridge

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/energyscope/energyscope/functions/addin"
)

// addinFiles are the add-in's files as served, manifest.xml rendered for
// the bridge's origin, taskpane.html carrying the token, each other file
// with its ETag.
type addinFiles struct {
	files map[string]addinFile
}

type addinFile struct {
	body   []byte
	ctype  string
	etag   string
	secret bool // holds the token: never stored by a cache
}

// tokenMeta is the empty token slot in taskpane.html, the page Excel loads
// as the add-in's shared runtime (functions.js runs in it). The bridge
// fills it in, so the add-in has the token without any step by the user:
// the page is served only over connections that passed the same-user
// check, and another web page cannot read it (no CORS on /addin/, Host
// checked against DNS rebinding).
const tokenMeta = `<meta name="es-bridge-token" content="">`

// contentTypes: explicit, because on Windows mime.TypeByExtension reads the
// registry, which may say text/plain for .js.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".json": "application/json",
	".css":  "text/css; charset=utf-8",
	".xml":  "application/xml",
	".png":  "image/png",
}

func newAddinFiles(origin, token string) (*addinFiles, error) {
	a := &addinFiles{files: map[string]addinFile{}}
	err := fs.WalkDir(addin.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(addin.FS, p)
		if err != nil {
			return err
		}
		secret := false
		switch p {
		case "manifest.xml":
			b = bytes.ReplaceAll(b, []byte(addin.DefaultOrigin), []byte(origin))
		case "taskpane.html":
			if bytes.Count(b, []byte(tokenMeta)) != 1 {
				return fmt.Errorf("bridge: addin/taskpane.html must hold %s once", tokenMeta)
			}
			b = bytes.Replace(b, []byte(tokenMeta), []byte(`<meta name="es-bridge-token" content="`+html.EscapeString(token)+`">`), 1)
			secret = true
		}
		sum := sha256.Sum256(b)
		a.files[p] = addinFile{body: b, ctype: contentTypes[path.Ext(p)], etag: `"` + hex.EncodeToString(sum[:8]) + `"`, secret: secret}
		return nil
	})
	return a, err
}

// serve is GET /addin/...: no token needed (taskpane.html hands it out),
// but only the bridge's user gets them (checkPeer). They are
// revalidated on every load (no-cache + ETag) so an upgraded companion is
// picked up by Excel at once.
func (a *addinFiles) serve(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/addin/")
	if name == "" {
		name = "taskpane.html"
	}
	f, ok := a.files[name]
	if !ok || f.ctype == "" {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", f.ctype)
	if f.secret {
		h.Set("Cache-Control", "no-store")
		w.Write(f.body)
		return
	}
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", f.etag)
	if r.Header.Get("If-None-Match") == f.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Write(f.body)
}

// Manifest returns manifest.xml as served by this bridge.
func (s *Server) Manifest() []byte { return s.addin.files["manifest.xml"].body }
