package llm

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/op-stack/executor/models"
)

// Provider names the router knows without being told.
const (
	ProviderOpenAI     = "openai"
	ProviderOpenRouter = "openrouter"
	ProviderCompatible = "compatible"
)

// defaultProviderOrder is the order in which a configured provider becomes
// the default when RouterConfig.DefaultProvider is empty. aws_bedrock is
// not in it: AWS credentials on a machine are often there for other
// reasons, and Bedrock does not know the default model's name, so it
// serves only models routed to it explicitly.
var defaultProviderOrder = []string{ProviderOpenAI, ProviderOpenRouter, ProviderCompatible}

// builtinProviders are the provider names a request may use whether or not
// they are configured (spec 001's llm_config providers).
var builtinProviders = []string{ProviderOpenAI, ProviderOpenRouter, ProviderCompatible, ProviderBedrock, OfflineProvider}

// publicBaseURLs are the well-known endpoints of providers: an agent that
// names one just means "that provider", and gets its configured endpoint.
var publicBaseURLs = map[string]string{
	ProviderOpenAI:     OpenAIBaseURL,
	ProviderOpenRouter: OpenRouterBaseURL,
}

// DefaultMissingProviderHints tell an operator how to configure a provider
// that a model routes to but that is missing. RouterConfig.Hints overrides
// them, for a config package whose variable names differ.
var DefaultMissingProviderHints = map[string]string{
	ProviderOpenAI:     "set OPENAI_API_KEY",
	ProviderOpenRouter: "set OPENROUTER_API_KEY",
	ProviderCompatible: "set the compatible provider's base URL",
	ProviderBedrock:    BedrockHint,
}

// ModelRoute says which provider serves a model id, and under which name.
type ModelRoute struct {
	Provider      string
	UpstreamModel string // the name the provider knows; defaults to the model id
}

// ParseModelTable parses a model table such as
//
//	gemini-2.0-flash=openrouter:google/gemini-2.0-flash-001,gpt-4o=openai,local=compatible:llama3
//
// Entries are separated by commas or newlines; each is
// model=provider[:upstream-model], the upstream name defaulting to the model
// id. Only the first colon splits, so upstream names may contain colons
// ("llama3:8b", "…:free"). An empty string is an empty table.
func ParseModelTable(s string) (map[string]ModelRoute, error) {
	table := map[string]ModelRoute{}
	entries := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' || r == ';' })
	for _, raw := range entries {
		entry := strings.TrimSpace(raw)
		if entry == "" {
			continue
		}
		model, target, ok := strings.Cut(entry, "=")
		model, target = strings.TrimSpace(model), strings.TrimSpace(target)
		if !ok {
			return nil, fmt.Errorf("model table entry %q: want model=provider[:upstream-model]", entry)
		}
		if model == "" {
			return nil, fmt.Errorf("model table entry %q: the model id is empty", entry)
		}
		if strings.ContainsAny(model, " \t") {
			return nil, fmt.Errorf("model table entry %q: the model id %q contains spaces", entry, model)
		}
		provider, upstream, _ := strings.Cut(target, ":")
		provider, upstream = strings.TrimSpace(provider), strings.TrimSpace(upstream)
		if provider == "" {
			return nil, fmt.Errorf("model table entry %q: the provider is empty", entry)
		}
		if strings.ContainsAny(provider, " \t") || strings.ContainsAny(upstream, " \t") {
			return nil, fmt.Errorf("model table entry %q: provider and upstream model cannot contain spaces", entry)
		}
		if upstream == "" {
			upstream = model
		}
		if _, dup := table[model]; dup {
			return nil, fmt.Errorf("model table entry %q: model %q is listed twice", entry, model)
		}
		table[model] = ModelRoute{Provider: provider, UpstreamModel: upstream}
	}
	return table, nil
}

