package webhooks

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/tools"
)

// TestSignMatchesTheStandardWebhooksVector: the signature of the Standard
// Webhooks specification's example (its libraries' shared test vector).
func TestSignMatchesTheStandardWebhooksVector(t *testing.T) {
	got, err := Sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
	if _, err := Sign("whsec_not base64!", "id", 1, nil); err == nil {
		t.Error("a malformed secret signed")
	}
}

// TestHTTPClientGuardsAndFollowsNoRedirect: without allowPrivate a
// loopback receiver is refused by the network guard (a policy error the
// delivery does not retry); with it, a 3xx is returned as the answer,
// never followed.
func TestHTTPClientGuardsAndFollowsNoRedirect(t *testing.T) {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			hits++
		}
		http.Redirect(w, r, "/moved", http.StatusFound)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("{}"))
	if _, err := NewHTTPClient(false, time.Second).Do(req); err == nil || !tools.IsBlocked(err) {
		t.Fatalf("guarded client reached loopback: %v", err)
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("{}"))
	resp, err := NewHTTPClient(true, time.Second).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || hits != 0 {
		t.Fatalf("status %d, redirect target hit %d times", resp.StatusCode, hits)
	}
}

// TestHTTPClientTimesOut: a receiver that holds the request open is given
// up after the timeout.
func TestHTTPClientTimesOut(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	begin := time.Now()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
	if _, err := NewHTTPClient(true, 300*time.Millisecond).Do(req); err == nil {
		t.Fatal("a hanging receiver answered")
	}
	if took := time.Since(begin); took > 2*time.Second {
		t.Fatalf("gave up after %v", took)
	}
}

// TestWebhookNodeVerifier runs docs/webhooks.md's Node example, as the
// document has it, on a request signed by Sign: it accepts it, and refuses
// it with a changed body or an old timestamp.
func TestWebhookNodeVerifier(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	doc, err := os.ReadFile("../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```js\n")
	code, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 || !strings.Contains(code, "function verifyWebhook") {
		t.Fatal("no Node example in docs/webhooks.md")
	}
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	body := `{"type":"run.completed","data":{"sequence":3}}`
	now := time.Now().Unix()
	sig, err := Sign(secret, "msg_1", now, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	headers := func(ts int64, sig string) string {
		return fmt.Sprintf(`{"webhook-id":"msg_1","webhook-timestamp":"%d","webhook-signature":%q}`, ts, sig)
	}
	oldSig, _ := Sign(secret, "msg_1", now-3600, []byte(body))
	script := code + fmt.Sprintf(`
console.log(JSON.stringify([
  verifyWebhook(%[1]q, %[2]s, Buffer.from(%[3]q)),
  verifyWebhook(%[1]q, %[2]s, Buffer.from(%[4]q)),
  verifyWebhook(%[1]q, %[5]s, Buffer.from(%[3]q)),
  verifyWebhook(%[1]q, %[6]s, Buffer.from(%[3]q)),
]))`, secret, headers(now, "v0,x "+sig), body, strings.Replace(body, "3", "4", 1), headers(now-3600, oldSig), headers(now, "v1,AAAA"))
	out, err := exec.Command(node, "-e", script).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "[true,false,false,false]" {
		t.Fatalf("node verifier answered %s, want [true,false,false,false] (signed, changed body, old timestamp, wrong signature)", got)
	}
}

// TestWebhookGoVerifierIsTheTested: docs/webhooks.md's Go example is the
// function the e2e tests verify every delivery with, character for
// character.
func TestWebhookGoVerifierIsTheTested(t *testing.T) {
	doc, err := os.ReadFile("../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(doc), "```go\n")
	code, _, _ := strings.Cut(rest, "```")
	_, fn, ok := strings.Cut(code, "func verifyWebhook(")
	fn, _, _ = strings.Cut(fn, "\n}\n")
	tested, err := os.ReadFile("../e2e/webhooks_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if !ok || !strings.Contains(string(tested), "func verifyWebhook("+fn+"\n}\n") {
		t.Fatal("the Go example of docs/webhooks.md is not e2e's verifyWebhook")
	}
}
