// Package console serves Roster's web console: static pages embedded in the binary
// (HTML, CSS and JavaScript modules, no external assets) that read and change the
// registry through the native REST API only. The pages carry no data, so they are served
// to anyone; every call they make presents the operator's token like any other client.
//
// Layout: /ui/ and every /ui/ path that is not an asset answer index.html, whose
// script routes by the path (/ui/services, /ui/namespaces/{ns}/groups/{group}/services/{service},
// /ui/cluster, /ui/snapshot, /ui/login); /ui/assets/ holds the CSS and the modules.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

// Prefix is the path the console is served under.
const Prefix = "/ui/"

// ContentSecurityPolicy is sent with every console response: the pages load scripts,
// styles, images and data from their own origin only, run no inline script, and may
// not be framed.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

//go:embed ui
var files embed.FS

// contentTypes are the types of the embedded files, by extension; a file of any other
// extension is not served. Fixed here rather than taken from the system's MIME table.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

// asset is one embedded file, ready to serve.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the console. Build it with New.
type Handler struct {
	assets map[string]asset // by path below /ui/, "assets/app.js"
	index  asset
}

// New returns the console's handler, which answers the paths below Prefix (it must be
// mounted there, with the prefix still in the request's path).
func New() (*Handler, error) {
	h := &Handler{assets: map[string]asset{}}
	err := fs.WalkDir(files, "ui", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ct, ok := contentTypes[path.Ext(p)]
		if !ok {
			return nil
		}
		body, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		h.assets[strings.TrimPrefix(p, "ui/")] = asset{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		return nil, err
	}
	h.index = h.assets["index.html"]
	if h.index.body == nil {
		return nil, fs.ErrNotExist
	}
	return h, nil
}

// ServeHTTP answers GET and HEAD: an asset below /ui/assets/ (404 when there is none),
// else index.html, whose script shows the view the path names.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setHeaders(w.Header())
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	rel, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	a := h.index
	if strings.HasPrefix(rel, "assets/") {
		if a, ok = h.assets[rel]; !ok {
			http.NotFound(w, r)
			return
		}
	}
	w.Header().Set("Content-Type", a.contentType)
	w.Header().Set("ETag", a.etag)
	// The files change only with the binary: a browser keeps them but asks every time
	// whether they are still current (a 304 when they are).
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}

// setHeaders sets the security headers of every console response.
func setHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

// RedirectToPrefix answers /ui with a redirect to /ui/.
func RedirectToPrefix(w http.ResponseWriter, r *http.Request) {
	setHeaders(w.Header())
	http.Redirect(w, r, Prefix, http.StatusFound)
}

// WantsPage reports whether a request is a browser's page navigation: its Accept
// header names text/html.
func WantsPage(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/html" {
				return true
			}
		}
	}
	return false
}
