package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/store"
)

// envelope is contract 002's response: code 0 with data, or an error code.
type envelope struct {
	Code      int             `json:"code"`
	Message   string          `json:"message"`
	ErrorCode string          `json:"error_code"`
	Field     string          `json:"field"`
	Data      json.RawMessage `json:"data"`
}

type testAPI struct {
	t      *testing.T
	url    string
	client *http.Client
}

// newTestAPI serves the real router over real HTTP on a loopback port.
func newTestAPI(t *testing.T, st *store.Store, opts ...func(*api.Options)) *testAPI {
	t.Helper()
	o := api.Options{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, f := range opts {
		f(&o)
	}
	srv := httptest.NewServer(api.NewServer(o).Handler())
	t.Cleanup(srv.Close)
	return &testAPI{t: t, url: srv.URL, client: srv.Client()}
}

// postRaw sends body as-is and returns the status and decoded envelope.
func (a *testAPI) postRaw(path string, body []byte) (int, envelope) {
	a.t.Helper()
	resp, err := a.client.Post(a.url+path, "application/json", bytes.NewReader(body))
	if err != nil {
		a.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatalf("read %s: %v", path, err)
	}
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		a.t.Fatalf("POST %s: status %d, body is not JSON: %q", path, resp.StatusCode, raw)
	}
	return resp.StatusCode, env
}

// post marshals body and sends it.
func (a *testAPI) post(path string, body any) (int, envelope) {
	a.t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		a.t.Fatal(err)
	}
	return a.postRaw(path, raw)
}

// mustPost sends body and fails the test unless it succeeds; it decodes
// data into out when out is not nil.
func (a *testAPI) mustPost(path string, body any, out any) {
	a.t.Helper()
	status, env := a.post(path, body)
	if status != http.StatusOK || env.Code != 0 {
		a.t.Fatalf("POST %s: status %d code %d: %s", path, status, env.Code, env.Message)
	}
	if out != nil {
		if err := json.Unmarshal(env.Data, out); err != nil {
			a.t.Fatalf("decode %s data: %v", path, err)
		}
	}
}

// expectError sends body and checks the HTTP status and numeric code.
func (a *testAPI) expectError(path string, body any, status, code int) envelope {
	a.t.Helper()
	var (
		got int
		env envelope
	)
	if raw, isRaw := body.([]byte); isRaw {
		got, env = a.postRaw(path, raw)
	} else {
		got, env = a.post(path, body)
	}
	if got != status || env.Code != code {
		a.t.Fatalf("POST %s: want status %d code %d, got status %d code %d (%s)", path, status, code, got, env.Code, env.Message)
	}
	if env.Message == "" {
		a.t.Fatalf("POST %s: error response without a message", path)
	}
	return env
}
