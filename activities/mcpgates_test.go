package activities

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/mcp"
	"github.com/op-stack/executor/models"
)

// toolCallLLM is a named fake llm.Client that asks for the given tool
// calls and records the tools it was offered.
type toolCallLLM struct {
	calls   []llm.ToolCall
	offered []string
}

func (f *toolCallLLM) Stream(_ context.Context, req llm.Request, _ func(llm.Delta)) (*llm.Response, error) {
	for _, t := range req.Tools {
		f.offered = append(f.offered, t.Name)
	}
	return &llm.Response{Model: req.Model, Provider: "fake", ToolCalls: f.calls}, nil
}

// TestRespondReturnsMCPGates: the LLM call lists the agent's MCP tools
// and returns, with the model's tool calls, the gates of the called
// tools only: wipe (destructiveHint, under the server's "destructive"
// policy), not peek (readOnlyHint) nor erase (gated, but not called).
func TestRespondReturnsMCPGates(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "g", Version: "1"}, nil)
	yes := true
	noop := func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{}, nil, nil
	}
	sdk.AddTool(s, &sdk.Tool{Name: "wipe", Annotations: &sdk.ToolAnnotations{DestructiveHint: &yes}}, noop)
	sdk.AddTool(s, &sdk.Tool{Name: "erase", Annotations: &sdk.ToolAnnotations{DestructiveHint: &yes}}, noop)
	sdk.AddTool(s, &sdk.Tool{Name: "peek", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}}, noop)
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	defer srv.Close()
	box := &mcp.Toolbox{
		Client: mcp.New(mcp.Config{AllowPrivate: true}),
		Servers: func(_ context.Context, tenant, name string) (mcp.ServerConfig, error) {
			return mcp.ServerConfig{Server: mcp.Server{Name: name, URL: srv.URL}, Approval: models.MCPApprovalDestructive}, nil
		},
	}
	fake := &toolCallLLM{calls: []llm.ToolCall{
		{ID: "1", Name: "mcp_g__wipe", Arguments: `{}`},
		{ID: "2", Name: "mcp_g__peek", Arguments: `{}`},
		{ID: "3", Name: "mcp_g__wipe", Arguments: `{"again":true}`},
	}}
	acts := &Activities{LLM: fake, Events: &fakeSink{}, MCP: box}
	in := costInput("m")
	in.Agent.Tools = []string{"mcp:g/*"}
	res, err := acts.Respond(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(fake.offered) != 3 {
		t.Errorf("offered %v", fake.offered)
	}
	want := models.MCPToolGate{Function: "mcp_g__wipe", Server: "g", Tool: "wipe", Reason: models.MCPApprovalDestructive}
	if len(res.ToolCalls) != 3 || len(res.MCPGates) != 1 || res.MCPGates[0] != want {
		t.Fatalf("tool calls %+v, gates %+v: want one gate %+v", res.ToolCalls, res.MCPGates, want)
	}
}
