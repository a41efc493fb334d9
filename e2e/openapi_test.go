package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/op-stack/executor/api/openapi"
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
	var responses, requests, skipped int
	for _, ex := range list {
		if ex.hijacked || ex.method == http.MethodOptions {
			skipped++
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
	fmt.Fprintf(&b, "openapi: %d recorded exchanges: %d responses and %d requests validated against api/openapi/openapi.yaml, %d skipped (WebSockets, preflights, unserved paths), %d not recorded",
		len(list), responses, requests, skipped, l.dropped)
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
