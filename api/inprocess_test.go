package api

import (
	"bufio"
	"net/http"
	"testing"
	"time"
)

// TestInProcessTransportStreams: a response is read while its handler
// still writes (an event stream), the request is marked in-process, and
// closing the body ends the handler's context.
func TestInProcessTransportStreams(t *testing.T) {
	ended := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(ended)
		if !isInProcess(r.Context()) || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "not marked", http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte("data: one\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // a stream that runs until its reader leaves
	})
	req, _ := http.NewRequest(http.MethodGet, "http://in-process/stream", nil)
	req.Header.Set("Authorization", "Bearer k")
	resp, err := (&http.Client{Transport: inProcessTransport{h}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("answer %d %v", resp.StatusCode, resp.Header)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: one\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	select {
	case <-ended:
		t.Fatal("the handler ended before its reader left")
	default:
	}
	resp.Body.Close()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("closing the body did not end the handler")
	}
	// A request not sent through the transport is not in-process.
	plain, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	if isInProcess(plain.Context()) {
		t.Error("a plain request reads in-process")
	}
}

// TestRateLimitSkipsInProcessRequests: the API calls a protocol bridge
// makes for one (already counted) request are not counted again, while
// the same key's own requests still are.
func TestRateLimitSkipsInProcessRequests(t *testing.T) {
	s := newBareServer()
	r := rateLimitedEngine(s, RateLimit{RPS: 0.001, Burst: 1}, "k1")
	c := &http.Client{Transport: inProcessTransport{r}}
	for i := range 5 {
		resp, err := c.Post("http://in-process"+ExecutorPrefix+"/runs/get", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("in-process request %d: status %d", i+1, resp.StatusCode)
		}
	}
	if w := serve(r, http.MethodPost, ExecutorPrefix+"/runs/get", "", nil); w.Code != http.StatusOK {
		t.Fatalf("the key's first own request: %d", w.Code)
	}
	if w := serve(r, http.MethodPost, ExecutorPrefix+"/runs/get", "", nil); w.Code != http.StatusTooManyRequests {
		t.Fatalf("the key's second own request: %d, want 429", w.Code)
	}
}
