package llm

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"
)

// Provider names the router knows without being told.
const (
	ProviderOpenAI     = "openai"
	ProviderOpenRouter = "openrouter"
	ProviderCompatible = "compatible"
)

// defaultProviderOrder is the order in which a configured provider becomes
// the default when RouterConfig.DefaultProvider is empty.
var defaultProviderOrder = []string{ProviderOpenAI, ProviderOpenRouter, ProviderCompatible}

// DefaultMissingProviderHints tell an operator how to configure a provider
// that a model routes to but that is missing. RouterConfig.Hints overrides
// them, for a config package whose variable names differ.
var DefaultMissingProviderHints = map[string]string{
	ProviderOpenAI:     "set OPENAI_API_KEY",
	ProviderOpenRouter: "set OPENROUTER_API_KEY",
	ProviderCompatible: "set the compatible provider's base URL",
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
	// the first configured of openai, openrouter, compatible, else offline.
	DefaultProvider string
	// OfflineTokenDelay paces the offline model's stream.
	OfflineTokenDelay time.Duration
	// HTTPClient is used by providers that have none of their own.
	HTTPClient *http.Client
	// Hints override DefaultMissingProviderHints, keyed by provider name.
	Hints map[string]string
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
}

func (e *RouteError) Error() string {
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
}

// NewRouter builds the provider clients. It fails on configuration that
// can never work (a duplicate or nameless provider, an unusable base URL,
// an explicit default provider that is not configured), but not on table
// entries naming a missing provider: Resolve reports those, so that runs
// using other models still work.
func NewRouter(cfg RouterConfig) (*Router, error) {
	r := &Router{
		clients:  map[string]Client{OfflineProvider: NewOffline(cfg.OfflineTokenDelay)},
		baseURLs: map[string]string{},
		models:   map[string]ModelRoute{},
		hints:    map[string]string{},
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
		c := NewOpenAICompatible(p)
		r.clients[p.Name] = c
		r.baseURLs[p.Name] = redactURL(baseURLFor(p))
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
		r.defaultProvider = OfflineProvider
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

// DefaultProvider is the provider of models the table does not list.
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

// Stream resolves req.Model and runs the request on its provider, sending
// the upstream model name but reporting the caller's model id, so usage and
// events stay keyed by the names users gave. A model that cannot be
// resolved fails with a non-retryable *Error wrapping the *RouteError.
func (r *Router) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	route, err := r.Resolve(req.Model)
	if err != nil {
		provider := "llm"
		var re *RouteError
		if errors.As(err, &re) && re.Provider != "" {
			provider = re.Provider
		}
		return nil, &Error{Provider: provider, Model: req.Model, Message: err.Error(), Cause: err}
	}
	upstream := req
	upstream.Model = route.UpstreamModel
	resp, err := r.clients[route.Provider].Stream(ctx, upstream, onDelta)
	var le *Error
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
	resp.Provider = route.Provider
	return resp, nil
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
	return fmt.Sprintf("llm providers: %s; default provider: %s; default model: %s; model table: %s",
		strings.Join(providers, ", "), r.defaultProvider, dm, table)
}

// The three clients are interchangeable behind Client.
var (
	_ Client = (*Router)(nil)
	_ Client = (*OpenAICompatible)(nil)
	_ Client = (*Offline)(nil)
)
