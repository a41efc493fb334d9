// Package config loads the service's settings from the environment. Every
// variable, its default and its meaning is declared once, in vars; the
// configuration table of docs/configuration.md lists the same variables and a test keeps the
// two in step.
package config

import (
	"encoding/base64"
	"fmt"
	"github.com/op-stack/executor/pricing"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Config is every setting of the service.
type Config struct {
	HTTPAddr        string
	DatabaseURL     string
	DataDir         string
	LogLevel        string
	LogFormat       string
	MaxBodyBytes    int64
	ShutdownTimeout time.Duration

	// DBMaxOpenConns, DBMaxIdleConns and DBConnMaxLifetime bound this
	// process's PostgreSQL connection pool (store.Pool).
	DBMaxOpenConns    int
	DBMaxIdleConns    int
	DBConnMaxLifetime time.Duration

	// Access limits. RateLimitRPS 0 turns the request rate limit off;
	// MaxConcurrentRunsPerTenant 0 is no limit.
	RateLimitRPS               float64
	RateLimitBurst             int
	MaxConcurrentRunsPerTenant int
	// MaxQueuedRunsPerTenant bounds a tenant's admission queue (0: no
	// bound) and QueueSweepInterval is how often workers dispatch the
	// queues (docs/queue.md).
	MaxQueuedRunsPerTenant int
	QueueSweepInterval     time.Duration
	// CORSAllowedOrigins are the exact origins (scheme://host[:port]) whose
	// web pages may call the API; none by default.
	CORSAllowedOrigins []string
	IdempotencyKeyTTL  time.Duration
	// MetricsAddr is the address of a separate listener for /metrics,
	// /healthz and /readyz: "" (the API's address, or DefaultWorkerMetricsAddr
	// in a process without the API), MetricsOff, or host:port.
	MetricsAddr string
	// MetricsTenantLabel adds the tenant label to the cost metric; off by
	// default, and only accepted with /metrics off the API's address.
	MetricsTenantLabel bool

	TemporalAddress string
	// TemporalCompression is TEMPORAL_GRPC_COMPRESSION: "auto" (none to a
	// loopback address, gzip elsewhere), "gzip" or "none".
	TemporalCompression string
	TemporalNamespace   string
	TaskQueue           string
	TemporalCLI         string
	DevServerPort       int
	DevServerUIPort     int
	DevServerTuned      bool
	// TemporalSearchAttributes is auto, true or false.
	TemporalSearchAttributes string

	// LLM providers. The keys are secrets: they stay in this process's
	// memory and are never logged, stored or put in workflow inputs.
	OpenAIAPIKey       string
	OpenAIBaseURL      string
	OpenRouterAPIKey   string
	OpenRouterBaseURL  string
	CompatibleBaseURL  string
	CompatibleAPIKey   string
	LLMModels          string
	LLMDefaultModel    string
	LLMDefaultProvider string
	OfflineTokenDelay  time.Duration
	// LLMOfflineFallback is "true" or "false" once the command resolved it
	// (ResolveCommandDefaults), "" before: whether models that route to no
	// configured provider fall back to the built-in offline model. `dev`
	// says yes, `serve` no, so production never answers with stand-in text
	// the operator did not choose. Anything but "true" means no.
	LLMOfflineFallback string
	// LLMAllowedBaseURLs are the base URLs an agent's llm_config may name
	// besides its provider's own; calls to them carry the provider's key.
	LLMAllowedBaseURLs []string

	// The *_API_KEY_FILE settings name files holding the keys instead
	// (mounted secrets): their keys are reread when the files change and
	// on SIGHUP, so keys rotate without a restart. LLMKeyFilePoll is how
	// often the files are reread; 0 leaves it to SIGHUP.
	OpenAIAPIKeyFile     string
	OpenRouterAPIKeyFile string
	CompatibleAPIKeyFile string
	LLMKeyFilePoll       time.Duration
	// LLMCheckKeysAtStart is off, warn or fail: whether the process asks
	// each provider, at start, whether it accepts its key.
	LLMCheckKeysAtStart string

	// AWS Bedrock. Its credentials and region are read by the AWS SDK
	// from its own variables (AWS_ACCESS_KEY_ID, AWS_PROFILE, AWS_REGION,
	// …), never through this package.
	AWSBedrockEnabled  string // "auto", "true" or "false"
	AWSBedrockEndpoint string

	// Engine settings copied into each run's options at start.
	LLMCallTimeout      time.Duration
	LLMHeartbeatTimeout time.Duration
	LLMMaxAttempts      int
	LLMRetryInitial     time.Duration
	LLMRetryMax         time.Duration
	// LLMPrices is the price table: the built-in list prices with
	// LLM_PRICES_FILE's over them.
	LLMPrices pricing.Table
	// LLMBreakerFailures and LLMBreakerCooldown configure the circuit
	// breaker per provider (llm.Breaker).
	LLMBreakerFailures int
	LLMBreakerCooldown time.Duration
	ContextCharLimit   int
	ContextTotalChars  int
	ContinueAsNewAfter int
	// MaxDelegationsPerTurn and MaxDelegationsPerRun cap the sub-agents
	// started through `delegate`: per agent turn, and per run (nested
	// sub-agents and continue-as-new included). Both are at least 1.
	MaxDelegationsPerTurn int
	MaxDelegationsPerRun  int

	// Built-in tools.
	ToolsHTTPAllowedHosts []string
	ToolsHTTPAllowPrivate bool
	ToolsHTTPMaxBytes     int
	ToolsHTTPTimeout      time.Duration

	// MCP servers (docs/mcp.md). MCPSecretKey is the 32-byte key that
	// seals servers' inline secrets at rest (nil: inline secrets are
	// refused); MCPAllowPrivate opens private addresses to MCP servers
	// only; MCPStdioCommands lists the programs a stdio server may run.
	MCPSecretKey     []byte
	MCPAllowPrivate  bool
	MCPStdioCommands []string
	// A2AAllowPrivate opens private addresses to remote A2A agents
	// (workers with an "a2a" setting; docs/a2a-client.md).
	A2AAllowPrivate bool
	// Webhooks (docs/webhooks.md): WebhooksAllowPrivate opens private
	// addresses to webhook endpoints only; the rest time the deliveries.
	WebhooksAllowPrivate    bool
	WebhookTimeout          time.Duration
	WebhookRetryFor         time.Duration
	WebhookRetryMaxInterval time.Duration
	// Retention (docs/persistence.md): finished runs are deleted
	// RunRetention after they completed (0: kept for ever), or after their
	// tenant's period in RunRetentionTenants; the workers sweep every
	// RunRetentionInterval.
	RunRetention         time.Duration
	RunRetentionTenants  map[string]time.Duration
	RunRetentionInterval time.Duration
	// Memory (docs/memory.md): the embedding model of semantic search
	// ("" : full-text search only), its OpenAI-compatible endpoint and key
	// (default: the openai provider's), the vector size asked for, and
	// the most vectors a process keeps in memory.
	MemoryEmbeddingModel      string
	MemoryEmbeddingBaseURL    string
	MemoryEmbeddingAPIKey     string
	MemoryEmbeddingDimensions int
	MemoryMaxCachedVectors    int
	// ArtifactMaxBytes bounds one file an agent produces and
	// ArtifactRunMaxBytes the sum of a run's files (docs/results.md,
	// Artifacts): larger ones are not stored.
	ArtifactMaxBytes    int64
	ArtifactRunMaxBytes int64
	// ToolCallTimeout bounds one attempt of a tool call's activity.
	ToolCallTimeout time.Duration
	// ApprovalTimeout is how long an approval gate of an agent without
	// its own approval_timeout waits before its default decision; 0 waits
	// until someone decides.
	ApprovalTimeout time.Duration

	// Event streaming.
	EventFlushInterval  time.Duration
	SSEPollInterval     time.Duration
	SSEIdlePollInterval time.Duration
	SSEKeepAlive        time.Duration
	ReconcileInterval   time.Duration
	// SSENotify is auto, local or off (see SSE_NOTIFY).
	SSENotify             string
	SSESafetyPollInterval time.Duration

	// Access control. AuthMode is "" until the command resolves it
	// (ResolveAuthMode): `executor dev` defaults to off, `executor serve`
	// to required.
	AuthMode        string
	OIDCIssuer      string
	OIDCAudience    string
	OIDCJWKSURL     string
	OIDCTenantClaim string
	OIDCScopesClaim string
	StreamTokenTTL  time.Duration
}

// AUTH_MODE values.
const (
	AuthOff      = "off"
	AuthRequired = "required"
)

// Default listen addresses: `executor dev` serves this machine only;
// `executor serve` every interface, for containers and load balancers.
const (
	DevHTTPAddr   = "127.0.0.1:8080"
	ServeHTTPAddr = ":8080"
)

// ResolveCommandDefaults fills the settings whose default depends on the
// command: the listen address, AUTH_MODE (off for dev, required for serve)
// and LLM_OFFLINE_FALLBACK (true for dev, false for serve).
func (c *Config) ResolveCommandDefaults(dev bool) {
	if c.HTTPAddr == "" {
		c.HTTPAddr = ServeHTTPAddr
		if dev {
			c.HTTPAddr = DevHTTPAddr
		}
	}
	if c.AuthMode == "" {
		c.AuthMode = AuthRequired
		if dev {
			c.AuthMode = AuthOff
		}
	}
	if c.LLMOfflineFallback == "" {
		c.LLMOfflineFallback = "false"
		if dev {
			c.LLMOfflineFallback = "true"
		}
	}
}

// OfflineFallback says whether models routed to no configured provider are
// answered by the offline model (LLM_OFFLINE_FALLBACK, resolved).
func (c Config) OfflineFallback() bool { return c.LLMOfflineFallback == "true" }

// SSE_NOTIFY values.
const (
	// NotifyAuto: in-process notifications when one process runs the
	// worker and the API, plus PostgreSQL LISTEN/NOTIFY on PostgreSQL.
	NotifyAuto = "auto"
	// NotifyLocal: in-process notifications only.
	NotifyLocal = "local"
	// NotifyOff: no notifications; the API polls.
	NotifyOff = "off"
)

// MetricsOff is the METRICS_ADDR value that turns /metrics off.
const MetricsOff = "off"

// DefaultWorkerMetricsAddr is where a process that runs no API serves
// /metrics when METRICS_ADDR is empty.
const DefaultWorkerMetricsAddr = ":9090"

// SQLitePath is the embedded database file used when DatabaseURL is empty.
func (c Config) SQLitePath() string { return filepath.Join(c.DataDir, "executor.db") }

// Var documents one environment variable.
type Var struct {
	Name        string
	Default     string
	Description string
	set         func(c *Config, v string) error
}

var vars = []Var{
	{"HTTP_ADDR", "", "Address the HTTP API listens on. Empty: `127.0.0.1:8080` for `executor dev` (this machine only), `:8080` (every interface) for `executor serve`.", func(c *Config, v string) error { c.HTTPAddr = v; return nil }},
	{"DATABASE_URL", "", "PostgreSQL URL (`postgres://user:pass@host:5432/db?sslmode=disable`). Empty: an embedded SQLite file `executor.db` under `DATA_DIR`.", func(c *Config, v string) error { c.DatabaseURL = v; return nil }},
	{"DB_MAX_OPEN_CONNS", "20", "Most PostgreSQL connections this process opens at once; a request that finds them all busy waits for one instead of failing. Keep the sum over every API and worker process (plus one per API process for `SSE_NOTIFY`'s LISTEN) under the server's `max_connections` (100 by default: 2 API + 2 worker processes hold at most 82). SQLite always uses one.", intVar(func(c *Config, n int) { c.DBMaxOpenConns = n })},
	{"DB_MAX_IDLE_CONNS", "10", "Most idle PostgreSQL connections kept for reuse (at most `DB_MAX_OPEN_CONNS`).", intVar(func(c *Config, n int) { c.DBMaxIdleConns = n })},
	{"DB_CONN_MAX_LIFETIME", "30m", "A PostgreSQL connection is closed (and reopened when needed) this long after it was opened, so connections move to a restarted or failed-over server.", durationVar(func(c *Config, d time.Duration) { c.DBConnMaxLifetime = d })},
	{"DATA_DIR", "./.data", "Directory for the embedded SQLite database and the dev server's Temporal database.", func(c *Config, v string) error { c.DataDir = v; return nil }},
	{"LOG_LEVEL", "info", "`debug`, `info`, `warn` or `error`.", func(c *Config, v string) error { c.LogLevel = v; return nil }},
	{"LOG_FORMAT", "text", "`text` or `json` (structured logs for collectors).", func(c *Config, v string) error { c.LogFormat = v; return nil }},
	{"MAX_BODY_BYTES", "1048576", "Largest accepted request body; larger ones get 413.", intVar(func(c *Config, n int) { c.MaxBodyBytes = int64(n) })},
	{"RATE_LIMIT_RPS", "20", "Requests per second each API key (or OIDC subject; without access control, each client address) may sustain; over it, 429 `RATE_LIMIT_EXCEEDED` with `Retry-After`. `/healthz`, `/readyz` and `/metrics` are exempt. `0`: no limit.", func(c *Config, v string) error {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("want a number of requests per second, 0 or more, got %q", v)
		}
		c.RateLimitRPS = f
		return nil
	}},
	{"RATE_LIMIT_BURST", "40", "Requests each API key may send at once above `RATE_LIMIT_RPS` (the size of its token bucket).", intVar(func(c *Config, n int) { c.RateLimitBurst = n })},
	{"MAX_CONCURRENT_RUNS_PER_TENANT", "50", "Runs a tenant may have admitted and unfinished at once, across every API replica; a start beyond it waits in the admission queue (status `queued`, docs/queue.md), or gets 429 `RATE_LIMIT_EXCEEDED` with `Retry-After` when it asks `on_limit: \"reject\"`. `0`: no limit.", nonNegativeIntVar(func(c *Config, n int) { c.MaxConcurrentRunsPerTenant = n })},
	{"MAX_QUEUED_RUNS_PER_TENANT", "1000", "Runs a tenant may have waiting in the admission queue; a start that would queue past it gets 429 `RATE_LIMIT_EXCEEDED` with `Retry-After`. `0`: no bound.", nonNegativeIntVar(func(c *Config, n int) { c.MaxQueuedRunsPerTenant = n })},
	{"QUEUE_SWEEP_INTERVAL", "30s", "How often workers admit queued runs whose places have freed, a safety net under the admission at every run's end. `0`: no sweep.", durationVar(func(c *Config, d time.Duration) { c.QueueSweepInterval = d })},
	{"CORS_ALLOWED_ORIGINS", "", "Origins whose web pages may call the API from a browser, comma-separated, exact (`https://app.example.com`, `http://localhost:3000`). Empty: none; browsers' cross-origin calls are refused.", func(c *Config, v string) error {
		origins := splitList(v)
		for _, o := range origins {
			if err := checkOrigin(o); err != nil {
				return err
			}
		}
		c.CORSAllowedOrigins = origins
		return nil
	}},
	{"IDEMPOTENCY_KEY_TTL", "24h", "How long an `Idempotency-Key` is remembered: a request sent again with the same key within it gets the first response again instead of creating twice.", durationVar(func(c *Config, d time.Duration) { c.IdempotencyKeyTTL = d })},
	{"SHUTDOWN_TIMEOUT", "30s", "How long SIGINT/SIGTERM waits for in-flight requests and activities.", durationVar(func(c *Config, d time.Duration) { c.ShutdownTimeout = d })},
	{"METRICS_ADDR", "", "Address of a separate listener for `/metrics`, `/healthz` and `/readyz`, e.g. `:9090`; `/metrics` then stays off `HTTP_ADDR`. Empty: `/metrics` on `HTTP_ADDR` when the process runs the API, else (`serve -role worker`) on `:9090`. `off`: no `/metrics` anywhere.", func(c *Config, v string) error { c.MetricsAddr = strings.TrimSpace(v); return nil }},
	{"METRICS_TENANT_LABEL", "false", "Label `executor_llm_cost_usd_total` by tenant as well as by model. Off by default because `/metrics` needs no key and would tell whoever reaches it every tenant's name and spend; `true` is only accepted with `/metrics` on an operator-only listener (`METRICS_ADDR` set, or a worker-only process), never on `HTTP_ADDR`.", boolVar(func(c *Config, b bool) { c.MetricsTenantLabel = b })},
	{"TEMPORAL_ADDRESS", "", "Temporal frontend `host:port`. `executor dev` starts a dev server when it is empty; `executor serve` then uses `127.0.0.1:7233`.", func(c *Config, v string) error { c.TemporalAddress = v; return nil }},
	{"TEMPORAL_GRPC_COMPRESSION", "auto", "Compression of the gRPC requests to Temporal: `gzip`, `none`, or `auto` (none when `TEMPORAL_ADDRESS` is a loopback address, where gzip only costs CPU on both sides; gzip otherwise).", func(c *Config, v string) error {
		switch v {
		case "auto", "gzip", "none":
			c.TemporalCompression = v
			return nil
		}
		return fmt.Errorf("want auto, gzip or none, got %q", v)
	}},
	{"TEMPORAL_NAMESPACE", "default", "Temporal namespace of runs.", func(c *Config, v string) error { c.TemporalNamespace = v; return nil }},
	{"TEMPORAL_TASK_QUEUE", "op-stack-executor", "Task queue the worker polls and runs are started on.", func(c *Config, v string) error { c.TaskQueue = v; return nil }},
	{"TEMPORAL_CLI", "./bin/temporal", "temporal CLI binary `executor dev` starts the dev server with (`make run` builds it).", func(c *Config, v string) error { c.TemporalCLI = v; return nil }},
	{"TEMPORAL_DEV_PORT", "7233", "Frontend port of the dev server `executor dev` starts.", intVar(func(c *Config, n int) { c.DevServerPort = n })},
	{"TEMPORAL_UI_PORT", "8233", "Web UI port of the dev server `executor dev` starts.", intVar(func(c *Config, n int) { c.DevServerUIPort = n })},
	{"TEMPORAL_SEARCH_ATTRIBUTES", "auto", "Whether runs set the search attributes `HierarchyId`, `RunStatus`, `HierarchyName` (`executor dev` registers them; on a cluster create them first, see Operations). `auto`: when the namespace has them.", func(c *Config, v string) error {
		switch v {
		case "auto", "true", "false":
			c.TemporalSearchAttributes = v
			return nil
		}
		return fmt.Errorf("want auto, true or false, got %q", v)
	}},
	{"TEMPORAL_DEV_TUNED", "true", "Start the dev server with the latency settings of docs/performance.md (`false`: its defaults).", boolVar(func(c *Config, b bool) { c.DevServerTuned = b })},

	{"OPENAI_API_KEY", "", "Key of the `openai` provider.", func(c *Config, v string) error { c.OpenAIAPIKey = v; return nil }},
	{"OPENAI_BASE_URL", "https://api.openai.com/v1", "Base URL of the `openai` provider (any OpenAI-compatible endpoint works).", func(c *Config, v string) error { c.OpenAIBaseURL = v; return nil }},
	{"OPENROUTER_API_KEY", "", "Key of the `openrouter` provider.", func(c *Config, v string) error { c.OpenRouterAPIKey = v; return nil }},
	{"OPENROUTER_BASE_URL", "https://openrouter.ai/api/v1", "Base URL of the `openrouter` provider.", func(c *Config, v string) error { c.OpenRouterBaseURL = v; return nil }},
	{"COMPATIBLE_BASE_URL", "", "Base URL of the `compatible` provider: any OpenAI-compatible server (vLLM, Ollama, LiteLLM, …). Empty: not configured.", func(c *Config, v string) error { c.CompatibleBaseURL = v; return nil }},
	{"COMPATIBLE_API_KEY", "", "Key of the `compatible` provider, if it needs one.", func(c *Config, v string) error { c.CompatibleAPIKey = v; return nil }},
	{"OPENAI_API_KEY_FILE", "", "File holding the key of the `openai` provider, instead of `OPENAI_API_KEY` (not both); setting it configures the provider. Reread every `LLM_KEY_FILE_POLL` and on SIGHUP: a key rotated in the file is sent from the next request on, without a restart.", func(c *Config, v string) error { c.OpenAIAPIKeyFile = strings.TrimSpace(v); return nil }},
	{"OPENROUTER_API_KEY_FILE", "", "File holding the key of the `openrouter` provider, instead of `OPENROUTER_API_KEY`; reread as `OPENAI_API_KEY_FILE` is.", func(c *Config, v string) error { c.OpenRouterAPIKeyFile = strings.TrimSpace(v); return nil }},
	{"COMPATIBLE_API_KEY_FILE", "", "File holding the key of the `compatible` provider, instead of `COMPATIBLE_API_KEY`; reread as `OPENAI_API_KEY_FILE` is.", func(c *Config, v string) error { c.CompatibleAPIKeyFile = strings.TrimSpace(v); return nil }},
	{"LLM_KEY_FILE_POLL", "10s", "How often the `*_API_KEY_FILE` files are reread. `0`: only on SIGHUP.", nonNegativeDurationVar(func(c *Config, d time.Duration) { c.LLMKeyFilePoll = d })},
	{"LLM_CHECK_KEYS_AT_START", "off", "`warn` or `fail`: at start, ask each configured OpenAI-compatible provider whether it accepts its key (`GET <base URL>/models`, no tokens spent). A refused key (401/403) is logged (`warn`) or stops the process before it serves (`fail`); a provider that cannot tell (no `/models`, 5xx, no answer within 10s) is only logged. `off`: no check.", func(c *Config, v string) error {
		switch v {
		case "off", "warn", "fail":
			c.LLMCheckKeysAtStart = v
			return nil
		}
		return fmt.Errorf("want off, warn or fail, got %q", v)
	}},
	{"LLM_MODELS", "", "Model table: `model=provider[:upstream_model]`, comma-separated, e.g. `gemini-2.0-flash=openrouter:google/gemini-2.0-flash-001,gpt-4o=openai`. Models not listed go to `LLM_DEFAULT_PROVIDER`.", func(c *Config, v string) error { c.LLMModels = v; return nil }},
	{"LLM_DEFAULT_MODEL", "gemini-2.0-flash", "Model of agents that name none (contract 002's default).", func(c *Config, v string) error { c.LLMDefaultModel = v; return nil }},
	{"LLM_DEFAULT_PROVIDER", "", "Provider of models not in `LLM_MODELS`. Empty: the first configured of `openai`, `openrouter`, `compatible`; with none configured, the built-in `offline` model if `LLM_OFFLINE_FALLBACK` allows it, else none (runs needing it are refused). `offline` chooses the offline model explicitly.", func(c *Config, v string) error { c.LLMDefaultProvider = v; return nil }},
	{"LLM_ALLOWED_BASE_URLS", "", "Base URLs an agent's `llm_config.base_url` may name besides its provider's configured one (and `https://api.openai.com/v1` / `https://openrouter.ai/api/v1`, which mean the provider itself), comma-separated. Calls to them carry the provider's key; any other base URL is refused.", func(c *Config, v string) error { c.LLMAllowedBaseURLs = splitList(v); return nil }},
	{"AWS_BEDROCK_ENABLED", "auto", "Configure the `aws_bedrock` provider: `true`, `false`, or `auto`: only when the environment holds AWS credentials (`AWS_ACCESS_KEY_ID` with `AWS_SECRET_ACCESS_KEY`, `AWS_PROFILE`, `AWS_BEARER_TOKEN_BEDROCK`, web identity or container credentials). Set `true` to use an EC2 instance role.", func(c *Config, v string) error {
		switch v = strings.ToLower(strings.TrimSpace(v)); v {
		case "auto", "true", "false":
			c.AWSBedrockEnabled = v
			return nil
		}
		return fmt.Errorf("want auto, true or false, got %q", v)
	}},
	{"AWS_BEDROCK_ENDPOINT", "", "Endpoint of the `aws_bedrock` provider for every region, e.g. a VPC endpoint or a test fake. Empty: AWS's regional endpoints.", func(c *Config, v string) error { c.AWSBedrockEndpoint = v; return nil }},
	{"LLM_OFFLINE_FALLBACK", "", "`true`: models that route to no configured provider are answered by the built-in `offline` model (placeholder text, results say `offline`); `false`: a run whose agents need such a model is refused at start with 400 `MISSING_API_KEY`. Empty: `true` for `executor dev`, `false` for `executor serve`. Choosing the offline model explicitly (`LLM_DEFAULT_PROVIDER=offline`, an `LLM_MODELS` entry `model=offline`, an agent's provider or model `offline`) works either way.", func(c *Config, v string) error {
		switch v = strings.ToLower(strings.TrimSpace(v)); v {
		case "", "true", "false":
			c.LLMOfflineFallback = v
			return nil
		}
		return fmt.Errorf("want true or false, got %q", v)
	}},
	{"OFFLINE_TOKEN_DELAY", "30ms", "Delay between the offline model's tokens, so its streaming can be watched.", durationVar(func(c *Config, d time.Duration) { c.OfflineTokenDelay = d })},
	{"LLM_CALL_TIMEOUT", "5m", "Longest one LLM call (one activity attempt) may take.", durationVar(func(c *Config, d time.Duration) { c.LLMCallTimeout = d })},
	{"LLM_HEARTBEAT_TIMEOUT", "15s", "An LLM call whose worker has not heartbeated for this long is retried elsewhere.", durationVar(func(c *Config, d time.Duration) { c.LLMHeartbeatTimeout = d })},
	{"LLM_MAX_ATTEMPTS", "5", "Attempts per LLM call, first one included (429, 5xx, timeouts and network errors retry; 400/401/403/404 never do).", intVar(func(c *Config, n int) { c.LLMMaxAttempts = n })},
	{"LLM_RETRY_INITIAL", "1s", "First retry delay; doubles per attempt. A provider's Retry-After overrides it.", durationVar(func(c *Config, d time.Duration) { c.LLMRetryInitial = d })},
	{"LLM_RETRY_MAX", "30s", "Longest retry delay.", durationVar(func(c *Config, d time.Duration) { c.LLMRetryMax = d })},
	{"LLM_PRICES_FILE", "", "JSON file of model prices in USD per million tokens (`{\"my-model\": {\"input\": 1, \"output\": 4, \"cached_input\": 0.5}}`), over the built-in list prices; see [Cost](#cost). Empty: the built-in prices only.", func(c *Config, v string) error {
		t, err := pricing.Load(v)
		c.LLMPrices = t
		return err
	}},
	{"LLM_BREAKER_FAILURES", "5", "Consecutive retryable failures (429, 5xx, timeouts, network errors) of one provider that open its circuit in a worker process: calls to it then fail fast (or move to the agent's `fallback_models`) until a probe succeeds. Below 1: 5.", intVar(func(c *Config, n int) { c.LLMBreakerFailures = n })},
	{"LLM_BREAKER_COOLDOWN", "30s", "How long an open circuit fails calls fast before one probe call is let through (half-open).", durationVar(func(c *Config, d time.Duration) { c.LLMBreakerCooldown = d })},
	{"CONTINUE_AS_NEW_AFTER", "10000", "History length past which a run's workflow continues as new, between team turns or inside them (Temporal's limits: 51,200 events, 10,000 signals per execution).", intVar(func(c *Config, n int) { c.ContinueAsNewAfter = n })},
	{"MAX_DELEGATIONS_PER_TURN", "8", "Most sub-agents one agent turn may start through `delegate` (over all its tool rounds); further delegate calls are refused with a tool result saying so and a `system.warning`. At least 1.", intVar(func(c *Config, n int) { c.MaxDelegationsPerTurn = n })},
	{"MAX_DELEGATIONS_PER_RUN", "64", "Most sub-agents a whole run may start through `delegate`, nested sub-agents and continue-as-new included; further delegate calls are refused the same way. At least 1.", intVar(func(c *Config, n int) { c.MaxDelegationsPerRun = n })},
	{"TOOLS_HTTP_ALLOWED_HOSTS", "", "Hosts the `http_get` tool may fetch, comma-separated (`example.com`, or `.example.com` for its subdomains). Empty: any public host.", func(c *Config, v string) error { c.ToolsHTTPAllowedHosts = splitList(v); return nil }},
	{"TOOLS_HTTP_ALLOW_PRIVATE", "false", "Let `http_get` reach loopback, private, link-local and CGNAT addresses and the host's own interface addresses (off: such URLs are refused, also after DNS resolution and redirects).", boolVar(func(c *Config, b bool) { c.ToolsHTTPAllowPrivate = b })},
	{"TOOLS_HTTP_MAX_BYTES", "1048576", "Largest response body `http_get` returns; longer ones are cut.", intVar(func(c *Config, n int) { c.ToolsHTTPMaxBytes = n })},
	{"TOOLS_HTTP_TIMEOUT", "10s", "Time limit of one `http_get` request.", durationVar(func(c *Config, d time.Duration) { c.ToolsHTTPTimeout = d })},
	{"MCP_SECRET_KEY", "", "Base64 of 32 random bytes (`openssl rand -base64 32`): the AES-256-GCM key that seals MCP servers' headers and bearer tokens in the database. Unset: a server's secrets can only be named as environment variables of the workers (`header_env`: `MCP_HEADER_<NAME>`, `bearer_token_env`: `MCP_TOKEN_<NAME>`). The API and every worker need the same key; changing it makes stored secrets unreadable.", func(c *Config, v string) error {
		if v = strings.TrimSpace(v); v == "" {
			return nil
		}
		key, err := base64.StdEncoding.DecodeString(v)
		if err != nil || len(key) != 32 {
			return fmt.Errorf("must be the base64 of 32 bytes")
		}
		c.MCPSecretKey = key
		return nil
	}},
	{"MCP_ALLOW_PRIVATE", "false", "Let MCP servers sit on loopback, private, link-local and CGNAT addresses and the host's own addresses (off: refused on every connection, redirects included; `TOOLS_HTTP_ALLOW_PRIVATE` also opens them, together with `http_get`'s).", boolVar(func(c *Config, b bool) { c.MCPAllowPrivate = b })},
	{"WEBHOOKS_ALLOW_PRIVATE", "false", "Let webhook endpoints sit on loopback, private, link-local and CGNAT addresses and the host's own addresses (off: a delivery to one is refused and recorded as failed).", boolVar(func(c *Config, b bool) { c.WebhooksAllowPrivate = b })},
	{"WEBHOOK_TIMEOUT", "10s", "Time limit of one webhook delivery attempt (connection, request and answer); a receiver that does not answer in time is retried.", durationVar(func(c *Config, d time.Duration) { c.WebhookTimeout = d })},
	{"WEBHOOK_RETRY_FOR", "24h", "How long a webhook delivery is retried (exponential backoff from 1s) before it is recorded as failed; `webhooks/redeliver` sends it again.", durationVar(func(c *Config, d time.Duration) { c.WebhookRetryFor = d })},
	{"RUN_RETENTION", "0", "How long a finished run and everything stored of it are kept after it completed; the workers then delete it as `runs/delete` would. `0`: for ever.", nonNegativeDurationVar(func(c *Config, d time.Duration) { c.RunRetention = d })},
	{"RUN_RETENTION_TENANTS", "", "Per-tenant retention periods overriding `RUN_RETENTION`, comma-separated `tenant=duration`, e.g. `acme=720h,globex=0` (`0`: for ever).", retentionTenantsVar},
	{"RUN_RETENTION_INTERVAL", "5m", "How often each worker looks for expired runs (at most 100 deleted per sweep).", durationVar(func(c *Config, d time.Duration) { c.RunRetentionInterval = d })},
	{"MEMORY_EMBEDDING_MODEL", "", "Embedding model of long-term memory's semantic search (e.g. `text-embedding-3-small`), called at `MEMORY_EMBEDDING_BASE_URL`/embeddings. Empty: full-text search only ([Memory](memory.md)).", func(c *Config, v string) error { c.MemoryEmbeddingModel = strings.TrimSpace(v); return nil }},
	{"MEMORY_EMBEDDING_BASE_URL", "", "OpenAI-compatible base URL of the embedding model. Empty: `OPENAI_BASE_URL`.", func(c *Config, v string) error { c.MemoryEmbeddingBaseURL = strings.TrimSpace(v); return nil }},
	{"MEMORY_EMBEDDING_API_KEY", "", "Key of the embedding endpoint. Empty: `OPENAI_API_KEY`.", func(c *Config, v string) error { c.MemoryEmbeddingAPIKey = v; return nil }},
	{"MEMORY_EMBEDDING_DIMENSIONS", "256", "Vector size asked of the embedding model (`dimensions`; `0`: the model's own). Smaller vectors take less memory and scan faster ([Memory](memory.md#performance)).", intVar(func(c *Config, n int) { c.MemoryEmbeddingDimensions = n })},
	{"MEMORY_MAX_CACHED_VECTORS", "1000000", "Most memory vectors a process keeps in memory for semantic search; the least recently searched namespaces are dropped first.", intVar(func(c *Config, n int) { c.MemoryMaxCachedVectors = n })},
	{"WEBHOOK_RETRY_MAX_INTERVAL", "5m", "Longest wait between two attempts of a webhook delivery.", durationVar(func(c *Config, d time.Duration) { c.WebhookRetryMaxInterval = d })},
	{"MCP_STDIO_COMMANDS", "", "Programs a stdio MCP server may run on the workers, comma-separated, compared with the server's `command[0]` exactly (e.g. `npx,/opt/mcp/bin/tracker`). Empty: no stdio servers.", func(c *Config, v string) error { c.MCPStdioCommands = splitList(v); return nil }},
	{"A2A_ALLOW_PRIVATE", "false", "Let remote A2A agents (workers with `a2a.card_url`) sit on loopback, private, link-local and CGNAT addresses and the host's own addresses, for their card and their endpoints (off: refused on every connection, redirects included; `TOOLS_HTTP_ALLOW_PRIVATE` also opens them).", boolVar(func(c *Config, b bool) { c.A2AAllowPrivate = b })},
	{"ARTIFACT_MAX_BYTES", "10485760", "Largest file an agent may produce (declared in its answer, or returned by a tool); a larger one is not stored and a `system.warning` with `ARTIFACT_TOO_LARGE` says so.", intVar(func(c *Config, n int) { c.ArtifactMaxBytes = int64(n) })},
	{"ARTIFACT_RUN_MAX_BYTES", "104857600", "Most bytes of files one run may store, over all its agents; a file that would go over is not stored (`ARTIFACT_TOO_LARGE`).", intVar(func(c *Config, n int) { c.ArtifactRunMaxBytes = int64(n) })},
	{"TOOL_CALL_TIMEOUT", "2m", "Longest one tool call (one attempt of its activity) may take; a call that times out on every attempt is an error result for the model (the agent goes on).", durationVar(func(c *Config, d time.Duration) { c.ToolCallTimeout = d })},
	{"APPROVAL_TIMEOUT", "0", "How long an approval gate waits for a person when its agent sets no `approval_timeout`; then the agent's `approval_default` (reject unless it says approve) decides. 0: a gate waits until someone decides.", nonNegativeDurationVar(func(c *Config, d time.Duration) { c.ApprovalTimeout = d })},
	{"EVENT_FLUSH_INTERVAL", "100ms", "Longest an activity holds streamed deltas before sending them to the run's workflow (the first delta of a call goes after 2 ms, so a fast answer goes in one batch); under load it grows to twice the event updates' latency, at most 1 s.", durationVar(func(c *Config, d time.Duration) { c.EventFlushInterval = d })},
	{"SSE_NOTIFY", NotifyAuto, "How the API's poller of a live run learns that the run has new events. `auto`: a process that runs both the worker and the API (`serve -role all`, `executor dev`) is notified in process; on PostgreSQL (`DATABASE_URL`) workers also send `NOTIFY executor_events` and API processes `LISTEN` on a connection of their own. `local`: in process only. `off`: no notifications. A poller without notifications polls (`SSE_POLL_INTERVAL`).", func(c *Config, v string) error {
		switch v = strings.ToLower(strings.TrimSpace(v)); v {
		case NotifyAuto, NotifyLocal, NotifyOff:
			c.SSENotify = v
			return nil
		}
		return fmt.Errorf("want auto, local or off, got %q", v)
	}},
	{"SSE_SAFETY_POLL_INTERVAL", "1s", "With notifications, how often a live run's poller queries its workflow when it is not notified: the longest an event nobody announced waits.", durationVar(func(c *Config, d time.Duration) { c.SSESafetyPollInterval = d })},
	{"SSE_POLL_INTERVAL", "50ms", "Without notifications (see `SSE_NOTIFY`), how often the API's poller of a live run queries its workflow for new events while events are flowing.", durationVar(func(c *Config, d time.Duration) { c.SSEPollInterval = d })},
	{"SSE_IDLE_POLL_INTERVAL", "500ms", "Without notifications, the poller's interval once a run has been quiet for a while.", durationVar(func(c *Config, d time.Duration) { c.SSEIdlePollInterval = d })},
	{"SSE_KEEPALIVE", "15s", "Interval of the keep-alive comment on an idle event stream.", durationVar(func(c *Config, d time.Duration) { c.SSEKeepAlive = d })},
	{"RECONCILE_INTERVAL", "1m", "How often an API process looks for runs still running in the database whose workflow ended without them (terminated, timed out) and marks them failed.", durationVar(func(c *Config, d time.Duration) { c.ReconcileInterval = d })},
	{"AUTH_MODE", "", "`required`: every route but `/healthz`, `/readyz`, `/metrics` and the web console's pages and assets needs an API key or identity-provider token (see [Security](#security-keys-tenants-scopes-limits)); `off`: none does, and everything belongs to the `default` tenant. Empty: `off` for `executor dev`, `required` for `executor serve` (which warns at start when it is `off`).", func(c *Config, v string) error {
		switch v = strings.ToLower(strings.TrimSpace(v)); v {
		case "", AuthOff, AuthRequired:
			c.AuthMode = v
			return nil
		}
		return fmt.Errorf("want off or required, got %q", v)
	}},
	{"OIDC_ISSUER", "", "Issuer (`iss`) of the identity provider whose JWTs are accepted besides API keys. Setting it (with `OIDC_AUDIENCE` and `OIDC_JWKS_URL`) turns OpenID Connect on.", func(c *Config, v string) error { c.OIDCIssuer = v; return nil }},
	{"OIDC_AUDIENCE", "", "Audience (`aud`) the service's tokens must carry.", func(c *Config, v string) error { c.OIDCAudience = v; return nil }},
	{"OIDC_JWKS_URL", "", "URL of the identity provider's signing keys (JWKS), fetched when a token names a key not yet known.", func(c *Config, v string) error { c.OIDCJWKSURL = v; return nil }},
	{"OIDC_TENANT_CLAIM", "tenant", "Claim of a token that names its tenant (a string).", func(c *Config, v string) error { c.OIDCTenantClaim = v; return nil }},
	{"OIDC_SCOPES_CLAIM", "scope", "Claim of a token that lists its scopes: a space- or comma-separated string, or an array of strings. Scopes this service does not know are ignored.", func(c *Config, v string) error { c.OIDCScopesClaim = v; return nil }},
	{"STREAM_TOKEN_TTL", "10m", "How long a run's stream token (for browsers' `EventSource`) may be used to connect and reconnect.", durationVar(func(c *Config, d time.Duration) { c.StreamTokenTTL = d })},
	{"CONTEXT_CHAR_LIMIT", "8000", "Longest earlier output (in characters) put into a later agent's prompt.", intVar(func(c *Config, n int) { c.ContextCharLimit = n })},
	{"CONTEXT_TOTAL_CHAR_LIMIT", "32000", "Most characters of earlier outputs put into one prompt together: the newest outputs are kept, older ones are left out (the prompt says how many).", intVar(func(c *Config, n int) { c.ContextTotalChars = n })},
}

