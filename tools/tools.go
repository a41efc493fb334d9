// Package tools holds the functions agents can call. Tools are code,
// registered by key in a Registry that acts as an allowlist: a hierarchy or
// sub-agent definition only names tool keys, so nothing a client sends can
// make the service run anything that was not compiled in.
//
// The built-ins are http_get (fetch a public web page), calculator
// (arithmetic), current_time and save_file (keep a file as an artifact of
// the run; see FileTool). Operators add their own in custom.go.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Tool is one capability an agent can call.
//
// Implementations must be safe for concurrent use: one Tool value serves
// every agent of every run on the worker.
type Tool interface {
	// Key is the registry key, e.g. "http_get": 1 to 64 characters of
	// [a-z0-9_]. It is also the function name the model sees.
	Key() string
	// Description tells the model what the tool does and when to use it.
	Description() string
	// Parameters is the JSON schema (type object) of the arguments.
	Parameters() json.RawMessage
	// Run runs one call. arguments is a JSON object (the registry checks
	// that before calling). The result is text for the model, often JSON.
	// Wrap transient failures in Retryable so the caller retries them;
	// any other error goes back to the model as the tool's result.
	Run(ctx context.Context, arguments json.RawMessage) (string, error)
}

// Config configures the built-in tools.
type Config struct {
	// HTTPAllowedHosts limits http_get to these hosts: "example.com"
	// matches that host only, ".example.com" (or "*.example.com") matches
	// its subdomains only; matching is case-insensitive. Empty allows any
	// host that passes the network guard.
	HTTPAllowedHosts []string
	// HTTPAllowPrivate lets http_get reach loopback, private (RFC 1918, ULA
	// fc00::/7), link-local (169.254/16, fe80::/10), CGNAT (100.64/10),
	// unspecified and multicast addresses. Off by default: a model that can
	// be steered by fetched text must not reach the worker's own network
	// (cloud metadata endpoints, databases, the Temporal frontend).
	HTTPAllowPrivate bool
	// HTTPMaxBytes caps the response body http_get reads (default 1 MiB);
	// a larger body is truncated with a marker, not an error.
	HTTPMaxBytes int64
	// HTTPTimeout bounds a whole http_get call, redirects and body
	// included (default 10s).
	HTTPTimeout time.Duration
}

// Defaults of Config.
const (
	DefaultHTTPMaxBytes = 1 << 20
	DefaultHTTPTimeout  = 10 * time.Second
)

// withDefaults fills the zero values of c.
func (c Config) withDefaults() Config {
	if c.HTTPMaxBytes <= 0 {
		c.HTTPMaxBytes = DefaultHTTPMaxBytes
	}
	if c.HTTPTimeout <= 0 {
		c.HTTPTimeout = DefaultHTTPTimeout
	}
	return c
}

// retryableError marks an error as transient.
type retryableError struct{ err error }

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

// Retryable wraps err to mark it transient (a 5xx or a timeout from a
// fetched site, say), so the caller retries the call before giving the model
// the error. Retryable(nil) is nil.
func Retryable(err error) error {
	if err == nil || IsRetryable(err) {
		return err
	}
	return &retryableError{err: err}
}

// IsRetryable reports whether err, or any error it wraps, was marked with
// Retryable.
func IsRetryable(err error) bool {
	var r *retryableError
	return errors.As(err, &r)
}

// DecodeArguments decodes a tool's JSON arguments into v strictly: unknown
// fields and trailing data are errors. Models do misspell argument names,
// and an error that says so lets them correct the call instead of running
// it with a silently missing argument.
func DecodeArguments(arguments json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(arguments))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid arguments: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("invalid arguments: unexpected data after the JSON object")
	}
	return nil
}

// Func builds a Tool from its parts, for tools too small to deserve a type.
func Func(key, description string, parameters json.RawMessage, run func(ctx context.Context, arguments json.RawMessage) (string, error)) Tool {
	return &funcTool{key: key, description: description, parameters: parameters, run: run}
}

type funcTool struct {
	key, description string
	parameters       json.RawMessage
	run              func(context.Context, json.RawMessage) (string, error)
}

func (t *funcTool) Key() string                 { return t.key }
func (t *funcTool) Description() string         { return t.description }
func (t *funcTool) Parameters() json.RawMessage { return t.parameters }
func (t *funcTool) Run(ctx context.Context, arguments json.RawMessage) (string, error) {
	if t.run == nil {
		return "", fmt.Errorf("tool %q has no implementation", t.key)
	}
	return t.run(ctx, arguments)
}

// marshalResult encodes a tool result as compact JSON without HTML
// escaping: fetched pages are full of < > &, and \u003c costs the model
// tokens and readability for nothing.
func marshalResult(v any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}
