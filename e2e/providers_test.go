package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm/bedrockfake"
)

// TestBedrockWorker runs a worker whose llm_config routes it to AWS
// Bedrock, against a local fake of Bedrock's ConverseStream API: the real
// AWS SDK client streams the answer onto the run's stream.
func TestBedrockWorker(t *testing.T) {
	bedrock := bedrockfake.New(t, bedrockfake.Rule{ModelID: "anthropic.claude-3-sonnet-20240229-v1:0",
		Responses: []bedrockfake.Response{{Content: "analysis from bedrock", Reasoning: "weighing trends"}}})
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAFAKEE2E000000000")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "fake-e2e-secret")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	e := newEnv(t, referenceRules(nil), withConfig(func(c *config.Config) {
		c.AWSBedrockEnabled, c.AWSBedrockEndpoint = "true", bedrock.URL()
	}))
	body := referenceHierarchy()
	analyst := body["teams"].([]any)[0].(map[string]any)["workers"].([]any)[1].(map[string]any)
	analyst["llm_config"] = map[string]any{"provider": "aws_bedrock", "model": "anthropic.claude-3-sonnet-20240229-v1:0", "region": "us-east-1", "temperature": 0.5, "max_tokens": 3000}
	id := e.startRun(e.createHierarchy(body), "bedrock")
	msgs := e.streamAll(id)
	checkLog(t, id, msgs)
	var text, reasoning string
	for _, m := range msgs {
		if m.Event.Source.AgentID == "w-analyst" {
			switch m.Type {
			case "llm.stream":
				text += m.Event.Data["content"].(string)
			case "llm.reasoning":
				reasoning += m.Event.Data["content"].(string)
			}
		}
	}
	if text != "analysis from bedrock" || reasoning != "weighing trends" {
		t.Errorf("analyst streamed %q (reasoning %q)", text, reasoning)
	}
	calls := bedrock.Calls()
	if len(calls) != 1 || calls[0].Region != "us-east-1" || !strings.Contains(string(calls[0].Body), "W-ANALYST") {
		t.Fatalf("bedrock calls = %+v", calls)
	}
	if len(callsMatching(e.fake.Calls(), "W-ANALYST")) != 0 {
		t.Error("the analyst also called the OpenAI-compatible provider")
	}
	if strings.Contains(string(calls[0].Body), "fake-e2e-secret") {
		t.Error("the secret key is in the request body")
	}
}

// TestProviderErrors: an unknown provider is refused at create, a provider
// without its key at start, before anything is stored.
func TestProviderErrors(t *testing.T) {
	e := newEnv(t, referenceRules(nil))
	body := referenceHierarchy()
	writer := body["teams"].([]any)[1].(map[string]any)["workers"].([]any)[0].(map[string]any)
	writer["llm_config"] = map[string]any{"provider": "watsonx", "model": "m"}
	status, env := e.post("/hierarchies/create", body)
	if status != http.StatusBadRequest || env.ErrorCode != "PROVIDER_NOT_SUPPORTED" || !strings.Contains(env.Message, "watsonx") {
		t.Errorf("unknown provider: %d %+v", status, env)
	}

	writer["llm_config"] = map[string]any{"provider": "openrouter", "model": "anthropic/claude-3-sonnet"}
	hid := e.createHierarchy(body)
	status, env = e.post("/runs/start", map[string]any{"hierarchy_id": hid, "task": "no key"})
	if status != http.StatusBadRequest || env.ErrorCode != "MISSING_API_KEY" || !strings.Contains(env.Message, "OPENROUTER_API_KEY") || !strings.Contains(env.Message, "w-writer") {
		t.Errorf("missing key: %d %+v", status, env)
	}
	var page struct {
		Total int `json:"total"`
	}
	e.mustPost("/runs/list", map[string]any{"hierarchy_id": hid}, &page)
	if page.Total != 0 {
		t.Errorf("a refused start stored %d runs", page.Total)
	}
}