// Vars lists every environment variable the service reads.
func Vars() []Var { return vars }

// Load reads the configuration from the environment, applying defaults.
func Load() (Config, error) { return load(os.LookupEnv) }

func load(lookup func(string) (string, bool)) (Config, error) {
	var c Config
	for _, v := range vars {
		value, ok := lookup(v.Name)
		if !ok || value == "" {
			value = v.Default
		}
		if err := v.set(&c, value); err != nil {
			return Config{}, fmt.Errorf("%s: %w", v.Name, err)
		}
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return Config{}, fmt.Errorf("LOG_FORMAT: want text or json, got %q", c.LogFormat)
	}
	for _, pair := range [][3]string{
		{"OPENAI_API_KEY", c.OpenAIAPIKey, c.OpenAIAPIKeyFile},
		{"OPENROUTER_API_KEY", c.OpenRouterAPIKey, c.OpenRouterAPIKeyFile},
		{"COMPATIBLE_API_KEY", c.CompatibleAPIKey, c.CompatibleAPIKeyFile},
	} {
		// Which one would win is a guess nobody should have to make.
		if pair[1] != "" && pair[2] != "" {
			return Config{}, fmt.Errorf("%s and %s_FILE are both set; set one", pair[0], pair[0])
		}
	}
	if (c.OIDCIssuer != "" || c.OIDCAudience != "" || c.OIDCJWKSURL != "") && (c.OIDCIssuer == "" || c.OIDCAudience == "" || c.OIDCJWKSURL == "") {
		return Config{}, fmt.Errorf("OIDC_ISSUER, OIDC_AUDIENCE and OIDC_JWKS_URL must be set together")
	}
	return c, nil
}

