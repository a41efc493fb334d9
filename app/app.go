// Package app wires the service from its configuration: the LLM router, the
// activities, the Temporal worker and the HTTP API. The executor binary and
// the end-to-end tests build the service through it, so tests exercise the
// same wiring as production.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/op-stack/executor/a2aremote"
	"github.com/op-stack/executor/activities"
	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/memory"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/notify"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/telemetry"
	"github.com/op-stack/executor/tools"
	"github.com/op-stack/executor/webhooks"
	"github.com/op-stack/executor/worker"
)

// RunOptions resolves the per-run engine settings from the configuration.
func RunOptions(cfg config.Config) models.RunOptions {
	return models.RunOptions{
		LLMCallTimeout:        cfg.LLMCallTimeout,
		HeartbeatTimeout:      cfg.LLMHeartbeatTimeout,
		MaxAttempts:           int32(cfg.LLMMaxAttempts),
		RetryInitial:          cfg.LLMRetryInitial,
		RetryMax:              cfg.LLMRetryMax,
		DefaultModel:          cfg.LLMDefaultModel,
		ContextCharLimit:      cfg.ContextCharLimit,
		ContextTotalChars:     cfg.ContextTotalChars,
		ContinueAsNewAfter:    cfg.ContinueAsNewAfter,
		MaxDelegationsPerTurn: cfg.MaxDelegationsPerTurn,
		MaxDelegationsPerRun:  cfg.MaxDelegationsPerRun,
		ToolCallTimeout:       cfg.ToolCallTimeout,
		ApprovalTimeout:       cfg.ApprovalTimeout,
	}
}

// NewLLM builds the model router from the configuration. Keys go from the
// environment, or from their files (*_API_KEY_FILE, which WatchKeys
// rereads), straight into the provider clients and nowhere else; AWS
// credentials are not even read here: the AWS SDK finds them itself when
// Bedrock is first used.
func NewLLM(cfg config.Config) (*llm.Router, error) {
	table, err := llm.ParseModelTable(cfg.LLMModels)
	if err != nil {
		return nil, fmt.Errorf("LLM_MODELS: %w", err)
	}
	openaiKey, err := providerKey("openai", "OPENAI_API_KEY", cfg.OpenAIAPIKey, cfg.OpenAIAPIKeyFile)
	if err != nil {
		return nil, err
	}
	openrouterKey, err := providerKey("openrouter", "OPENROUTER_API_KEY", cfg.OpenRouterAPIKey, cfg.OpenRouterAPIKeyFile)
	if err != nil {
		return nil, err
	}
	compatibleKey, err := providerKey("compatible", "COMPATIBLE_API_KEY", cfg.CompatibleAPIKey, cfg.CompatibleAPIKeyFile)
	if err != nil {
		return nil, err
	}
	var providers []llm.ProviderConfig
	if openaiKey.Get() != "" {
		providers = append(providers, llm.ProviderConfig{Name: "openai", BaseURL: cfg.OpenAIBaseURL, Key: openaiKey})
	}
	if openrouterKey.Get() != "" {
		providers = append(providers, llm.ProviderConfig{Name: "openrouter", BaseURL: cfg.OpenRouterBaseURL, Key: openrouterKey})
	}
	if cfg.CompatibleBaseURL != "" {
		providers = append(providers, llm.ProviderConfig{Name: "compatible", BaseURL: cfg.CompatibleBaseURL, Key: compatibleKey})
	}
	// "auto" looks only at variables, so that a machine without AWS never
	// waits on the EC2 metadata service; instance roles need "true".
	var bedrock *llm.BedrockConfig
	if cfg.AWSBedrockEnabled == "true" || (cfg.AWSBedrockEnabled == "auto" && llm.BedrockCredentialsInEnv(os.Getenv)) {
		// No HTTP client: the SDK's own honours AWS_CA_BUNDLE and has no
		// overall timeout either.
		bedrock = &llm.BedrockConfig{Endpoint: cfg.AWSBedrockEndpoint}
	}
	return llm.NewRouter(llm.RouterConfig{
		Providers:       providers,
		Models:          table,
		DefaultModel:    cfg.LLMDefaultModel,
		DefaultProvider: cfg.LLMDefaultProvider,
		// Unresolved ("") counts as off: only `executor dev`, or an
		// operator saying so, lets stand-in answers through.
		NoOfflineFallback: !cfg.OfflineFallback(),
		OfflineTokenDelay: cfg.OfflineTokenDelay,
		// No client timeout: a stream lasts as long as the activity's
		// start-to-close timeout allows, which cancels its context.
		HTTPClient:      &http.Client{},
		Bedrock:         bedrock,
		AllowedBaseURLs: cfg.LLMAllowedBaseURLs,
		// One breaker per process: every call of this worker to a provider
		// counts towards its circuit.
		Breaker: llm.NewBreaker(cfg.LLMBreakerFailures, cfg.LLMBreakerCooldown, nil),
		// The config package's variable name, where the default hint is
		// vaguer.
		Hints: map[string]string{llm.ProviderCompatible: "set COMPATIBLE_BASE_URL"},
	})
}