// RouterConfig configures a Router.
type RouterConfig struct {
	// Providers are the configured endpoints, by name: "openai",
	// "openrouter", "compatible" (other names work too, but only these
	// three can become the default). Only list a provider that can be
	// used: a model routed to a provider not listed fails to resolve.
	Providers []ProviderConfig
	// Models maps model ids to providers; ids not listed go to the default
	// provider under their own name.
	Models map[string]ModelRoute
	// DefaultModel stands in for an empty model in a request.
	DefaultModel string
	// DefaultProvider serves models the table does not list. Empty means
	// the first configured of openai, openrouter, compatible, else offline
	// (unless NoOfflineFallback). "offline" chooses the offline model.
	DefaultProvider string
	// NoOfflineFallback leaves models without a provider when none is
	// configured and DefaultProvider is empty, instead of sending them to
	// the offline model: Check then answers MISSING_API_KEY, so that a
	// production service never completes runs with stand-in text nobody
	// chose. The offline model stays available when asked for by name (the
	// model or provider "offline", a table entry, DefaultProvider).
	NoOfflineFallback bool
	// OfflineTokenDelay paces the offline model's stream.
	OfflineTokenDelay time.Duration
	// HTTPClient is used by providers that have none of their own.
	HTTPClient *http.Client
	// Hints override DefaultMissingProviderHints, keyed by provider name.
	Hints map[string]string
	// Bedrock configures the aws_bedrock provider; nil leaves it out. It
	// does not inherit HTTPClient (see BedrockConfig.HTTPClient).
	Bedrock *BedrockConfig
	// AllowedBaseURLs are the base URLs a request may name (Request.BaseURL,
	// spec 001's llm_config base_url) for an OpenAI-compatible provider
	// besides the provider's own. Calls to them carry that provider's key,
	// which is why a caller cannot choose any other URL.
	AllowedBaseURLs []string
	// Breaker, when set, fails calls fast while their provider's circuit
	// is open (LLM_BREAKER_FAILURES, LLM_BREAKER_COOLDOWN). The offline
	// model never goes through it.
	Breaker *Breaker
}

// Route is where one model id goes.
type Route struct {
	Model         string // the model id as the caller named it (or the default)
	Provider      string
	UpstreamModel string // the name sent to the provider
	Offline       bool   // served by the built-in offline model
}

// RouteError says why a model cannot be served, in words an operator can
// act on; Provider is empty when no model was named at all.
type RouteError struct {
	Model    string
	Provider string
	Hint     string // how to configure the provider, may be empty
	// Unrouted says the model goes to no provider at all: none is
	// configured and the offline fallback is off.
	Unrouted bool
}

// NoProviderHint says how to give a model a provider when none is
// configured and the offline fallback is off.
const NoProviderHint = "set OPENAI_API_KEY, OPENROUTER_API_KEY or COMPATIBLE_BASE_URL (or route it in LLM_MODELS), or choose the offline model explicitly (LLM_DEFAULT_PROVIDER=offline, LLM_OFFLINE_FALLBACK=true)"

func (e *RouteError) Error() string {
	if e.Unrouted {
		return fmt.Sprintf("model %s routes to no configured provider: %s", e.Model, NoProviderHint)
	}
	if e.Provider == "" {
		return "no model named and no default model configured"
	}
	msg := fmt.Sprintf("model %s routes to provider %s, which is not configured", e.Model, e.Provider)
	if e.Hint != "" {
		msg += ": " + e.Hint
	}
	return msg
}

// Router sends each request to the provider its model routes to. It is a
// Client, and safe for concurrent use.
type Router struct {
	clients         map[string]Client
	baseURLs        map[string]string // for Describe
	models          map[string]ModelRoute
	defaultModel    string
	defaultProvider string
	hints           map[string]string

	providers map[string]ProviderConfig // the OpenAI-compatible ones, for clients on allowed base URLs
	bedrock   *Bedrock
	allowed   map[string]string // normalised allowed base URL -> as configured

	extraMu sync.Mutex
	extra   map[string]Client // provider + " " + normalised base URL

	breaker *Breaker
}

