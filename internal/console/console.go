// Package console is the operator console: a web page, served by the HTTP
// listener at every path outside /v1, that shows the fleet live (workers,
// devices, leases, waiting requests, what needs attention, events) from
// the same /v1 API and event stream any client reads, with an operator
// token. Its files are embedded in the binary and use no other origin; the
// Content-Security-Policy says so to the browser.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var files embed.FS

// Policy is the Content-Security-Policy every console response carries:
// its own scripts, styles and images only, calls to its own origin only,
// never framed.
const Policy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the console's files. A path that names no file (a page
// of the console, such as /workers/w1) is answered with the page itself,
// which routes in the browser; a missing asset (a path with an extension)
// is a 404.
func Handler() http.Handler {
	root, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	static := http.FileServerFS(root)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", Policy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		// The files change with the binary: the browser asks again each
		// time and gets a 304 when nothing changed.
		h.Set("Cache-Control", "no-cache")
		name := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
		if name == "" || name == "index.html" {
			serveIndex(w, r, root)
			return
		}
		if _, err := fs.Stat(root, name); err != nil {
			if path.Ext(name) != "" {
				http.NotFound(w, r)
				return
			}
			serveIndex(w, r, root)
			return
		}
		static.ServeHTTP(w, r)
	})
}

// serveIndex answers with the page, whatever path routed to it (the file
// server would redirect /index.html to /).
func serveIndex(w http.ResponseWriter, r *http.Request, root fs.FS) {
	b, err := fs.ReadFile(root, "index.html")
	if err != nil {
		http.Error(w, "the console is not in this build", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(b)
}
