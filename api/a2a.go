package api

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"
)

// A2APrefix is the path prefix of the hierarchies' A2A agents: the agent
// of hierarchy H has its JSON-RPC endpoint at /a2a/H and its card at
// /a2a/H/.well-known/agent-card.json (package a2aserve, docs/a2a.md).
const A2APrefix = "/a2a"

// a2aJSONRPC serves a hierarchy's A2A JSON-RPC endpoint. The route needs
// runs:read; a method that starts, answers or cancels a run needs
// runs:write, which the API route it calls checks (a2aserve calls the API
// in-process with the caller's credential).
func (s *Server) a2aJSONRPC(c *gin.Context) {
	s.a2a.ServeJSONRPC(c.Writer, c.Request, c.Param("hierarchy_id"))
}

// a2aCard serves a hierarchy's A2A agent card, whose endpoint URL is built
// from the request's own address (X-Forwarded-Proto and
// X-Forwarded-Host when a proxy sets them).
func (s *Server) a2aCard(c *gin.Context) {
	id := c.Param("hierarchy_id")
	s.a2a.ServeCard(c.Writer, c.Request, id, requestOrigin(c.Request)+A2APrefix+"/"+url.PathEscape(id))
}

// requestOrigin is the scheme and host a client reached this server at.
func requestOrigin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")); p == "http" || p == "https" {
		scheme = p
	}
	host := r.Host
	if h := strings.TrimSpace(r.Header.Get("X-Forwarded-Host")); h != "" && !strings.ContainsAny(h, "/ ,") {
		host = h
	}
	return scheme + "://" + host
}
