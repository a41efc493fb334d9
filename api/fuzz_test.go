package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// The fuzz targets post arbitrary bodies through the real router. Their
// seed corpora (testdata/fuzz/<target>/: valid bodies of both surfaces, a
// NUL in a nested field, over-long fields, malformed JSON) run with every
// `go test`; `.ci/fuzz.sh` fuzzes each for a few seconds. They run on
// SQLite, and also on PostgreSQL when TEST_DATABASE_URL is set.

// fuzzRouter is the router on one database.
type fuzzRouter struct {
	dialect string
	h       http.Handler
}

func fuzzRouters(f *testing.F) []fuzzRouter {
	f.Helper()
	routers := []fuzzRouter{{store.DialectSQLite, newFuzzHandler(storetest.SQLite(f))}}
	if os.Getenv(storetest.EnvDatabaseURL) != "" {
		routers = append(routers, fuzzRouter{store.DialectPostgres, newFuzzHandler(storetest.Postgres(f))})
	}
	return routers
}

func newFuzzHandler(st *store.Store) http.Handler {
	o := api.Options{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	withFakeTools(&o)
	return api.NewServer(o).Handler()
}

// serve sends one request to h and returns the status and body.
func serve(h http.Handler, method, path string, body []byte) (int, []byte) {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

// FuzzHierarchyCreate: no body makes hierarchies/create answer 5xx, every
// answer is a JSON envelope, and a created hierarchy reads back, is accepted
// again as it reads (update with the stored hierarchy) and then reads back
// the same.
func FuzzHierarchyCreate(f *testing.F) {
	for _, b := range []map[string]any{contractBody(), specBody()} {
		raw, _ := json.Marshal(b)
		f.Add(raw)
	}
	f.Add([]byte(`{}`))
	routers := fuzzRouters(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, r := range routers {
			status, raw := serve(r.h, http.MethodPost, pathCreate, body)
			var env envelope
			if err := json.Unmarshal(raw, &env); err != nil {
				t.Fatalf("%s: create answered %d with a body that is not JSON: %q", r.dialect, status, raw)
			}
			if status >= 500 {
				t.Fatalf("%s: create answered %d %s (%s) for %q", r.dialect, status, env.ErrorCode, env.Message, body)
			}
			if status != http.StatusOK {
				if env.Code == 0 || env.ErrorCode == "" || env.Message == "" {
					t.Fatalf("%s: create answered %d with a malformed error %s", r.dialect, status, raw)
				}
				continue
			}
			var created struct {
				HierarchyID string `json:"hierarchy_id"`
			}
			if err := json.Unmarshal(env.Data, &created); err != nil || created.HierarchyID == "" {
				t.Fatalf("%s: create answered %s", r.dialect, raw)
			}
			idBody, _ := json.Marshal(map[string]string{"hierarchy_id": created.HierarchyID})
			stored := fuzzGet(t, r, idBody)
			if hasNUL(stored) {
				t.Fatalf("%s: a NUL character was stored: %s", r.dialect, stored)
			}
			// What was stored, sent back as it reads, is accepted and
			// stored unchanged.
			var again map[string]any
			if err := json.Unmarshal(stored, &again); err != nil {
				t.Fatal(err)
			}
			update, _ := json.Marshal(again)
			if status, raw := serve(r.h, http.MethodPost, pathUpdate, update); status != http.StatusOK {
				t.Fatalf("%s: the stored hierarchy was refused by update: %d %s\nbody %q\nstored %s", r.dialect, status, raw, body, stored)
			}
			if reread := fuzzGet(t, r, idBody); !sameExceptUpdatedAt(t, stored, reread) {
				t.Fatalf("%s: the hierarchy changed when stored again:\nbefore %s\nafter  %s", r.dialect, stored, reread)
			}
			serve(r.h, http.MethodPost, pathDelete, idBody)
		}
	})
}

func fuzzGet(t *testing.T, r fuzzRouter, idBody []byte) json.RawMessage {
	t.Helper()
	status, raw := serve(r.h, http.MethodPost, pathGet, idBody)
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil || status != http.StatusOK {
		t.Fatalf("%s: get of a created hierarchy answered %d %s", r.dialect, status, raw)
	}
	return env.Data
}

func sameExceptUpdatedAt(t *testing.T, a, b []byte) bool {
	t.Helper()
	var ma, mb map[string]any
	if err := json.Unmarshal(a, &ma); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &mb); err != nil {
		t.Fatal(err)
	}
	delete(ma, "updated_at")
	delete(mb, "updated_at")
	ja, _ := json.Marshal(ma)
	jb, _ := json.Marshal(mb)
	return bytes.Equal(ja, jb)
}

// FuzzV1TeamCreate: no body makes spec 001's POST /hierarchical-teams
// answer 5xx, every answer is spec 001's envelope, and a created team reads
// back under its name.
func FuzzV1TeamCreate(f *testing.F) {
	spec, err := os.ReadFile("testdata/spec001_request.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(spec)
	f.Add([]byte(`{}`))
	routers := fuzzRouters(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, r := range routers {
			status, raw := serve(r.h, http.MethodPost, pathTeams, body)
			var env v1Envelope
			if err := json.Unmarshal(raw, &env); err != nil {
				t.Fatalf("%s: create answered %d with a body that is not JSON: %q", r.dialect, status, raw)
			}
			if status >= 500 {
				t.Fatalf("%s: create answered %d %s (%+v) for %q", r.dialect, status, env.Code, env.Error, body)
			}
			if status != http.StatusOK {
				if env.Success || env.Code == "" || env.Error == nil || env.Error.Message == "" {
					t.Fatalf("%s: create answered %d with a malformed error %s", r.dialect, status, raw)
				}
				continue
			}
			var created teamSummary
			if err := json.Unmarshal(env.Data, &created); err != nil || created.TeamID == "" {
				t.Fatalf("%s: create answered %s", r.dialect, raw)
			}
			status, raw = serve(r.h, http.MethodGet, pathTeams+"/"+created.TeamID, nil)
			var got v1Envelope
			if err := json.Unmarshal(raw, &got); err != nil || status != http.StatusOK {
				t.Fatalf("%s: get of a created team answered %d %s", r.dialect, status, raw)
			}
			var team struct {
				TeamName string `json:"team_name"`
			}
			if err := json.Unmarshal(got.Data, &team); err != nil || team.TeamName != created.TeamName {
				t.Fatalf("%s: created %q, read back %s", r.dialect, created.TeamName, got.Data)
			}
			serve(r.h, http.MethodDelete, pathTeams+"/"+created.TeamID, nil)
		}
	})
}

// hasNUL reports whether any string or key of the JSON document holds a
// NUL character.
func hasNUL(doc []byte) bool {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return false
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case string:
			return strings.ContainsRune(v, 0)
		case []any:
			return slices.ContainsFunc(v, walk)
		case map[string]any:
			for k, e := range v {
				if strings.ContainsRune(k, 0) || walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}