// Keys are the keys of the OpenAI-compatible providers, sorted by
// provider: the ones read from files can be reloaded (ReloadKeys,
// WatchKeys), and every client of the provider, those on allowed base URLs
// included, sends the reloaded key from its next request.
func (r *Router) Keys() []*Key {
	var keys []*Key
	for _, name := range slices.Sorted(maps.Keys(r.providers)) {
		keys = append(keys, r.providers[name].Key)
	}
	return keys
}

// Breaker is the router's circuit breaker, nil when it has none.
func (r *Router) Breaker() *Breaker { return r.breaker }

// NewRouter builds the provider clients. It fails on configuration that
// can never work (a duplicate or nameless provider, an unusable base URL,
// an explicit default provider that is not configured), but not on table
// entries naming a missing provider: Resolve reports those, so that runs
// using other models still work.
func NewRouter(cfg RouterConfig) (*Router, error) {
	r := &Router{
		clients:   map[string]Client{OfflineProvider: NewOffline(cfg.OfflineTokenDelay)},
		baseURLs:  map[string]string{},
		models:    map[string]ModelRoute{},
		hints:     map[string]string{},
		providers: map[string]ProviderConfig{},
		allowed:   map[string]string{},
		extra:     map[string]Client{},
		breaker:   cfg.Breaker,
	}
	for name, h := range DefaultMissingProviderHints {
		r.hints[name] = h
	}
	for name, h := range cfg.Hints {
		r.hints[name] = h
	}
	for _, p := range cfg.Providers {
		switch {
		case p.Name == "":
			return nil, errors.New("llm router: a provider has no name")
		case p.Name == OfflineProvider:
			return nil, errors.New("llm router: provider name \"offline\" is reserved for the built-in offline model")
		case p.Name == ProviderBedrock:
			return nil, errors.New("llm router: aws_bedrock is not OpenAI-compatible; configure it through RouterConfig.Bedrock")
		case r.clients[p.Name] != nil:
			return nil, fmt.Errorf("llm router: provider %q is configured twice", p.Name)
		case p.Name == ProviderCompatible && p.BaseURL == "":
			return nil, errors.New("llm router: provider compatible needs a base URL")
		}
		if p.BaseURL != "" {
			u, err := url.Parse(p.BaseURL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return nil, fmt.Errorf("llm router: provider %q: base URL must be an absolute http(s) URL", p.Name)
			}
		}
		if p.HTTPClient == nil {
			p.HTTPClient = cfg.HTTPClient
		}
		if p.Key == nil {
			p.Key = NewKey(p.Name, p.APIKey)
		}
		p.APIKey = "" // p.Key holds it, and may be rotated
		c := NewOpenAICompatible(p)
		r.clients[p.Name] = c
		r.providers[p.Name] = p
		r.baseURLs[p.Name] = redactURL(baseURLFor(p))
	}
	if cfg.Bedrock != nil {
		b, err := NewBedrock(*cfg.Bedrock)
		if err != nil {
			return nil, fmt.Errorf("llm router: %w", err)
		}
		r.bedrock = b
		r.clients[ProviderBedrock] = b
		r.baseURLs[ProviderBedrock] = describeBedrock(*cfg.Bedrock)
	}
	for _, raw := range cfg.AllowedBaseURLs {
		if strings.TrimSpace(raw) == "" {
			continue
		}
		norm, err := normalizeBaseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("llm router: allowed base URL %s: %w", redactURL(raw), err)
		}
		r.allowed[norm] = strings.TrimSpace(raw)
	}
	for model, route := range cfg.Models {
		if route.UpstreamModel == "" {
			route.UpstreamModel = model
		}
		r.models[model] = route
	}
	r.defaultModel = cfg.DefaultModel
	r.defaultProvider = cfg.DefaultProvider
	if r.defaultProvider == "" {
		if !cfg.NoOfflineFallback {
			r.defaultProvider = OfflineProvider
		}
		for _, name := range defaultProviderOrder {
			if r.clients[name] != nil {
				r.defaultProvider = name
				break
			}
		}
	} else if r.clients[r.defaultProvider] == nil {
		msg := fmt.Sprintf("llm router: the default provider %s is not configured", r.defaultProvider)
		if h := r.hint(r.defaultProvider); h != "" {
			msg += ": " + h
		}
		return nil, errors.New(msg)
	}
	return r, nil
}