// NewTools builds the tool registry: the built-ins and tools.Custom().
func NewTools(cfg config.Config) *tools.Registry {
	return tools.Default(tools.Config{
		HTTPAllowedHosts: cfg.ToolsHTTPAllowedHosts,
		HTTPAllowPrivate: cfg.ToolsHTTPAllowPrivate,
		HTTPMaxBytes:     int64(cfg.ToolsHTTPMaxBytes),
		HTTPTimeout:      cfg.ToolsHTTPTimeout,
	})
}

// Option adds optional wiring to NewWorker and NewAPI; without options
// they record no metrics and trace nothing (as in the end-to-end tests).
type Option func(*options)

type options struct {
	metrics        *telemetry.Metrics
	metricsHandler http.Handler
	tracer         trace.TracerProvider
	notifications  *Notifications
	tokens         auth.Authenticator
}

func collect(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// WithMetrics makes the activities and the API record into m, and the API
// serve handler at GET /metrics when handler is not nil.
func WithMetrics(m *telemetry.Metrics, handler http.Handler) Option {
	return func(o *options) { o.metrics, o.metricsHandler = m, handler }
}

// WithTokens makes the API accept the identity provider's tokens (see
// NewTokenVerifier) besides API keys.
func WithTokens(tokens auth.Authenticator) Option {
	return func(o *options) { o.tokens = tokens }
}

// NewTokenVerifier is the OpenID Connect verifier the OIDC_* settings
// describe, or nil when they are unset. ctx must live as long as the
// service: the verifier fetches the provider's keys with it.
func NewTokenVerifier(ctx context.Context, cfg config.Config) (auth.Authenticator, error) {
	if cfg.OIDCIssuer == "" {
		return nil, nil
	}
	v, err := auth.NewOIDC(ctx, auth.OIDCConfig{
		Issuer: cfg.OIDCIssuer, Audience: cfg.OIDCAudience, JWKSURL: cfg.OIDCJWKSURL,
		TenantClaim: cfg.OIDCTenantClaim, ScopesClaim: cfg.OIDCScopesClaim,
	})
	if err != nil {
		return nil, fmt.Errorf("OIDC: %w", err)
	}
	return v, nil
}

// NewAccess is the API's access control from the configuration: AUTH_MODE
// (empty: off, as tests build the API; the executor binary resolves it per
// command first), API keys from st, tokens when given, and the limits.
func NewAccess(cfg config.Config, st *store.Store, tokens auth.Authenticator) api.Access {
	mode := api.AuthOff
	if cfg.AuthMode == config.AuthRequired {
		mode = api.AuthRequired
	}
	return api.Access{
		Mode:              mode,
		Authenticator:     auth.Chain{Keys: auth.Keys{Lookup: st.KeyLookup()}, Tokens: tokens},
		StreamTokenTTL:    cfg.StreamTokenTTL,
		RateLimit:         api.RateLimit{RPS: cfg.RateLimitRPS, Burst: cfg.RateLimitBurst},
		MaxConcurrentRuns: cfg.MaxConcurrentRunsPerTenant,
		CORSOrigins:       cfg.CORSAllowedOrigins,
		IdempotencyTTL:    cfg.IdempotencyKeyTTL,
	}
}

// WithTracing traces the API's requests with tp; nil traces nothing.
// Workflows and activities are traced by the Temporal client's interceptor
// (telemetry.Telemetry.ClientOptions), not here.
func WithTracing(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracer = tp }
}

