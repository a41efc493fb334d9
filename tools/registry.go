package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/models"
)

// keyPattern is what a tool key may look like. It is stricter than what
// providers accept for function names so keys read the same everywhere
// (config, events, URLs) and never need quoting.
var keyPattern = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

// reservedKeys are function names the executor offers itself; a registry
// tool with the same name would shadow them in the model's tool list.
var reservedKeys = map[string]bool{models.DelegateToolName: true}

// Registry is the allowlist of tools, by key. It is immutable once built and
// safe for concurrent use.
type Registry struct {
	tools map[string]Tool
	keys  []string // sorted
}

// NewRegistry builds a registry of tools. A nil tool, an invalid,
// reserved or duplicate key, an empty description or parameters that are not
// a JSON schema of type object are errors: they are programming mistakes,
// and failing at startup beats a model failing to call the tool later.
func NewRegistry(tools ...Tool) (*Registry, error) {
	r := &Registry{tools: make(map[string]Tool, len(tools))}
	for i, t := range tools {
		if t == nil {
			return nil, fmt.Errorf("tools: tool %d is nil", i)
		}
		key := t.Key()
		if !keyPattern.MatchString(key) {
			return nil, fmt.Errorf("tools: invalid key %q: want 1 to 64 characters of a-z, 0-9 and _", key)
		}
		if reservedKeys[key] {
			return nil, fmt.Errorf("tools: key %q is reserved by the executor", key)
		}
		if _, dup := r.tools[key]; dup {
			return nil, fmt.Errorf("tools: duplicate key %q", key)
		}
		if strings.TrimSpace(t.Description()) == "" {
			return nil, fmt.Errorf("tools: tool %q has no description", key)
		}
		if err := checkSchema(t.Parameters()); err != nil {
			return nil, fmt.Errorf("tools: tool %q: %w", key, err)
		}
		r.tools[key] = t
		r.keys = append(r.keys, key)
	}
	slices.Sort(r.keys)
	return r, nil
}

// checkSchema checks that a parameters schema is a JSON object of type
// "object", which is what function calling APIs require.
func checkSchema(schema json.RawMessage) error {
	var s struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return fmt.Errorf("parameters are not a JSON object: %w", err)
	}
	if s.Type != "object" {
		return fmt.Errorf(`parameters schema must have "type": "object"`)
	}
	return nil
}

// Default is the registry of the built-in tools configured by cfg plus the
// operator's Custom tools. It panics when a custom tool is invalid, which
// only a code change can cause, so the worker refuses to start rather than
// run without it.
func Default(cfg Config) *Registry {
	all := append([]Tool{HTTPGet(cfg), Calculator(), CurrentTime(), SaveFile(), MemorySearch(), MemorySave()}, Custom()...)
	r, err := NewRegistry(all...)
	if err != nil {
		panic(err)
	}
	return r
}

// Has reports whether key is registered.
func (r *Registry) Has(key string) bool {
	_, ok := r.tools[key]
	return ok
}

// Get returns the tool registered under key.
func (r *Registry) Get(key string) (Tool, bool) {
	t, ok := r.tools[key]
	return t, ok
}

// Keys returns the registered keys, sorted.
func (r *Registry) Keys() []string {
	return slices.Clone(r.keys)
}

// Validate checks a request's list of tool keys: every key must be
// registered and appear once. The error is a *models.Error about field (a
// 400 INVALID_PARAMETERS) that lists the available keys, so an API client
// can fix the request without reading the docs.
func (r *Registry) Validate(field string, keys []string) error {
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if !r.Has(k) {
			available := "(none)"
			if len(r.keys) > 0 {
				available = strings.Join(r.keys, ", ")
			}
			return models.FieldError(field, "unknown tool %q; available: %s", k, available)
		}
		if seen[k] {
			return models.FieldError(field, "duplicate tool %q", k)
		}
		seen[k] = true
	}
	return nil
}

// Definitions returns the function definitions offered to the model for
// keys, in the given order. Unknown keys are skipped (a hierarchy stored
// before a tool was removed must still run) and so are repeats (providers
// reject duplicate function names).
func (r *Registry) Definitions(keys []string) []llm.ToolDef {
	defs := make([]llm.ToolDef, 0, len(keys))
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		t, ok := r.tools[k]
		if !ok || seen[k] {
			continue
		}
		seen[k] = true
		defs = append(defs, llm.ToolDef{
			Name:        k,
			Description: t.Description(),
			// A copy, so a caller editing the schema cannot change the tool.
			Parameters: slices.Clone(t.Parameters()),
		})
	}
	return defs
}

// Execute runs the tool key with the arguments a model wrote. An unknown
// key, arguments that are not a JSON object and a panicking tool are
// errors that are not retryable; the tool's own errors are returned as they
// are, so IsRetryable tells transient ones apart.
//
// Empty arguments count as {}: some models send "" for tools that take no
// arguments, and refusing that would only make them retry the same call.
func (r *Registry) Execute(ctx context.Context, key string, arguments string) (string, error) {
	res, err := r.ExecuteResult(ctx, key, arguments)
	return res.Content, err
}

// ExecuteResult is Execute with the files a FileTool returned (none for
// any other tool).
func (r *Registry) ExecuteResult(ctx context.Context, key string, arguments string) (result Result, err error) {
	t, ok := r.tools[key]
	if !ok {
		return Result{}, fmt.Errorf("unknown tool %q", key)
	}
	args := bytes.TrimSpace([]byte(arguments))
	if len(args) == 0 {
		args = []byte("{}")
	}
	if args[0] != '{' || !json.Valid(args) {
		return Result{}, errors.New(`invalid arguments: want a JSON object such as {"name": "value"}`)
	}
	defer func() {
		// A bug in one tool must not take the worker down with it. The
		// stack goes in the error value, not in the message the model sees.
		if p := recover(); p != nil {
			result = Result{}
			err = &PanicError{Key: key, Value: p, Stack: debug.Stack()}
		}
	}()
	if ft, ok := t.(FileTool); ok {
		return ft.RunFiles(ctx, json.RawMessage(args))
	}
	content, err := t.Run(ctx, json.RawMessage(args))
	return Result{Content: content}, err
}

// PanicError is a tool's panic, recovered by Execute. Its message is fit
// for the model; Stack is for the logs.
type PanicError struct {
	Key   string
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("tool %q failed with an internal error: %v", e.Key, e.Value)
}

// Describe returns the description of the tool registered under key, ""
// for an unknown key: what the console's hierarchy editor shows next to
// each built-in tool (tools/list).
func (r *Registry) Describe(key string) string {
	if t, ok := r.tools[key]; ok {
		return t.Description()
	}
	return ""
}