// redactURL is a base URL for logs, without any credentials in it.
func redactURL(base string) string {
	if u, err := url.Parse(base); err == nil {
		return u.Redacted()
	}
	return "(unparseable URL)"
}

// DefaultModel is the model used when a request names none.
func (r *Router) DefaultModel() string { return r.defaultModel }

// DefaultProvider is the provider of models the table does not list; ""
// when there is none (no provider configured, no offline fallback).
func (r *Router) DefaultProvider() string { return r.defaultProvider }

// HasProvider tells whether a provider is configured ("offline" always is).
func (r *Router) HasProvider(name string) bool { return r.clients[name] != nil }

// Resolve says where a model goes, or why it cannot go anywhere. An empty
// model means the default model; the model id "offline", unless the table
// lists it, always means the offline model.
func (r *Router) Resolve(model string) (Route, error) {
	if model == "" {
		model = r.defaultModel
	}
	route, listed := r.models[model]
	switch {
	case listed:
	case model == "" && r.defaultProvider != OfflineProvider:
		return Route{}, &RouteError{}
	case model == "" || model == OfflineProvider:
		route = ModelRoute{Provider: OfflineProvider, UpstreamModel: OfflineProvider}
		model = OfflineProvider
	case r.defaultProvider == "":
		return Route{}, &RouteError{Model: model, Unrouted: true}
	default:
		route = ModelRoute{Provider: r.defaultProvider, UpstreamModel: model}
	}
	if r.clients[route.Provider] == nil {
		return Route{}, &RouteError{Model: model, Provider: route.Provider, Hint: r.hint(route.Provider)}
	}
	return Route{
		Model:         model,
		Provider:      route.Provider,
		UpstreamModel: route.UpstreamModel,
		Offline:       route.Provider == OfflineProvider,
	}, nil
}

func (r *Router) hint(provider string) string {
	if h, ok := r.hints[provider]; ok {
		return h
	}
	known := slices.Sorted(maps.Keys(r.clients))
	return "no such provider is configured (configured: " + strings.Join(known, ", ") + ")"
}

// target is where one request goes: the route, the client to call and,
// for Bedrock, the region.
type target struct {
	route  Route
	client Client
	region string
}

// resolveRequest is the one place that decides where a request goes, so
// that Check and Stream can never disagree. Its errors are *RouteError
// (the model table routes to a missing provider, or no model at all) or
// *models.Error (a per-request provider, base URL or region that cannot
// be honoured).
func (r *Router) resolveRequest(req Request) (target, error) {
	var t target
	provider := strings.ToLower(strings.TrimSpace(req.Provider))
	if provider == "" {
		route, err := r.Resolve(req.Model)
		if err != nil {
			return t, err
		}
		t.route = route
	} else {
		route, err := r.resolveProvider(req.Model, provider)
		if err != nil {
			return t, err
		}
		t.route = route
	}
	t.client = r.clients[t.route.Provider]
	t.region = strings.TrimSpace(req.Region)
	if t.route.Provider == ProviderBedrock && t.region != "" && !regionPattern.MatchString(t.region) {
		return t, &models.Error{Code: models.CodeInvalidConfig, Field: "region",
			Message: fmt.Sprintf("region %q is not an AWS region name (such as us-east-1)", truncate(t.region, 40))}
	}
	if base := strings.TrimSpace(req.BaseURL); base != "" {
		if err := r.applyBaseURL(&t, base); err != nil {
			return t, err
		}
	}
	return t, nil
}

