package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/op-stack/executor/tools"
)

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

type addOut struct {
	Sum int `json:"sum"`
}

// testServer is an MCP server built with the SDK, with one tool per case
// the client must map: text, structured content, an image, an embedded
// resource, a tool error, a hang. It records the Authorization header of
// the last request.
func testServer(t *testing.T) (*httptest.Server, *atomic.Value) {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	release := make(chan struct{})
	yes := true
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "echoes", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, in struct {
			Message string `json:"message"`
		}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "Echo: " + in.Message}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "add", Description: "adds"},
		func(_ context.Context, _ *sdk.CallToolRequest, in addIn) (*sdk.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "picture", Description: "an image and a resource", Annotations: &sdk.ToolAnnotations{DestructiveHint: &yes}},
		func(_ context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: "here"},
				&sdk.ImageContent{MIMEType: "image/png", Data: []byte("\x89PNG fake")},
				&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///docs/report.md", MIMEType: "text/markdown", Text: "# Report"}},
				&sdk.ResourceLink{URI: "https://example.com/x", Name: "x"},
			}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "big", Description: "a long text"},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Repeat("é", MaxResultBytes)}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "always fails"},
		func(_ context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			return nil, nil, errors.New("the tracker is read-only today")
		})
	sdk.AddTool(s, &sdk.Tool{Name: "hang", Description: "never answers"},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			select {
			case <-ctx.Done():
			case <-release:
			}
			return nil, nil, errors.New("released")
		})
	var auth atomic.Value
	auth.Store("")
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: lets a hanging call end
	return srv, &auth
}

