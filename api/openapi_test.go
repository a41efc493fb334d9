package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/gin-gonic/gin"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/api/openapi"
	"github.com/op-stack/executor/console"
	"github.com/op-stack/executor/store/storetest"
)

// loadOpenAPI loads and validates the embedded document.
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(openapi.YAML)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi.yaml is OpenAPI %s, want 3.1", doc.OpenAPI)
	}
	return doc
}

var ginParam = regexp.MustCompile(`:([A-Za-z_]+)`)

// consoleRoutes are the routes console.Register adds, read from a router
// that has only them ("METHOD /path" in gin's syntax).
func consoleRoutes(t *testing.T) map[string]bool {
	t.Helper()
	gin.SetMode(gin.TestMode)
	r := gin.New()
	console.Register(r)
	out := map[string]bool{}
	for _, route := range r.Routes() {
		out[route.Method+" "+route.Path] = true
	}
	if len(out) == 0 {
		t.Fatal("console.Register added no route")
	}
	return out
}

// TestOpenAPICoversEveryRoute: every route the router serves (both REST
// surfaces, the operations routes, /openapi.json itself) is in the
// document with its method, and the document describes no path or method
// the router does not serve. The web console's routes are the exception,
// and the document must not describe them: they serve the console's HTML
// page and its static assets to a browser, not API operations (no JSON,
// no envelope, no error codes), and the console's scripts are themselves
// clients of the documented API. A client generated from the document has
// no use for them, and `/console/*asset` (any depth of path) cannot be
// written as an OpenAPI path anyway.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	doc := loadOpenAPI(t)
	srv := api.NewServer(api.Options{
		Store: storetest.SQLite(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		MetricsHandler: http.NotFoundHandler(),
	})
	pages := consoleRoutes(t)
	served, consoleServed := map[string]bool{}, 0
	for _, r := range srv.Routes() {
		path := ginParam.ReplaceAllString(r.Path, "{$1}")
		key := r.Method + " " + path
		if pages[r.Method+" "+r.Path] {
			consoleServed++
			if item := doc.Paths.Find(path); item != nil && item.GetOperation(r.Method) != nil {
				t.Errorf("openapi.yaml describes %s, a web console route, which is not part of the API", key)
			}
			continue
		}
		served[key] = true
		item := doc.Paths.Find(path)
		if item == nil || item.GetOperation(r.Method) == nil {
			t.Errorf("the router serves %s, which openapi.yaml does not describe", key)
		}
	}
	documented := 0
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented++
			if !served[method+" "+path] {
				t.Errorf("openapi.yaml describes %s %s, which the router does not serve", method, path)
			}
		}
	}
	t.Logf("%d API routes served (and %d web console routes), %d operations documented", len(served), consoleServed, documented)
	if consoleServed != len(pages) {
		t.Errorf("the router serves %d of the console's %d routes", consoleServed, len(pages))
	}
	if len(served) < 40 {
		t.Errorf("only %d routes: the router's table was not read", len(served))
	}
}

// TestOpenAPIServed: GET /openapi.json serves the document as JSON,
// without a key even with access control on.
func TestOpenAPIServed(t *testing.T) {
	srv := httptest.NewServer(api.NewServer(api.Options{
		Store: storetest.SQLite(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Access: api.Access{Mode: api.AuthRequired},
	}).Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /openapi.json: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" || doc.Paths.Find("/api/executor/v1/runs/start") == nil || doc.Paths.Find("/api/v1/executions/{id}") == nil {
		t.Errorf("the served document is not the API's: openapi %q", doc.OpenAPI)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m["openapi"] != "3.1.0" {
		t.Errorf("not JSON: %v", err)
	}
}
