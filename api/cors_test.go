package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/op-stack/executor/models"
)

func corsEngine(origins []string) *gin.Engine {
	s := newBareServer()
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.Use(markDialect, corsMiddleware(origins))
	r.NoMethod(func(c *gin.Context) {
		s.writeError(c, models.Errorf(codeMethodNotAllowed, "no %s here", c.Request.Method))
	})
	r.POST(ExecutorPrefix+"/runs/start", func(c *gin.Context) {
		c.Header("Retry-After", "1")
		ok(c, nil)
	})
	r.GET(V1Prefix+"/executions/:id", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"success": true}) })
	return r
}

func preflight(r http.Handler, origin, method, headers string) *httptest.ResponseRecorder {
	h := http.Header{"Origin": {origin}, "Access-Control-Request-Method": {method}}
	if headers != "" {
		h.Set("Access-Control-Request-Headers", headers)
	}
	return serve(r, http.MethodOptions, ExecutorPrefix+"/runs/start", "", h)
}

const appOrigin = "https://app.example.com"

func TestCORSAllowedOrigin(t *testing.T) {
	r := corsEngine([]string{appOrigin, "http://localhost:3000"})

	w := preflight(r, appOrigin, http.MethodPost, "authorization,content-type,idempotency-key")
	if w.Code != http.StatusNoContent {
		t.Fatalf("preflight: status %d, want 204", w.Code)
	}
	if got := w.Header().Get("Access-Control-Allow-Origin"); got != appOrigin {
		t.Errorf("preflight Access-Control-Allow-Origin = %q", got)
	}
	allowHeaders := strings.ToLower(w.Header().Get("Access-Control-Allow-Headers"))
	for _, h := range []string{"authorization", "content-type", "idempotency-key", "last-event-id"} {
		if !strings.Contains(allowHeaders, h) {
			t.Errorf("Access-Control-Allow-Headers %q lacks %s", allowHeaders, h)
		}
	}
	if m := w.Header().Get("Access-Control-Allow-Methods"); !strings.Contains(m, "POST") || !strings.Contains(m, "GET") {
		t.Errorf("Access-Control-Allow-Methods = %q", m)
	}
	if w.Header().Get("Access-Control-Allow-Credentials") != "" {
		t.Error("credentials allowed")
	}

	w = serve(r, http.MethodPost, ExecutorPrefix+"/runs/start", `{}`, http.Header{"Origin": {appOrigin}, "Content-Type": {"application/json"}})
	if w.Code != http.StatusOK || w.Header().Get("Access-Control-Allow-Origin") != appOrigin {
		t.Fatalf("request: status %d, Access-Control-Allow-Origin %q", w.Code, w.Header().Get("Access-Control-Allow-Origin"))
	}
	expose := strings.ToLower(w.Header().Get("Access-Control-Expose-Headers"))
	if !strings.Contains(expose, "retry-after") || !strings.Contains(expose, "idempotent-replayed") {
		t.Errorf("Access-Control-Expose-Headers = %q", expose)
	}
	if !strings.Contains(w.Header().Get("Vary"), "Origin") {
		t.Errorf("Vary = %q, want Origin", w.Header().Get("Vary"))
	}

	w = serve(r, http.MethodGet, V1Prefix+"/executions/e1", "", http.Header{"Origin": {"http://localhost:3000"}})
	if w.Code != http.StatusOK || w.Header().Get("Access-Control-Allow-Origin") != "http://localhost:3000" {
		t.Errorf("second origin: status %d, Access-Control-Allow-Origin %q", w.Code, w.Header().Get("Access-Control-Allow-Origin"))
	}
}

func TestCORSOtherOrigins(t *testing.T) {
	for name, origins := range map[string][]string{"allow-list": {appOrigin}, "none (default)": nil} {
		t.Run(name, func(t *testing.T) {
			r := corsEngine(origins)
			// Near misses of the allowed origin count as others.
			for _, origin := range []string{"https://evil.example.com", "http://app.example.com", "https://app.example.com.evil.net", "https://app.example.com:8443", "null"} {
				w := preflight(r, origin, http.MethodPost, "content-type")
				if w.Code != http.StatusForbidden || w.Header().Get("Access-Control-Allow-Origin") != "" {
					t.Errorf("preflight from %s: status %d, Access-Control-Allow-Origin %q; want 403 without", origin, w.Code, w.Header().Get("Access-Control-Allow-Origin"))
				}
				w = serve(r, http.MethodGet, V1Prefix+"/executions/e1", "", http.Header{"Origin": {origin}})
				for k := range w.Header() {
					if strings.HasPrefix(k, "Access-Control-") {
						t.Errorf("request from %s got %s", origin, k)
					}
				}
			}
			// Not a CORS request: untouched.
			w := serve(r, http.MethodPost, ExecutorPrefix+"/runs/start", `{}`, http.Header{"Content-Type": {"application/json"}})
			if w.Code != http.StatusOK || w.Header().Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("no Origin: status %d, headers %v", w.Code, w.Header())
			}
			// A plain OPTIONS (no preflight) reaches the router.
			if w := serve(r, http.MethodOptions, ExecutorPrefix+"/runs/start", "", http.Header{"Origin": {"https://evil.example.com"}}); w.Code != http.StatusMethodNotAllowed {
				t.Errorf("plain OPTIONS: status %d, want the router's 405", w.Code)
			}
		})
	}
}

func TestCORSSameOriginIsNotCrossOrigin(t *testing.T) {
	r := corsEngine(nil)
	req := httptest.NewRequest(http.MethodOptions, ExecutorPrefix+"/runs/start", nil)
	req.Host = "api.example.com"
	req.Header.Set("Origin", "https://api.example.com")
	req.Header.Set("Access-Control-Request-Method", "POST")
	w := httptest.NewRecorder()
	r.ServeHTTP(w, req)
	if w.Code == http.StatusForbidden {
		t.Error("a same-origin OPTIONS was refused as a cross-origin preflight")
	}
}