func TestListAndCallOverStreamableHTTP(t *testing.T) {
	srv, auth := testServer(t)
	c := New(Config{AllowPrivate: true})
	s := Server{Name: "t", URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer s3cret"}, Timeout: 10 * time.Second}
	ctx := context.Background()

	list, err := c.ListTools(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]ToolInfo{}
	for _, ti := range list {
		byName[ti.Name] = ti
	}
	// MCP's defaults: add says nothing, so it may be destructive; echo is
	// read-only, so it is not.
	if len(byName) != 6 || !byName["echo"].ReadOnly || byName["echo"].Destructive || !byName["picture"].Destructive ||
		byName["add"].ReadOnly || !byName["add"].Destructive {
		t.Fatalf("tools = %+v", list)
	}
	if !strings.Contains(string(byName["add"].InputSchema), `"a"`) {
		t.Errorf("add's schema lacks its arguments: %s", byName["add"].InputSchema)
	}
	if got := auth.Load().(string); got != "Bearer s3cret" {
		t.Errorf("Authorization = %q, want the server's header", got)
	}

	res, err := c.CallTool(ctx, s, "echo", json.RawMessage(`{"message":"hi"}`))
	if err != nil || res.Content != "Echo: hi" || len(res.Files) != 0 {
		t.Fatalf("echo = %+v, %v", res, err)
	}

	res, err = c.CallTool(ctx, s, "add", json.RawMessage(`{"a":2,"b":40}`))
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		StructuredContent struct{ Sum int } `json:"structured_content"`
	}
	if err := json.Unmarshal([]byte(res.Content), &body); err != nil || body.StructuredContent.Sum != 42 {
		t.Fatalf("add = %s (%v), want structured_content.sum 42", res.Content, err)
	}

	res, err = c.CallTool(ctx, s, "picture", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 2 || res.Files[0].MediaType != "image/png" || string(res.Files[0].Data) != "\x89PNG fake" ||
		res.Files[1].Name != "report.md" || string(res.Files[1].Data) != "# Report" {
		t.Fatalf("files = %+v", res.Files)
	}
	if !strings.Contains(res.Content, `"text":"here"`) || !strings.Contains(res.Content, `"report.md"`) ||
		!strings.Contains(res.Content, `"uri":"https://example.com/x"`) || strings.Contains(res.Content, "# Report") {
		t.Errorf("content = %s: want the text, the files by name (not their bytes) and the link", res.Content)
	}
}

func TestToolErrorIsAResultNotARetry(t *testing.T) {
	srv, _ := testServer(t)
	c := New(Config{AllowPrivate: true})
	_, err := c.CallTool(context.Background(), Server{Name: "t", URL: srv.URL}, "fail", nil)
	var te *ToolError
	if !errors.As(err, &te) || !strings.Contains(te.Text, "read-only today") || tools.IsRetryable(err) {
		t.Fatalf("err = %v (%T), want a non-retryable ToolError with the tool's text", err, err)
	}
	// A tool the server does not have is a protocol error: not retried.
	_, err = c.CallTool(context.Background(), Server{Name: "t", URL: srv.URL}, "nope", nil)
	if err == nil || tools.IsRetryable(err) {
		t.Fatalf("unknown tool: err = %v, want a non-retryable error", err)
	}
}

func TestHangingCallTimesOutIntoAnError(t *testing.T) {
	srv, _ := testServer(t)
	c := New(Config{AllowPrivate: true})
	start := time.Now()
	_, err := c.CallTool(context.Background(), Server{Name: "t", URL: srv.URL, Timeout: 500 * time.Millisecond}, "hang", nil)
	if err == nil || !strings.Contains(err.Error(), "no answer within 500ms") || tools.IsRetryable(err) {
		t.Fatalf("err = %v, want a non-retryable timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
}

func TestTransportFailuresAreRetryable(t *testing.T) {
	c := New(Config{AllowPrivate: true})
	// Connection refused: a port nobody listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = c.CallTool(context.Background(), Server{Name: "t", URL: "http://" + addr + "/mcp", Timeout: 5 * time.Second}, "echo", nil)
	if !tools.IsRetryable(err) {
		t.Errorf("refused connection: err = %v, want retryable", err)
	}
	// A 503 from a server that is down for maintenance.
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "maintenance", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	_, err = c.CallTool(context.Background(), Server{Name: "t", URL: down.URL, Timeout: 5 * time.Second}, "echo", nil)
	if !tools.IsRetryable(err) {
		t.Errorf("503: err = %v, want retryable", err)
	}
}

func TestNetworkGuardAndPolicy(t *testing.T) {
	srv, _ := testServer(t)
	c := New(Config{}) // private addresses refused, no stdio
	_, err := c.ListTools(context.Background(), Server{Name: "t", URL: srv.URL, Timeout: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "loopback") || tools.IsRetryable(err) {
		t.Fatalf("loopback server: err = %v, want the guard's non-retryable refusal", err)
	}
	// A redirect to a loopback address is refused as well, on its hop.
	_, err = c.ListTools(context.Background(), Server{Name: "t", URL: "http://localhost:1/mcp", Timeout: 5 * time.Second})
	if err == nil || tools.IsRetryable(err) {
		t.Fatalf("localhost: err = %v, want a refusal", err)
	}
	for _, s := range []Server{
		{Name: "t", Command: []string{"sh", "-c", "true"}},
		{Name: "t", URL: "ftp://example.com/mcp"},
		{Name: "t", URL: "https://user:pw@example.com/mcp"},
		{Name: "t"},
	} {
		if err := c.Validate(s); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", s)
		}
		if _, err := c.ListTools(context.Background(), s); err == nil || tools.IsRetryable(err) {
			t.Errorf("ListTools(%+v) = %v, want a non-retryable error", s, err)
		}
	}
	if err := New(Config{StdioCommands: []string{"npx"}}).Validate(Server{Command: []string{"npx", "x"}}); err != nil {
		t.Errorf("an allowed stdio command: %v", err)
	}
}

func TestStdioEnvCarriesNoWorkerSecrets(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://secret")
	env := strings.Join(stdioEnv(map[string]string{"TOKEN": "x"}), "\n")
	if strings.Contains(env, "secret") || !strings.Contains(env, "TOKEN=x") {
		t.Fatalf("env = %q", env)
	}
}

func TestLargeResultTruncatedButKeptWhole(t *testing.T) {
	srv, _ := testServer(t)
	res, err := New(Config{AllowPrivate: true}).CallTool(context.Background(), Server{Name: "t", URL: srv.URL}, "big", nil)
	if err != nil {
		t.Fatal(err)
	}
	whole := strings.Repeat("é", MaxResultBytes)
	if len(res.Content) > MaxResultBytes+200 || !strings.Contains(res.Content, "[truncated: 65536 of 131072 bytes shown; the whole result is stored as the file big-result.txt]") ||
		!utf8.ValidString(res.Content) {
		t.Errorf("content: %d bytes, ends %q", len(res.Content), res.Content[len(res.Content)-120:])
	}
	if len(res.Files) != 1 || string(res.Files[0].Data) != whole {
		t.Errorf("files = %d, want the whole result kept", len(res.Files))
	}
}
