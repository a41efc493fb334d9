// Package console is the service's web console: plain HTML, CSS and
// JavaScript modules, embedded in the binary, with no build step and no
// third-party front-end code. The API process serves it (Register) at
//
//	GET /            hierarchies: list, the editor (form and JSON), tree view
//	GET /runs        runs: list with filters, start a run
//	GET /runs/:id    one run, live: lanes per agent, tools, dispatch tree,
//	                 approvals, costs, steering, forks and follow-ups
//	GET /mcp-servers the tenant's MCP servers, read-only
//	GET /schedules   the tenant's schedules, read-only
//	GET /webhooks    the tenant's webhook endpoints and deliveries, read-only
//	GET /compare     two runs side by side, per agent (?a=<run>&b=<run>)
//	GET /console/*   the assets
//
// The pages hold no data: the page's scripts call the API itself, with the
// key the person gives (kept in sessionStorage, sent as a bearer token) and
// the run-scoped stream token for the event stream, so access control is
// the API's, route by route.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

//go:embed static
var static embed.FS

// AssetPrefix is the path under which the console's assets are served.
const AssetPrefix = "/console"

// ContentSecurityPolicy is sent with every console response: scripts,
// styles and connections from the service's own origin only, no inline
// script or style, no plugins, no framing, no form posted elsewhere.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Register adds the console's routes to r. None of them is under /api, so
// no API route is shadowed.
func Register(r gin.IRoutes) {
	assets, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	page, err := fs.ReadFile(assets, "index.html")
	if err != nil {
		panic(err)
	}
	files := http.StripPrefix(AssetPrefix, http.FileServerFS(assets))
	servePage := func(c *gin.Context) {
		secure(c.Writer.Header())
		c.Data(http.StatusOK, "text/html; charset=utf-8", page)
	}
	r.GET("/", servePage)
	r.GET("/runs", servePage)
	r.GET("/runs/:id", servePage)
	r.GET("/mcp-servers", servePage)
	r.GET("/schedules", servePage)
	r.GET("/webhooks", servePage)
	r.GET("/compare", servePage)
	r.GET("/memory", servePage)
	r.GET(AssetPrefix+"/*asset", func(c *gin.Context) {
		if strings.HasSuffix(c.Param("asset"), "/") {
			// No directory listings.
			c.Status(http.StatusNotFound)
			return
		}
		secure(c.Writer.Header())
		files.ServeHTTP(c.Writer, c.Request)
	})
}

// secure sets the headers every console response carries. The assets
// change with the binary, so browsers revalidate them (no-cache) instead
// of running an old script against a new API.
func secure(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
}