// resolveProvider routes a model to the provider a request names. The
// table still supplies the upstream name when it lists the model for that
// same provider; otherwise the model goes upstream as given.
func (r *Router) resolveProvider(model, provider string) (Route, error) {
	if !r.knownProvider(provider) {
		return Route{}, &models.Error{Code: models.CodeProviderNotSupported, Field: "provider",
			Message: fmt.Sprintf("provider %q is not supported; supported providers: %s", truncate(provider, 40), strings.Join(r.ProviderNames(), ", "))}
	}
	if r.clients[provider] == nil {
		msg := fmt.Sprintf("provider %s is not configured", provider)
		if h := r.hint(provider); h != "" {
			msg += ": " + h
		}
		return Route{}, &models.Error{Code: models.CodeMissingAPIKey, Field: "provider", Message: msg}
	}
	if model == "" {
		model = r.defaultModel
	}
	if model == "" {
		if provider != OfflineProvider {
			return Route{}, &RouteError{}
		}
		model = OfflineProvider
	}
	upstream := model
	if mr, ok := r.models[model]; ok && mr.Provider == provider {
		upstream = mr.UpstreamModel
	}
	return Route{Model: model, Provider: provider, UpstreamModel: upstream, Offline: provider == OfflineProvider}, nil
}

func (r *Router) knownProvider(name string) bool {
	return slices.Contains(builtinProviders, name) || r.clients[name] != nil
}