func intVar(set func(*Config, int)) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("want a positive integer, got %q", v)
		}
		set(c, n)
		return nil
	}
}

func nonNegativeIntVar(set func(*Config, int)) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("want an integer, 0 or more, got %q", v)
		}
		set(c, n)
		return nil
	}
}

// checkOrigin accepts a web origin as browsers send it in Origin:
// http or https, a host, an optional port, nothing else.
func checkOrigin(o string) error {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || strings.HasSuffix(o, "?") || strings.HasSuffix(o, "#") {
		return fmt.Errorf("want origins such as https://app.example.com (scheme and host, no path or wildcard), got %q", o)
	}
	if strings.Contains(u.Host, "*") || o != strings.ToLower(o) {
		return fmt.Errorf("want exact origins in lower case, as browsers send them (no wildcard), got %q", o)
	}
	return nil
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func boolVar(set func(*Config, bool)) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", v)
		}
		set(c, b)
		return nil
	}
}

// retentionTenantsVar reads RUN_RETENTION_TENANTS: tenant=duration pairs.
func retentionTenantsVar(c *Config, v string) error {
	c.RunRetentionTenants = nil
	for _, pair := range strings.Split(v, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		tenant, period, found := strings.Cut(pair, "=")
		tenant = strings.TrimSpace(tenant)
		d, err := time.ParseDuration(strings.TrimSpace(period))
		if !found || tenant == "" || err != nil || d < 0 {
			return fmt.Errorf("want tenant=duration pairs such as acme=720h, got %q", pair)
		}
		if c.RunRetentionTenants == nil {
			c.RunRetentionTenants = map[string]time.Duration{}
		}
		c.RunRetentionTenants[tenant] = d
	}
	return nil
}

// nonNegativeDurationVar is durationVar that takes 0 (off) too.
func nonNegativeDurationVar(set func(*Config, time.Duration)) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("want a duration such as 24h, or 0, got %q", v)
		}
		set(c, d)
		return nil
	}
}

func durationVar(set func(*Config, time.Duration)) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("want a positive duration such as 30s, got %q", v)
		}
		set(c, d)
		return nil
	}
}
