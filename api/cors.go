package api

import (
	"net/http"
	"slices"
	"time"

	"github.com/gin-contrib/cors"
	"github.com/gin-gonic/gin"
)

// CORS headers a browser client may send and read.
var (
	corsAllowHeaders  = []string{"Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID"}
	corsExposeHeaders = []string{"Retry-After", idempotentReplayedHeader}
	corsAllowMethods  = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete}
)

// corsMiddleware lets web pages of the listed origins (exact
// scheme://host[:port], as CORS_ALLOWED_ORIGINS gives them) call the API
// from a browser. It goes before authentication, since a preflight
// carries no credentials.
//
//   - A request without Origin, or from the API's own origin, is not a
//     CORS request: it passes untouched.
//   - From an allowed origin: a preflight is answered 204 with the allowed
//     methods and headers; other requests pass with
//     Access-Control-Allow-Origin and the exposed headers.
//   - From any other origin: a preflight is refused with 403; other
//     requests pass without CORS headers, so the browser keeps the response
//     from the page. (Refusing them too would break a same-origin page
//     behind a proxy that rewrites Host, since browsers send Origin on
//     same-origin POSTs.) Cross-site requests that need no preflight can
//     only be GET, HEAD or POST with a form or text body, and the latter is
//     refused by requireJSON.
//
// With no origin listed (the default) no request gets CORS headers and
// every preflight is refused. Credentials (cookies) are never allowed: the
// API authenticates with the Authorization header.
func corsMiddleware(origins []string) gin.HandlerFunc {
	allowed := slices.Clone(origins)
	var withHeaders gin.HandlerFunc
	if len(allowed) > 0 {
		withHeaders = cors.New(cors.Config{
			// The origin is checked below, exactly; the library is only
			// asked to write the headers.
			AllowOriginFunc: func(string) bool { return true },
			AllowMethods:    corsAllowMethods,
			AllowHeaders:    corsAllowHeaders,
			ExposeHeaders:   corsExposeHeaders,
			MaxAge:          10 * time.Minute,
		})
	}
	return func(c *gin.Context) {
		origin := c.GetHeader("Origin")
		if origin == "" {
			c.Next()
			return
		}
		if slices.Contains(allowed, origin) {
			withHeaders(c)
			if !c.IsAborted() {
				c.Next()
			}
			return
		}
		if len(allowed) > 0 {
			// Responses differ by origin: caches must keep them apart.
			c.Header("Vary", "Origin")
		}
		if isPreflight(c.Request) && !sameOrigin(c.Request, origin) {
			c.AbortWithStatus(http.StatusForbidden)
			return
		}
		c.Next()
	}
}

// isPreflight tells a CORS preflight from a plain OPTIONS request.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
}

// sameOrigin reports whether origin is the API's own, as far as the Host
// header tells.
func sameOrigin(r *http.Request, origin string) bool {
	return origin == "http://"+r.Host || origin == "https://"+r.Host
}