// ProviderNames lists, sorted, every provider name a request may name:
// the built-in ones (openai, openrouter, compatible, aws_bedrock, offline)
// and any other configured one. HasProvider tells which are configured.
func (r *Router) ProviderNames() []string {
	names := slices.Clone(builtinProviders)
	for name := range r.clients {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// ConfiguredProviders lists, sorted, the providers that can serve calls
// ("offline" always can).
func (r *Router) ConfiguredProviders() []string {
	return slices.Sorted(maps.Keys(r.clients))
}

// applyBaseURL honours a request's base URL, or refuses it. A base URL
// chosen by whoever writes a hierarchy would receive the provider's key, so
// only the provider's own endpoints and LLM_ALLOWED_BASE_URLS are
// accepted.
func (r *Router) applyBaseURL(t *target, base string) error {
	provider := t.route.Provider
	norm, err := normalizeBaseURL(base)
	if err != nil {
		return &models.Error{Code: models.CodeInvalidConfig, Field: "base_url", Message: "base_url " + err.Error()}
	}
	refuse := func(why string) error {
		return &models.Error{Code: models.CodeInvalidConfig, Field: "base_url",
			Message: fmt.Sprintf("base_url %s is not allowed for provider %s: %s", redactURL(norm), provider, why)}
	}
	switch provider {
	case OfflineProvider:
		return refuse("the offline model has no endpoint")
	case ProviderBedrock:
		// AWS's public endpoint of a region means "Bedrock in that region";
		// the configured endpoint override means itself.
		if ep := r.bedrock.Endpoint(); ep != "" {
			if n, err := normalizeBaseURL(ep); err == nil && n == norm {
				return nil
			}
		}
		if m := bedrockEndpointPattern.FindStringSubmatch(norm); m != nil {
			if t.region != "" && t.region != m[1] {
				return &models.Error{Code: models.CodeInvalidConfig, Field: "base_url",
					Message: fmt.Sprintf("base_url names region %s but region is %s", m[1], t.region)}
			}
			t.region = m[1]
			return nil
		}
		return refuse("Bedrock takes a region, or AWS_BEDROCK_ENDPOINT for every agent")
	}
	pc, ok := r.providers[provider]
	if !ok {
		return refuse("the provider is not OpenAI-compatible")
	}
	if own, err := normalizeBaseURL(baseURLFor(pc)); err == nil && own == norm {
		return nil
	}
	if pub, ok := publicBaseURLs[provider]; ok {
		if n, _ := normalizeBaseURL(pub); n == norm {
			return nil // the provider's configured endpoint serves it
		}
	}
	configured, ok := r.allowed[norm]
	if !ok {
		return refuse("it is neither the provider's configured base URL nor listed in LLM_ALLOWED_BASE_URLS")
	}
	key := provider + " " + norm
	r.extraMu.Lock()
	defer r.extraMu.Unlock()
	c, ok := r.extra[key]
	if !ok {
		c = NewOpenAICompatible(ProviderConfig{Name: provider, BaseURL: configured, Key: pc.Key, HTTPClient: pc.HTTPClient})
		r.extra[key] = c
	}
	t.client = c
	return nil
}

// bedrockEndpointPattern matches AWS's public Bedrock runtime endpoints
// (normalised: no trailing slash) and captures the region.
var bedrockEndpointPattern = regexp.MustCompile(`^https://bedrock-runtime(?:-fips)?\.([a-z]{2}(?:-[a-z]+)+-[0-9]{1,2})\.amazonaws\.com(?:\.cn)?$`)

// normalizeBaseURL makes equal base URLs compare equal: scheme and host in
// lower case, no trailing slashes, no fragment.
func normalizeBaseURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errors.New("must be an absolute http(s) URL")
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	u.Fragment, u.RawFragment = "", ""
	return u.String(), nil
}

// Check tells whether a run could call the model with this provider and
// base URL, resolving exactly as Stream would but calling no model: an
// agent of a hierarchy is checked before its run starts. It returns nil or a
// *models.Error: CodeProviderNotSupported for a provider that does not
// exist, CodeMissingAPIKey (naming the variables to set) for one that is
// not configured, CodeInvalidConfig for a base URL or region that is not
// allowed. See CheckRequest for agents that name a region.
func (r *Router) Check(model, provider, baseURL string) error {
	return r.CheckRequest(Request{Model: model, Provider: provider, BaseURL: baseURL})
}

// CheckRequest is Check for a request's Model, Provider, BaseURL and
// Region. For aws_bedrock it also checks that a region is known and that
// the AWS credential chain yields credentials: the chain is asked at most
// once (5s timeout), a success remembered, a failure for 30s.
func (r *Router) CheckRequest(req Request) error {
	t, err := r.resolveRequest(req)
	if err != nil {
		return r.checkError(err)
	}
	if t.route.Provider == ProviderBedrock {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return r.bedrock.CheckSetup(ctx, t.region)
	}
	return nil
}

// RoutesOffline tells whether the request, as Stream would route it, goes
// to the built-in offline model; false when it cannot be routed at all.
func (r *Router) RoutesOffline(req Request) bool {
	t, err := r.resolveRequest(req)
	return err == nil && t.route.Offline
}

// checkError turns a resolution error into the *models.Error the API
// answers with.
func (r *Router) checkError(err error) error {
	var me *models.Error
	if errors.As(err, &me) {
		return me
	}
	var re *RouteError
	if !errors.As(err, &re) {
		return err
	}
	switch {
	case re.Unrouted:
		return &models.Error{Code: models.CodeMissingAPIKey, Field: "model", Message: re.Error(), Err: err}
	case re.Provider == "":
		return &models.Error{Code: models.CodeInvalidConfig, Field: "model", Message: re.Error(), Err: err}
	case !r.knownProvider(re.Provider):
		return &models.Error{Code: models.CodeProviderNotSupported, Field: "model", Err: err,
			Message: fmt.Sprintf("model %s routes to provider %q, which is not supported; supported providers: %s", re.Model, re.Provider, strings.Join(r.ProviderNames(), ", "))}
	default:
		return &models.Error{Code: models.CodeMissingAPIKey, Field: "model", Message: re.Error(), Err: err}
	}
}

// Stream resolves the request and runs it on its provider, sending the
// upstream model name but reporting the caller's model id, so usage and
// events stay keyed by the names users gave; an answer of the offline model
// reports "offline", the model that actually answered. req.Provider, req.BaseURL and
// req.Region override the model table as Check describes; req.Region
// applies to aws_bedrock only. A request that cannot be routed fails with
// a non-retryable *Error wrapping the *RouteError or *models.Error.
func (r *Router) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	t, err := r.resolveRequest(req)
	if err != nil {
		provider := "llm"
		var re *RouteError
		if errors.As(err, &re) && re.Provider != "" {
			provider = re.Provider
		} else if p := strings.ToLower(strings.TrimSpace(req.Provider)); p != "" && r.knownProvider(p) {
			provider = p
		}
		msg := err.Error()
		var me *models.Error
		if errors.As(err, &me) {
			msg = me.Message
		}
		return nil, &Error{Provider: provider, Model: req.Model, Message: msg, Cause: err}
	}
	route := t.route
	upstream := req
	upstream.Model = route.UpstreamModel
	upstream.Provider, upstream.BaseURL, upstream.Region = route.Provider, "", t.region
	br := r.breaker
	if route.Offline {
		br = nil
	}
	if !br.Allow(route.Provider) {
		return nil, br.openError(route.Provider, route.Model)
	}
	resp, err := t.client.Stream(ctx, upstream, onDelta)
	var le *Error
	switch {
	case err == nil:
		br.Success(route.Provider)
	case ctx.Err() != nil:
		br.Release(route.Provider)
	case errors.As(err, &le) && le.Retryable:
		br.Failure(route.Provider)
	default:
		br.Success(route.Provider) // the provider answered, rejecting the request
	}
	if errors.As(err, &le) {
		le.Model = route.Model
		if route.UpstreamModel != route.Model {
			le.UpstreamModel = route.UpstreamModel
		}
	}
	if err != nil {
		return nil, err
	}
	resp.Model = route.Model
	if route.Offline {
		// The offline model answered, whatever the agent asked for:
		// results and usage rows name the model that actually answered.
		resp.Model = OfflineProvider
	}
	resp.Provider = route.Provider
	return resp, nil
}