// DrainTimeout is the part of the shutdown budget (SHUTDOWN_TIMEOUT) given
// to in-flight requests and activities. The rest, a fifth of it and at most
// 5s, is kept for flushing traces and closing connections, so that the
// whole shutdown ends within the budget.
func DrainTimeout(total time.Duration) time.Duration {
	return total - min(total/5, 5*time.Second)
}

// WebhookQueue hands webhook deliveries to their workflows on the
// configured task queue and timings; nil without a Temporal client.
func WebhookQueue(cfg config.Config, tc client.Client) *webhooks.Queue {
	if tc == nil {
		return nil
	}
	return &webhooks.Queue{Client: tc, TaskQueue: cfg.TaskQueue, Timeout: cfg.WebhookTimeout,
		RetryFor: cfg.WebhookRetryFor, MaxInterval: cfg.WebhookRetryMaxInterval}
}

// NewWorker builds the Temporal worker with the run's activities.
func NewWorker(cfg config.Config, log *slog.Logger, st *store.Store, tc client.Client, router llm.Client, opts ...Option) sdkworker.Worker {
	o := collect(opts)
	acts := &activities.Activities{
		Store:             st,
		LLM:               router,
		Tools:             NewTools(cfg),
		MCP:               NewMCPToolbox(cfg, st),
		A2A:               a2aremote.New(a2aremote.Config{AllowPrivate: cfg.A2AAllowPrivate || cfg.ToolsHTTPAllowPrivate}),
		Events:            activities.SignalSink{Client: tc},
		Log:               log,
		HeartbeatInterval: heartbeatInterval(cfg.LLMHeartbeatTimeout),
		FlushInterval:     cfg.EventFlushInterval,
		Metrics:           o.metrics,
		Prices:            cfg.LLMPrices,
		ArtifactLimits:    store.ArtifactLimits{MaxBytes: cfg.ArtifactMaxBytes, RunMaxBytes: cfg.ArtifactRunMaxBytes},
		Memory:            NewMemory(cfg, st),
	}
	if o.notifications != nil {
		acts.Notifier = o.notifications.Notifier
	}
	// Webhook secrets are sealed under the MCP secret key.
	useMCPSecretKey(cfg, st)
	acts.Webhooks = &activities.Webhooks{Queue: WebhookQueue(cfg, tc), HTTP: webhooks.NewHTTPClient(cfg.WebhooksAllowPrivate, cfg.WebhookTimeout)}
	if r, ok := router.(*llm.Router); ok {
		ObserveCircuits(o.metrics, r.Breaker())
	}
	w := worker.New(tc, acts, worker.Options{TaskQueue: cfg.TaskQueue, StopTimeout: DrainTimeout(cfg.ShutdownTimeout)})
	// Schedules' actions store their runs here, with runs/start's checks
	// (docs/schedules.md): the worker runs them, whether or not an API
	// process is up when a schedule fires.
	runs := &api.Runs{Store: st, Temporal: tc, TaskQueue: cfg.TaskQueue, Options: RunOptions(cfg), MaxConcurrentRuns: cfg.MaxConcurrentRunsPerTenant, Metrics: o.metrics, Namespace: cfg.TemporalNamespace, Log: log, Prices: cfg.LLMPrices}
	runs.Options.SearchAttributes, runs.TenantSearchAttribute, runs.Options.UsageSearchAttributes, runs.ForkSearchAttribute = useSearchAttributes(cfg, log, tc)
	if r, ok := router.(*llm.Router); ok {
		runs.Models = r
	}
	runs.MaxQueuedRuns = cfg.MaxQueuedRunsPerTenant
	starts := &api.ScheduledStarts{Runs: runs}
	w.RegisterActivityWithOptions(starts.PrepareScheduledRun, activity.RegisterOptions{Name: models.ActivityPrepareScheduledRun})
	// The admission queue (docs/queue.md): a queued run's check, and the
	// dispatch at every run's end.
	w.RegisterActivityWithOptions(runs.CheckAdmission, activity.RegisterOptions{Name: models.ActivityCheckAdmission})
	acts.RunEnded = runs.RunEnded
	return w
}

