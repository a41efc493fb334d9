package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/op-stack/executor/auth"
)

// A route registered without an access rule, or a rule left without its
// route, stops the server from being built.
func TestRouteRulesCoverEveryRoute(t *testing.T) {
	rules := map[string]rule{"GET /a": {scope: auth.ScopeRunsRead}, "GET /gone": {scope: auth.ScopeRunsRead}}
	routes := gin.RoutesInfo{{Method: "GET", Path: "/a"}, {Method: "POST", Path: "/new"}}
	defer func() {
		msg, _ := recover().(string)
		if !strings.Contains(msg, "POST /new") || !strings.Contains(msg, "GET /gone") {
			t.Fatalf("panic %q, want it to name POST /new and GET /gone", msg)
		}
	}()
	checkRouteRules(routes, rules)
	t.Fatal("no panic")
}

// The server's own routes all have rules (NewServer would panic), and the
// table has no rule for a route that does not exist.
func TestServerRoutesHaveRules(t *testing.T) {
	s := NewServer(Options{})
	for _, r := range s.Routes() {
		if _, ok := s.rules[r.Method+" "+r.Path]; !ok {
			t.Errorf("%s %s has no rule", r.Method, r.Path)
		}
	}
}

func TestBearer(t *testing.T) {
	for h, want := range map[string]string{"Bearer osk_x": "osk_x", "bearer  osk_y ": "osk_y", "Basic abc": "", "Bearer ": "", "": "", "osk_z": ""} {
		req := httptestRequest(h)
		got, err := bearer(req)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("Authorization %q: %q, %v; want %q", h, got, err, want)
		}
	}
}

func httptestRequest(authorization string) *http.Request {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	return req
}
