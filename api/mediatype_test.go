package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

func TestRequireJSON(t *testing.T) {
	s := newBareServer()
	r := gin.New()
	r.Use(markDialect, s.requireJSON())
	echo := func(c *gin.Context) {
		b, _ := io.ReadAll(c.Request.Body)
		c.JSON(http.StatusOK, gin.H{"code": 0, "read": len(b)})
	}
	r.POST(ExecutorPrefix+"/runs/start", echo)
	r.PUT(V1Prefix+"/hierarchical-teams/:id", echo)
	r.POST(V1Prefix+"/executions/:id/cancel", echo)
	r.GET(ExecutorPrefix+"/runs/:id/stream", echo)

	const body = `{"hierarchy_id":"h1"}`
	for _, tc := range []struct {
		name, method, path, contentType, body string
		chunked                               bool
		want                                  int
		mention                               string
	}{
		{"json", http.MethodPost, ExecutorPrefix + "/runs/start", "application/json", body, false, 200, ""},
		{"json utf-8", http.MethodPost, ExecutorPrefix + "/runs/start", "application/json; charset=utf-8", body, false, 200, ""},
		{"json UTF-8 upper case", http.MethodPost, ExecutorPrefix + "/runs/start", "Application/JSON; Charset=UTF-8", body, false, 200, ""},
		{"json chunked", http.MethodPost, ExecutorPrefix + "/runs/start", "application/json", body, true, 200, ""},
		{"no body no type", http.MethodPost, V1Prefix + "/executions/e1/cancel", "", "", false, 200, ""},
		{"no body text/plain", http.MethodPost, V1Prefix + "/executions/e1/cancel", "text/plain", "", false, 200, ""},
		{"GET", http.MethodGet, ExecutorPrefix + "/runs/r1/stream", "", "", false, 200, ""},
		{"text/plain", http.MethodPost, ExecutorPrefix + "/runs/start", "text/plain", body, false, 415, `"text/plain"`},
		{"text/plain chunked", http.MethodPost, ExecutorPrefix + "/runs/start", "text/plain;charset=utf-8", body, true, 415, `"text/plain"`},
		{"form", http.MethodPost, ExecutorPrefix + "/runs/start", "application/x-www-form-urlencoded", "a=b", false, 415, "application/x-www-form-urlencoded"},
		{"multipart", http.MethodPost, ExecutorPrefix + "/runs/start", "multipart/form-data; boundary=x", "--x--", false, 415, "multipart/form-data"},
		{"missing type", http.MethodPost, ExecutorPrefix + "/runs/start", "", body, false, 415, "no Content-Type"},
		{"malformed type", http.MethodPost, ExecutorPrefix + "/runs/start", "application/json; charset", body, false, 415, "malformed"},
		{"latin-1", http.MethodPost, ExecutorPrefix + "/runs/start", "application/json; charset=iso-8859-1", body, false, 415, "iso-8859-1"},
		{"json-ish", http.MethodPost, ExecutorPrefix + "/runs/start", "application/jsonp", body, false, 415, "application/jsonp"},
		{"PUT v1 text", http.MethodPut, V1Prefix + "/hierarchical-teams/t1", "text/plain", body, false, 415, "text/plain"},
		{"PUT v1 json", http.MethodPut, V1Prefix + "/hierarchical-teams/t1", "application/json", body, false, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rd io.Reader
			if tc.body != "" {
				rd = strings.NewReader(tc.body)
				if tc.chunked {
					rd = io.MultiReader(rd) // hides the length
				}
			}
			req := httptest.NewRequest(tc.method, tc.path, rd)
			if tc.chunked {
				req.ContentLength = -1
				req.TransferEncoding = []string{"chunked"}
			}
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			w := httptest.NewRecorder()
			r.ServeHTTP(w, req)
			if w.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.want, w.Body.String())
			}
			if tc.want != 415 {
				return
			}
			e := decodeError(t, w)
			msg, code := e.Message, e.ErrorCode
			if strings.HasPrefix(tc.path, V1Prefix) {
				msg, code = e.Error.Message, e.Code.(string)
			}
			if code != "UNSUPPORTED_MEDIA_TYPE" || !strings.Contains(msg, tc.mention) {
				t.Errorf("code %s, message %q; want UNSUPPORTED_MEDIA_TYPE naming %s", code, msg, tc.mention)
			}
		})
	}
}