// describeBedrock is Bedrock's entry in Describe.
func describeBedrock(cfg BedrockConfig) string {
	region := cfg.Region
	if region == "" {
		region = "from the AWS configuration"
	}
	endpoint := "AWS endpoints"
	if cfg.Endpoint != "" {
		endpoint = redactURL(cfg.Endpoint)
	}
	return "region " + region + ", " + endpoint
}

// Describe is one line for the startup log: providers with their base
// URLs, the defaults and the model table. It never contains a key.
func (r *Router) Describe() string {
	var providers []string
	for name := range r.clients {
		if name == OfflineProvider {
			continue
		}
		providers = append(providers, fmt.Sprintf("%s (%s)", name, r.baseURLs[name]))
	}
	sort.Strings(providers)
	providers = append(providers, OfflineProvider)

	var models []string
	for id, route := range r.models {
		entry := fmt.Sprintf("%s=%s", id, route.Provider)
		if route.UpstreamModel != id {
			entry += ":" + route.UpstreamModel
		}
		if r.clients[route.Provider] == nil {
			entry += " (provider not configured)"
		}
		models = append(models, entry)
	}
	sort.Strings(models)
	table := "none"
	if len(models) > 0 {
		table = strings.Join(models, ", ")
	}
	dm := r.defaultModel
	if dm == "" {
		dm = "(none)"
	}
	allowed := "none"
	if len(r.allowed) > 0 {
		var urls []string
		for norm := range r.allowed {
			urls = append(urls, redactURL(norm))
		}
		sort.Strings(urls)
		allowed = strings.Join(urls, ", ")
	}
	dp := r.defaultProvider
	if dp == "" {
		dp = "none (no provider configured, offline fallback off)"
	}
	return fmt.Sprintf("llm providers: %s; default provider: %s; default model: %s; model table: %s; allowed base URLs: %s",
		strings.Join(providers, ", "), dp, dm, table, allowed)
}

// The clients are interchangeable behind Client.
var (
	_ Client = (*Router)(nil)
	_ Client = (*OpenAICompatible)(nil)
	_ Client = (*Bedrock)(nil)
	_ Client = (*Offline)(nil)
)
