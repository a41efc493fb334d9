package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	sse "github.com/tmaxmax/go-sse"

	"github.com/op-stack/executor/api/openapi"
	"github.com/op-stack/executor/console"
	"github.com/op-stack/executor/llm/llmfake"
)

// The e2e tests' API servers record every exchange (in memory only, never
// written anywhere) and, when the suite has run, TestMain validates each
// recorded response, and each request that was answered 2xx, against
// api/openapi/openapi.yaml: the document must describe what the service
// really sends.

const (
	maxRecordedBody      = 1 << 20 // bodies past this are not validated
	maxRecordedExchanges = 100_000
)

// exchange is one recorded request and its response.
type exchange struct {
	method     string
	url        *url.URL
	reqHeader  http.Header
	reqBody    []byte
	reqPartial bool // the handler did not read the whole body, or it was too large
	status     int
	respHeader http.Header
	respBody   []byte
	respCut    bool // too large to keep whole
	hijacked   bool // a WebSocket: no HTTP response to validate
}

// exchangeLog is the suite's recorded exchanges.
type exchangeLog struct {
	mu      sync.Mutex
	list    []*exchange
	dropped int
}

var exchanges = &exchangeLog{}

// wrap records h's exchanges.
func (l *exchangeLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ex := &exchange{method: r.Method, url: r.URL, reqHeader: r.Header.Clone()}
		body := &capture{limit: maxRecordedBody}
		// The handler may wrap r.Body (http.MaxBytesReader): keep the tee.
		var tee *teeBody
		if r.Body != nil && r.Body != http.NoBody {
			tee = &teeBody{ReadCloser: r.Body, capture: body}
			r.Body = tee
		}
		rec := &recordingWriter{ResponseWriter: w, body: capture{limit: maxRecordedBody}}
		h.ServeHTTP(rec, r)
		ex.reqBody, ex.reqPartial = body.buf.Bytes(), body.cut || (tee != nil && !tee.eof)
		ex.status, ex.respHeader, ex.respBody, ex.respCut, ex.hijacked = rec.status, w.Header().Clone(), rec.body.buf.Bytes(), rec.body.cut, rec.hijacked
		if ex.status == 0 {
			ex.status = http.StatusOK
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.list) >= maxRecordedExchanges {
			l.dropped++
			return
		}
		l.list = append(l.list, ex)
	})
}

// capture keeps the first limit bytes written to it.
type capture struct {
	buf   bytes.Buffer
	limit int
	cut   bool
}

func (c *capture) keep(p []byte) {
	if room := c.limit - c.buf.Len(); room < len(p) {
		c.cut = true
		p = p[:max(room, 0)]
	}
	c.buf.Write(p)
}

type teeBody struct {
	io.ReadCloser
	capture *capture
	eof     bool
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	t.capture.keep(p[:n])
	if err == io.EOF {
		t.eof = true
	}
	return n, err
}

// recordingWriter records the status and body, and passes Flush (event
// streams) and Hijack (WebSockets) through.
type recordingWriter struct {
	http.ResponseWriter
	status   int
	body     capture
	hijacked bool
}

func (w *recordingWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.body.keep(p)
	return w.ResponseWriter.Write(p)
}

func (w *recordingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *recordingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, fmt.Errorf("hijack not supported")
	}
	w.hijacked = true
	return h.Hijack()
}

