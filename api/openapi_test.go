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

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/api/openapi"
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

// TestOpenAPICoversEveryRoute: every route the router serves (both REST
// surfaces, the operations routes, /openapi.json itself) is in the
// document with its method, and the document describes no path or method
// the router does not serve.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	doc := loadOpenAPI(t)
	srv := api.NewServer(api.Options{
		Store: storetest.SQLite(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		MetricsHandler: http.NotFoundHandler(),
	})
	served := map[string]bool{}
	for _, r := range srv.Routes() {
		path := ginParam.ReplaceAllString(r.Path, "{$1}")
		key := r.Method + " " + path
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
	t.Logf("%d routes served, %d operations documented", len(served), documented)
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
