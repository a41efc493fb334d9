package api

import (
	"context"
	"io"
	"net/http"
	"sync"
)

// inProcessKey marks a request that the server sent to itself through
// InProcessTransport. Only code in this process can set it (the key is
// unexported), so no client can use it to skip a limit.
type inProcessKey struct{}

// isInProcess reports whether the request came through InProcessTransport.
func isInProcess(ctx context.Context) bool {
	v, _ := ctx.Value(inProcessKey{}).(bool)
	return v
}

// InProcessTransport is an http.RoundTripper that serves each request with
// this server's own router, without a socket. The protocol bridges that
// speak another protocol on top of the API (a2aserve) call the API through
// it with their caller's credentials, so every request they make is
// authenticated, scoped and tenant-checked exactly as the caller's own
// request would be. Such requests are not rate limited again: the
// protocol request that caused them was. Responses stream: the body is
// read as the handler writes it (event streams included), and closing it
// cancels the handler's context.
func (s *Server) InProcessTransport() http.RoundTripper { return inProcessTransport{s.router} }

type inProcessTransport struct{ h http.Handler }

func (t inProcessTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(context.WithValue(req.Context(), inProcessKey{}, true))
	req = req.Clone(ctx)
	if req.Body == nil {
		req.Body = http.NoBody
	}
	req.RequestURI = req.URL.RequestURI()
	if req.RemoteAddr == "" {
		req.RemoteAddr = "127.0.0.1:0"
	}
	pr, pw := io.Pipe()
	w := &pipeResponseWriter{header: http.Header{}, pw: pw, ready: make(chan struct{}), gone: ctx.Done()}
	go func() {
		defer func() {
			w.commit(http.StatusOK)
			_ = pw.Close()
		}()
		t.h.ServeHTTP(w, req)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		cancel()
		return nil, req.Context().Err()
	}
	return &http.Response{
		Status:        http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          &cancelBody{ReadCloser: pr, cancel: cancel},
		ContentLength: -1,
		Request:       req,
	}, nil
}

// pipeResponseWriter writes a handler's response into a pipe; ready closes
// once the status and headers are known (at the first write or flush, or
// when the handler returns).
type pipeResponseWriter struct {
	header http.Header
	sent   http.Header
	pw     *io.PipeWriter
	status int
	once   sync.Once
	ready  chan struct{}
	gone   <-chan struct{}
}

func (w *pipeResponseWriter) Header() http.Header { return w.header }

func (w *pipeResponseWriter) commit(status int) {
	w.once.Do(func() {
		w.status = status
		w.sent = w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeResponseWriter) WriteHeader(status int) {
	if status >= 100 && status < 200 {
		return
	}
	w.commit(status)
}

func (w *pipeResponseWriter) Write(b []byte) (int, error) {
	w.commit(http.StatusOK)
	return w.pw.Write(b)
}

// Flush commits the headers; the pipe itself holds nothing back.
func (w *pipeResponseWriter) Flush() { w.commit(http.StatusOK) }

// CloseNotify reports the reader going away (gin's streaming asks).
//
//nolint:staticcheck // http.CloseNotifier is what gin's Stream looks for.
func (w *pipeResponseWriter) CloseNotify() <-chan bool {
	ch := make(chan bool, 1)
	go func() {
		<-w.gone
		ch <- true
	}()
	return ch
}

// cancelBody cancels the in-process request when its reader closes it.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	b.cancel()
	return b.ReadCloser.Close()
}
