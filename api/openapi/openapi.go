// Package openapi holds the OpenAPI 3.1 document of the service's two REST
// surfaces (contract 002 under /api/executor/v1, spec 001 under /api/v1),
// embedded in the binary and served as JSON at GET /openapi.json. The
// tests of package api check that it names every route the router serves,
// and the end-to-end tests validate the responses they record against it.
package openapi

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	"go.yaml.in/yaml/v3"
)

// YAML is the document as written (api/openapi/openapi.yaml).
//
//go:embed openapi.yaml
var YAML []byte

var (
	jsonOnce sync.Once
	jsonDoc  []byte
	jsonErr  error
)

// JSON is the document as JSON, converted once.
func JSON() ([]byte, error) {
	jsonOnce.Do(func() {
		var doc any
		if err := yaml.Unmarshal(YAML, &doc); err != nil {
			jsonErr = fmt.Errorf("openapi.yaml: %w", err)
			return
		}
		jsonDoc, jsonErr = json.Marshal(doc)
	})
	return jsonDoc, jsonErr
}
