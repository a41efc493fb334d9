package api

import (
	"mime"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/op-stack/executor/models"
)

// requireJSON refuses a request body that is not JSON: a POST, PUT or
// PATCH with a body (a Content-Length above zero, or chunked) must say
// Content-Type: application/json, parameters allowed, a charset only if it
// is UTF-8; anything else gets 415 UNSUPPORTED_MEDIA_TYPE naming the type
// received. A request without a body passes whatever it says, as spec
// 001's POST /executions/{id}/cancel does. This also closes the
// cross-site "simple requests" (text/plain, form and multipart POSTs),
// which browsers send without a CORS preflight.
func (s *Server) requireJSON() gin.HandlerFunc {
	return func(c *gin.Context) {
		switch c.Request.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch:
		default:
			c.Next()
			return
		}
		// ContentLength is -1 when the length is not known (chunked, or an
		// HTTP/2 body without Content-Length): there is a body to come.
		if c.Request.ContentLength == 0 {
			c.Next()
			return
		}
		// memory/import reads JSON lines (docs/memory.md).
		if c.FullPath() == ExecutorPrefix+"/memory/import" && isJSONLines(c.GetHeader("Content-Type")) {
			c.Next()
			return
		}
		if err := checkJSONMediaType(c.GetHeader("Content-Type")); err != nil {
			s.writeError(c, err)
			return
		}
		c.Next()
	}
}

// checkJSONMediaType accepts application/json with an optional UTF-8
// charset.
func checkJSONMediaType(contentType string) error {
	if strings.TrimSpace(contentType) == "" {
		return models.Errorf(models.CodeUnsupportedMediaType, "the request body must be JSON (Content-Type: application/json), but no Content-Type was sent")
	}
	mediaType, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return models.Errorf(models.CodeUnsupportedMediaType, "the request body must be JSON (Content-Type: application/json), got the malformed Content-Type %q", clip(contentType, 100))
	}
	if mediaType != "application/json" {
		return models.Errorf(models.CodeUnsupportedMediaType, "the request body must be JSON (Content-Type: application/json), got %q", clip(mediaType, 100))
	}
	if cs, found := params["charset"]; found && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
		return models.Errorf(models.CodeUnsupportedMediaType, "the request body must be JSON in UTF-8, got charset %q", clip(cs, 100))
	}
	return nil
}

// clip cuts s to at most n bytes, so that an error message does not echo
// a huge header.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// isJSONLines accepts the media types of JSON lines.
func isJSONLines(contentType string) bool {
	mediaType, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mediaType == "application/x-ndjson" || mediaType == "application/jsonl" || mediaType == "application/x-jsonlines")
}
