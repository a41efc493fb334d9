package llm

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/op-stack/executor/llm/llmfake"
)

const (
	oldFileKey = "sk-old-ROTATED-AWAY-1111aaaa"
	newFileKey = "sk-new-ROTATED-IN-2222bbbb"
)

func writeKey(t *testing.T, path, key string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// routerWithKeyFile is a router whose openai provider reads its key from a
// file, answered by the fake.
func routerWithKeyFile(t *testing.T, s *llmfake.Server, path string) (*Router, *Key) {
	t.Helper()
	k, err := NewKeyFile("openai", path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRouter(RouterConfig{Providers: []ProviderConfig{{Name: "openai", BaseURL: s.URL(), Key: k}}})
	if err != nil {
		t.Fatal(err)
	}
	return r, k
}

// lastKey is the bearer token of the fake's latest call.
func lastKey(t *testing.T, s *llmfake.Server) string {
	t.Helper()
	calls := s.Calls()
	if len(calls) == 0 {
		t.Fatal("no call reached the fake")
	}
	return calls[len(calls)-1].APIKey
}

// TestKeyFileRotation: a key read from a file is sent until the file is
// reread; after Reload the very next request sends the new key, without a
// new client, and a provider echoing either key has both scrubbed.
func TestKeyFileRotation(t *testing.T) {
	s := llmfake.New(t,
		llmfake.Rule{UserContains: "refuse", Responses: []llmfake.Response{{Status: 401, ErrorMessage: "Incorrect API key provided: " + oldFileKey + " / " + newFileKey}}},
		llmfake.Rule{Responses: []llmfake.Response{{Content: "ok"}}})
	path := filepath.Join(t.TempDir(), "openai.key")
	writeKey(t, path, oldFileKey)
	r, k := routerWithKeyFile(t, s, path)
	if keys := r.Keys(); len(keys) != 1 || keys[0] != k {
		t.Fatalf("router keys = %v", keys)
	}

	if _, err := r.Stream(context.Background(), simpleRequest("gpt-4o", "hello"), nil); err != nil {
		t.Fatal(err)
	}
	if got := lastKey(t, s); got != oldFileKey {
		t.Fatalf("first call sent %q", got)
	}

	writeKey(t, path, newFileKey)
	if _, err := r.Stream(context.Background(), simpleRequest("gpt-4o", "hello"), nil); err != nil {
		t.Fatal(err)
	}
	if got := lastKey(t, s); got != oldFileKey {
		t.Errorf("before the reread the call sent %q, want the old key", got)
	}
	changed, err := k.Reload()
	if err != nil || !changed {
		t.Fatalf("Reload = %v, %v", changed, err)
	}
	if changed, err := k.Reload(); err != nil || changed {
		t.Errorf("second Reload of the same file = %v, %v; want unchanged", changed, err)
	}
	if _, err := r.Stream(context.Background(), simpleRequest("gpt-4o", "hello"), nil); err != nil {
		t.Fatal(err)
	}
	if got := lastKey(t, s); got != newFileKey {
		t.Errorf("after the reread the call sent %q, want the new key", got)
	}

	_, err = r.Stream(context.Background(), simpleRequest("gpt-4o", "refuse"), nil)
	le := asError(t, err)
	if !le.KeyRejected() || strings.Contains(le.Error(), oldFileKey) || strings.Contains(le.Error(), newFileKey) {
		t.Errorf("refusal = %v (key rejected %v)", le, le.KeyRejected())
	}
	if s := k.String() + k.LogValue().String(); strings.Contains(s, newFileKey) {
		t.Errorf("the key prints its value: %s", s)
	}
}

// TestKeyFileRotationAllowedBaseURL: a client made for an allowed base URL
// shares the provider's key, rotation included.
func TestKeyFileRotationAllowedBaseURL(t *testing.T) {
	own := llmfake.New(t, llmfake.Rule{Responses: []llmfake.Response{{Content: "own"}}})
	other := llmfake.New(t, llmfake.Rule{Responses: []llmfake.Response{{Content: "other"}}})
	path := filepath.Join(t.TempDir(), "openai.key")
	writeKey(t, path, oldFileKey)
	k, err := NewKeyFile("openai", path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRouter(RouterConfig{Providers: []ProviderConfig{{Name: "openai", BaseURL: own.URL(), Key: k}}, AllowedBaseURLs: []string{other.URL()}})
	if err != nil {
		t.Fatal(err)
	}
	req := simpleRequest("gpt-4o", "hello")
	req.Provider, req.BaseURL = "openai", other.URL()
	for _, want := range []string{oldFileKey, newFileKey} {
		writeKey(t, path, want)
		if _, err := k.Reload(); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Stream(context.Background(), req, nil); err != nil {
			t.Fatal(err)
		}
		if got := lastKey(t, other); got != want {
			t.Errorf("allowed base URL got %q, want %q", got, want)
		}
	}
}

// TestKeyFileBadContent: an empty, missing or multi-line file is refused
// at start with an error naming the file and not its content; at a reread
// it keeps the key in use.
func TestKeyFileBadContent(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"empty": "  \n", "two lines": "sk-first-line-xxxx\nsk-second-line-yyyy\n"} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := NewKeyFile("openai", path)
		if err == nil || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "sk-first") {
			t.Errorf("%s: NewKeyFile error = %v", name, err)
		}
	}
	if _, err := NewKeyFile("openai", filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file was accepted")
	}

	path := filepath.Join(dir, "good")
	writeKey(t, path, oldFileKey)
	k, err := NewKeyFile("openai", path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := k.Reload(); err == nil || changed || k.Get() != oldFileKey {
		t.Errorf("reread of an emptied file = %v, %v; key in use %q", changed, err, k.Get())
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if changed, err := k.Reload(); err == nil || changed || k.Get() != oldFileKey {
		t.Errorf("reread of a removed file = %v, %v; key in use %q", changed, err, k.Get())
	}
}

// syncBuffer is a log destination safe for the watcher's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitKey(t *testing.T, k *Key, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for k.Get() != want {
		if time.Now().After(deadline) {
			t.Fatalf("key still %q after %v, want %q", k.Get(), within, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWatchKeysOnSignal: with no poll, the key changes only when the
// reload channel (the process's SIGHUP) receives; the log says which
// provider rotated and never shows a key.
func TestWatchKeysOnSignal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "openai.key")
	writeKey(t, path, oldFileKey)
	k, err := NewKeyFile("openai", path)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hup := make(chan os.Signal, 1)
	done := make(chan struct{})
	go func() {
		WatchKeys(ctx, []*Key{NewKey("compatible", "sk-env-key-never-reread"), k}, 0, hup, log)
		close(done)
	}()

	writeKey(t, path, newFileKey)
	time.Sleep(100 * time.Millisecond)
	if got := k.Get(); got != oldFileKey {
		t.Fatalf("the key changed without a signal: %q", got)
	}
	hup <- os.Interrupt // any signal value: the channel is the SIGHUP one
	waitKey(t, k, newFileKey, 2*time.Second)
	cancel()
	<-done
	out := logs.String()
	if !strings.Contains(out, "provider key rotated") || !strings.Contains(out, "provider=openai") {
		t.Errorf("log does not say the key rotated:\n%s", out)
	}
	for _, secret := range []string{oldFileKey, newFileKey, "sk-env-key-never-reread"} {
		if strings.Contains(out, secret) {
			t.Errorf("log shows a key:\n%s", out)
		}
	}
}

// TestWatchKeysPoll: with a poll interval the new key is picked up without
// a signal; a file that is briefly unreadable is reported once and the key
// in use stays.
func TestWatchKeysPoll(t *testing.T) {
	path := filepath.Join(t.TempDir(), "openai.key")
	writeKey(t, path, oldFileKey)
	k, err := NewKeyFile("openai", path)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go WatchKeys(ctx, []*Key{k}, 10*time.Millisecond, nil, slog.New(slog.NewTextHandler(&logs, nil)))

	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if got := k.Get(); got != oldFileKey {
		t.Fatalf("an emptied file replaced the key: %q", got)
	}
	if n := strings.Count(logs.String(), "key not reread"); n != 1 {
		t.Errorf("the emptied file was reported %d times, want once:\n%s", n, logs.String())
	}
	writeKey(t, path, newFileKey)
	waitKey(t, k, newFileKey, 2*time.Second)
}

// TestCheckKeys: the check at start tells a refused key (401 on GET
// /models) from an accepted one and from a provider that cannot tell (no
// /models), sending the key in use.
func TestCheckKeys(t *testing.T) {
	const good = "sk-good-key-for-check-0000"
	var mu sync.Mutex
	var seen []string
	models := func(status func(auth string) int) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			auth := r.Header.Get("Authorization")
			mu.Lock()
			seen = append(seen, r.Method+" "+r.URL.Path)
			mu.Unlock()
			if r.URL.Path != "/v1/models" {
				http.NotFound(w, r)
				return
			}
			code := status(auth)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			if code == http.StatusOK {
				w.Write([]byte(`{"object":"list","data":[]}`))
				return
			}
			w.Write([]byte(`{"error":{"message":"no","type":"invalid_request_error"}}`))
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	byKey := func(auth string) int {
		if auth == "Bearer "+good {
			return http.StatusOK
		}
		return http.StatusUnauthorized
	}
	accepted := models(byKey)
	refused := models(byKey)
	forbidden := models(func(string) int { return http.StatusForbidden })
	noModels := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(noModels.Close)
	r, err := NewRouter(RouterConfig{Providers: []ProviderConfig{
		{Name: "openai", BaseURL: accepted.URL + "/v1", APIKey: good},
		{Name: "openrouter", BaseURL: refused.URL + "/v1", APIKey: "sk-wrong-key-for-check-1111"},
		{Name: "compatible", BaseURL: noModels.URL + "/v1"},
		{Name: "other", BaseURL: forbidden.URL + "/v1", APIKey: good},
	}})
	if err != nil {
		t.Fatal(err)
	}
	checks := r.CheckKeys(context.Background(), 5*time.Second)
	got := map[string]KeyCheck{}
	for _, c := range checks {
		got[c.Provider] = c
	}
	if len(checks) != 4 {
		t.Fatalf("checks = %+v", checks)
	}
	if c := got["openai"]; c.Err != nil {
		t.Errorf("accepted key: %v", c.Err)
	}
	for _, name := range []string{"openrouter", "other"} {
		if c := got[name]; !c.Rejected() || strings.Contains(c.Err.Error(), "sk-wrong") {
			t.Errorf("%s: refused key not told: %v", name, c.Err)
		}
	}
	if c := got["compatible"]; c.Err == nil || c.Rejected() {
		t.Errorf("no /models: %v (rejected %v), want an error that is not a rejection", c.Err, c.Rejected())
	}
	for _, s := range seen {
		if s != "GET /v1/models" {
			t.Errorf("the check sent %s", s)
		}
	}
}