// NewMemory is the tenants' long-term memory (docs/memory.md): semantic
// search when MEMORY_EMBEDDING_MODEL is set, full text always. The
// providers' keys are scrubbed from whatever is saved.
func NewMemory(cfg config.Config, st *store.Store) *memory.Service {
	var embedder memory.Embedder
	if cfg.MemoryEmbeddingModel != "" {
		embedder = &memory.OpenAIEmbedder{
			BaseURL:    firstSet(cfg.MemoryEmbeddingBaseURL, cfg.OpenAIBaseURL),
			APIKey:     firstSet(cfg.MemoryEmbeddingAPIKey, cfg.OpenAIAPIKey),
			Name:       cfg.MemoryEmbeddingModel,
			Dimensions: cfg.MemoryEmbeddingDimensions,
		}
	}
	svc := memory.New(st, embedder, cfg.MemoryMaxCachedVectors)
	for _, k := range []string{cfg.OpenAIAPIKey, cfg.OpenRouterAPIKey, cfg.CompatibleAPIKey, cfg.MemoryEmbeddingAPIKey} {
		if k != "" {
			svc.Scrubber.Known = append(svc.Scrubber.Known, k)
		}
	}
	return svc
}

func firstSet(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// Retention is the retention policy of finished runs (RUN_RETENTION,
// RUN_RETENTION_TENANTS).
func Retention(cfg config.Config) api.RetentionPolicy {
	return api.RetentionPolicy{Default: cfg.RunRetention, Tenants: cfg.RunRetentionTenants}
}

// SweepRetention deletes expired finished runs every
// RUN_RETENTION_INTERVAL until ctx ends (docs/persistence.md, Retention);
// it returns at once when retention is off. Workers run it.
func SweepRetention(ctx context.Context, cfg config.Config, log *slog.Logger, st *store.Store, tc client.Client) {
	go SweepExpiredMemory(ctx, log, st, cfg.RunRetentionInterval)
	runs := &api.Runs{Store: st, Temporal: tc, Namespace: cfg.TemporalNamespace, Log: log}
	runs.SweepRetentionEvery(ctx, Retention(cfg), cfg.RunRetentionInterval)
}

// SweepQueue dispatches the queues of tenants with queued runs every
// QUEUE_SWEEP_INTERVAL until ctx ends (docs/queue.md): a safety net under
// the dispatch at each run's end. Workers run it.
func SweepQueue(ctx context.Context, cfg config.Config, log *slog.Logger, st *store.Store, tc client.Client) {
	runs := &api.Runs{Store: st, Temporal: tc, MaxConcurrentRuns: cfg.MaxConcurrentRunsPerTenant, Log: log}
	runs.SweepQueueEvery(ctx, cfg.QueueSweepInterval)
}

// SweepExpiredMemory deletes memory items past their expiry every interval
// (up to 1,000 a sweep, again at once while sweeps are full) until ctx
// ends. Expired items are never found anyway; this frees their rows.
func SweepExpiredMemory(ctx context.Context, log *slog.Logger, st *store.Store, interval time.Duration) {
	if interval <= 0 {
		interval = 5 * time.Minute
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for {
			n, err := st.DeleteExpiredMemory(ctx, time.Now(), 1000)
			if err != nil {
				if ctx.Err() == nil {
					log.Warn("memory expiry sweep", "error", err)
				}
				break
			}
			if n < 1000 {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// NewAPI builds the HTTP API. router checks runs' models before they start
// (the API reads the same provider configuration as the worker).
func NewAPI(cfg config.Config, log *slog.Logger, st *store.Store, tc client.Client, router *llm.Router, opts ...Option) *api.Server {
	o := collect(opts)
	useMCPSecretKey(cfg, st)
	access := NewAccess(cfg, st, o.tokens)
	runs := &api.Runs{Store: st, Temporal: tc, TaskQueue: cfg.TaskQueue, Options: RunOptions(cfg), MaxConcurrentRuns: access.MaxConcurrentRuns, MaxQueuedRuns: cfg.MaxQueuedRunsPerTenant, Namespace: cfg.TemporalNamespace, Log: log, Prices: cfg.LLMPrices}
	runs.Options.SearchAttributes, runs.TenantSearchAttribute, runs.Options.UsageSearchAttributes, runs.ForkSearchAttribute = useSearchAttributes(cfg, log, tc)
	if router != nil {
		runs.Models = router
	}
	runs.Metrics = o.metrics
	runs.Webhooks = WebhookQueue(cfg, tc)
	mem := NewMemory(cfg, st)
	runs.Memory = mem
	var circuits func() map[string]any
	if router != nil {
		circuits = CircuitInfo(router.Breaker())
	}
	var health api.HealthChecker
	if tc != nil {
		health = api.TemporalHealth(tc)
	}
	var listener notify.Listener
	if o.notifications != nil {
		listener = o.notifications.Listener
	}
	return api.NewServer(api.Options{
		Store:            st,
		Logger:           log,
		MaxBodyBytes:     cfg.MaxBodyBytes,
		Tools:            NewTools(cfg),
		Runs:             runs,
		MCPStdioCommands: cfg.MCPStdioCommands,
		MCPProbe:         MCPProbe(cfg),
		Webhooks:         WebhookQueue(cfg, tc),
		Stream: api.StreamOptions{
			PollInterval:       cfg.SSEPollInterval,
			IdlePollInterval:   cfg.SSEIdlePollInterval,
			SafetyPollInterval: cfg.SSESafetyPollInterval,
			KeepAlive:          cfg.SSEKeepAlive,
		},
		Listener:       listener,
		Metrics:        o.metrics,
		MetricsHandler: o.metricsHandler,
		Health:         health,
		ReadinessInfo:  circuits,
		TracerProvider: o.tracer,
		Access:         access,
		Memory:         mem,
	})
}

// ObserveCircuits exports the breaker's circuits in m (a gauge and a
// counter of openings per provider); a nil m or breaker exports nothing.
func ObserveCircuits(m *telemetry.Metrics, b *llm.Breaker) {
	if m == nil || b == nil {
		return
	}
	m.ObserveCircuits(func() []telemetry.CircuitState {
		states := b.States()
		out := make([]telemetry.CircuitState, len(states))
		for i, s := range states {
			out[i] = telemetry.CircuitState{Provider: s.Provider, State: s.State, Openings: s.Openings}
		}
		return out
	})
}

// CircuitInfo is /readyz's information about the breaker's circuits:
// {"llm_circuits": {"openai": "open", …}} once a provider has been called,
// nothing before; provider names only, never hosts. nil for a nil breaker.
func CircuitInfo(b *llm.Breaker) func() map[string]any {
	if b == nil {
		return nil
	}
	return func() map[string]any {
		states := b.States()
		if len(states) == 0 {
			return nil
		}
		circuits := map[string]string{}
		for _, s := range states {
			circuits[s.Provider] = s.StateName()
		}
		return map[string]any{"llm_circuits": circuits}
	}
}

// heartbeatInterval heartbeats several times per heartbeat timeout, so one
// delayed heartbeat never times an activity out.
func heartbeatInterval(timeout time.Duration) time.Duration {
	return min(time.Second, timeout/4)
}