func (w *recordingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// loadOpenAPIDoc loads the embedded document and a router over its paths
// that matches any host.
func loadOpenAPIDoc() (*openapi3.T, routers.Router, error) {
	doc, err := openapi3.NewLoader().LoadFromData(openapi.YAML)
	if err != nil {
		return nil, nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, nil, err
	}
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	return doc, router, err
}

// validateExchanges validates the recorded exchanges against the document
// and returns a report and whether every one conformed.
func (l *exchangeLog) validate() (string, bool) {
	l.mu.Lock()
	list := l.list
	l.mu.Unlock()
	_, router, err := loadOpenAPIDoc()
	if err != nil {
		return fmt.Sprintf("openapi: the document does not load: %v", err), false
	}
	ctx := context.Background()
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}
	failures := map[string]int{}
	var responses, requests, skipped, consolePages int
	for _, ex := range list {
		if ex.hijacked || ex.method == http.MethodOptions {
			skipped++
			continue
		}
		if ex.respHeader.Get("Content-Security-Policy") == console.ContentSecurityPolicy {
			// The web console's page and assets (every console response
			// carries its policy, no API response does): HTML and scripts
			// for a browser, not API operations, so the API's document
			// leaves them out (as api's TestOpenAPICoversEveryRoute checks).
			consolePages++
			continue
		}
		req, _ := http.NewRequest(ex.method, ex.url.String(), bytes.NewReader(ex.reqBody))
		req.Header = ex.reqHeader
		route, params, err := router.FindRoute(req)
		if err != nil {
			// Requests to paths or methods the API does not serve (the
			// tests of 404 and 405): the router answered them itself.
			if ex.status == http.StatusNotFound || ex.status == http.StatusMethodNotAllowed {
				skipped++
				continue
			}
			failures[fmt.Sprintf("%s %s answered %d: not in the document (%v)", ex.method, ex.url.Path, ex.status, err)]++
			continue
		}
		op := ex.method + " " + route.Path
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
		if ex.status/100 == 2 && !ex.reqPartial {
			requests++
			if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
				failures[fmt.Sprintf("request of %s (answered %d): %s", op, ex.status, firstLine(err))]++
			}
		}
		mediaType, _, _ := mime.ParseMediaType(ex.respHeader.Get("Content-Type"))
		respOpts := *opts
		respOpts.ExcludeResponseBody = ex.respCut || (mediaType != "application/json" && mediaType != "text/plain")
		out := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: &respOpts},
			Status:                 ex.status, Header: ex.respHeader, Options: &respOpts,
		}
		out.SetBodyBytes(ex.respBody)
		responses++
		if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
			failures[fmt.Sprintf("response %d of %s: %s", ex.status, op, firstLine(err))]++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "openapi: %d recorded exchanges: %d responses and %d requests validated against api/openapi/openapi.yaml, %d skipped (WebSockets, preflights, unserved paths), %d web console pages and assets (not API operations), %d not recorded",
		len(list), responses, requests, skipped, consolePages, l.dropped)
	if len(failures) == 0 {
		return b.String(), true
	}
	keys := make([]string, 0, len(failures))
	for k := range failures {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(&b, "; %d kinds of mismatch:\n", len(keys))
	for _, k := range keys {
		fmt.Fprintf(&b, "  %dx %s\n", failures[k], k)
	}
	return b.String(), false
}

func firstLine(err error) string {
	s := strings.ReplaceAll(err.Error(), "\n", " ")
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}

// TestOpenAPIConformance validates the data of every message of real
// event streams against the document's event schemas: contract 002's
// stream (the Event envelope, and each type's EventData.<type> schema
// where the document has one) and spec 001's (V1Event), for a run with
// tools, sub-agents and warnings and for a run with a retry.
func TestOpenAPIConformance(t *testing.T) {
	doc, _, err := loadOpenAPIDoc()
	if err != nil {
		t.Fatal(err)
	}
	schema := func(name string) *openapi3.Schema {
		if ref := doc.Components.Schemas[name]; ref != nil {
			return ref.Value
		}
		return nil
	}
	validate := func(s *openapi3.Schema, raw string) error {
		var v any
		if err := json.Unmarshal([]byte(raw), &v); err != nil {
			return err
		}
		return s.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors())
	}
	check := func(t *testing.T, e *testEnv, id string) {
		types, typed := map[string]int{}, 0
		for _, msg := range e.rawStream(e.apiURL + "/runs/" + id + "/stream") {
			if err := validate(schema("Event"), msg.Data); err != nil {
				t.Errorf("%s event %s does not match Event: %v\n%s", msg.Type, msg.LastEventID, err, msg.Data)
				continue
			}
			types[msg.Type]++
			if s := schema("EventData." + msg.Type); s != nil {
				typed++
				var ev struct {
					Data json.RawMessage `json:"data"`
				}
				_ = json.Unmarshal([]byte(msg.Data), &ev)
				if err := validate(s, string(ev.Data)); err != nil {
					t.Errorf("%s event %s: its data does not match EventData.%s: %v\n%s", msg.Type, msg.LastEventID, msg.Type, err, ev.Data)
				}
			}
		}
		v1 := 0
		for _, msg := range e.rawStream(e.v1URL() + "/executions/" + id + "/stream") {
			v1++
			if err := validate(schema("V1Event"), msg.Data); err != nil {
				t.Errorf("spec 001 %s message %s does not match V1Event: %v\n%s", msg.Type, msg.LastEventID, err, msg.Data)
			}
		}
		t.Logf("run %s: %d contract 002 events of %d types (%d with a data schema), %d spec 001 messages: %v", id, sum(types), len(types), typed, v1, types)
		if typed == 0 || v1 == 0 {
			t.Error("nothing was validated")
		}
	}
	t.Run("tools", func(t *testing.T) {
		e, id := startToolsRun(t)
		e.waitRun(id, 2*time.Minute)
		check(t, e, id)
	})
	t.Run("retry", func(t *testing.T) {
		e := newEnv(t, referenceRules(map[string][]llmfake.Response{
			"W-WRITER": {{Content: "a first draft that breaks off", DropAfterChunks: 2}, {Content: "the report"}},
		}))
		id := e.startRun(e.createHierarchy(referenceHierarchy()), "retry")
		e.waitRun(id, 2*time.Minute)
		check(t, e, id)
	})
}

// rawStream reads a whole SSE stream as it came.
func (e *testEnv) rawStream(url string) []sse.Event {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	var out []sse.Event
	for ev, err := range sse.Read(resp.Body, &sse.ReadConfig{MaxEventSize: 4 << 20}) {
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
