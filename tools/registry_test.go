package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/op-stack/executor/models"
)

// stubTool is a tool that reports the arguments it got.
func stubTool(key string) Tool {
	return Func(key, "stub tool "+key, json.RawMessage(`{"type":"object","properties":{}}`),
		func(_ context.Context, args json.RawMessage) (string, error) { return key + ":" + string(args), nil })
}

func mustRegistry(t *testing.T, tools ...Tool) *Registry {
	t.Helper()
	r, err := NewRegistry(tools...)
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	return r
}

func TestNewRegistryRejectsBadTools(t *testing.T) {
	cases := []struct {
		name  string
		tools []Tool
		want  string
	}{
		{"duplicate", []Tool{stubTool("a"), stubTool("b"), stubTool("a")}, `duplicate key "a"`},
		{"empty key", []Tool{stubTool("")}, `invalid key ""`},
		{"upper case", []Tool{stubTool("Fetch")}, `invalid key "Fetch"`},
		{"dash", []Tool{stubTool("http-get")}, `invalid key "http-get"`},
		{"too long", []Tool{stubTool(strings.Repeat("a", 65))}, "invalid key"},
		{"reserved", []Tool{stubTool(models.DelegateToolName)}, "reserved"},
		{"nil", []Tool{nil}, "tool 0 is nil"},
		{"no description", []Tool{Func("x", " ", json.RawMessage(`{"type":"object"}`), nil)}, "no description"},
		{"not an object schema", []Tool{Func("x", "d", json.RawMessage(`{"type":"string"}`), nil)}, `"type": "object"`},
		{"not JSON", []Tool{Func("x", "d", json.RawMessage(`nope`), nil)}, "not a JSON object"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewRegistry(tc.tools...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := NewRegistry(stubTool(strings.Repeat("a", 64)), stubTool("a_1")); err != nil {
		t.Fatalf("valid keys refused: %v", err)
	}
}

func TestRegistryKeysAndHas(t *testing.T) {
	r := mustRegistry(t, stubTool("c"), stubTool("a"), stubTool("b"))
	if got := strings.Join(r.Keys(), ","); got != "a,b,c" {
		t.Fatalf("Keys = %s, want a,b,c", got)
	}
	r.Keys()[0] = "mutated"
	if !r.Has("a") || r.Has("mutated") || r.Has("d") || r.Keys()[0] != "a" {
		t.Fatal("Has or Keys wrong, or Keys exposes internal state")
	}
	if tool, ok := r.Get("b"); !ok || tool.Key() != "b" {
		t.Fatal("Get(b) failed")
	}
}

func TestRegistryValidate(t *testing.T) {
	r := mustRegistry(t, stubTool("c"), stubTool("a"), stubTool("b"))
	if err := r.Validate("tools", nil); err != nil {
		t.Fatalf("empty list: %v", err)
	}
	if err := r.Validate("tools", []string{"b", "a"}); err != nil {
		t.Fatalf("known keys: %v", err)
	}

	err := r.Validate("teams[0].workers[1].tools", []string{"a", "nope"})
	var me *models.Error
	if !errors.As(err, &me) {
		t.Fatalf("err = %#v, want *models.Error", err)
	}
	if me.Code != models.CodeInvalidParameters || me.Field != "teams[0].workers[1].tools" {
		t.Fatalf("code %v field %q", me.Code, me.Field)
	}
	want := `teams[0].workers[1].tools: unknown tool "nope"; available: a, b, c`
	if me.Message != want {
		t.Fatalf("message = %q, want %q", me.Message, want)
	}

	err = r.Validate("tools", []string{"a", "b", "a"})
	if !errors.As(err, &me) || me.Field != "tools" || !strings.Contains(me.Message, `duplicate tool "a"`) {
		t.Fatalf("duplicate: %v", err)
	}

	empty := mustRegistry(t)
	if err := empty.Validate("tools", []string{"x"}); err == nil || !strings.Contains(err.Error(), "available: (none)") {
		t.Fatalf("empty registry: %v", err)
	}
}

func TestRegistryDefinitions(t *testing.T) {
	r := mustRegistry(t, stubTool("a"), stubTool("b"), stubTool("c"))
	defs := r.Definitions([]string{"c", "unknown", "a", "c"})
	var names []string
	for _, d := range defs {
		names = append(names, d.Name)
		if d.Description != "stub tool "+d.Name || !json.Valid(d.Parameters) {
			t.Fatalf("bad definition %+v", d)
		}
	}
	if strings.Join(names, ",") != "c,a" {
		t.Fatalf("names = %v, want [c a]", names)
	}
	defs[0].Parameters[0] = 'X' // must not reach the tool
	if again := r.Definitions([]string{"c"}); again[0].Parameters[0] != '{' {
		t.Fatal("Definitions shares the tool's schema bytes")
	}
	if len(r.Definitions(nil)) != 0 {
		t.Fatal("nil keys should give no definitions")
	}
}

func TestRegistryExecute(t *testing.T) {
	boom := Func("boom", "panics", json.RawMessage(`{"type":"object"}`),
		func(context.Context, json.RawMessage) (string, error) { panic("kaboom") })
	flaky := Func("flaky", "fails transiently", json.RawMessage(`{"type":"object"}`),
		func(context.Context, json.RawMessage) (string, error) { return "", Retryable(errors.New("try later")) })
	r := mustRegistry(t, stubTool("echo"), boom, flaky)
	ctx := context.Background()

	got, err := r.Execute(ctx, "echo", ` {"x": 1} `)
	if err != nil || got != `echo:{"x": 1}` {
		t.Fatalf("Execute = %q, %v", got, err)
	}
	// Empty arguments count as an empty object.
	if got, err := r.Execute(ctx, "echo", ""); err != nil || got != "echo:{}" {
		t.Fatalf("empty arguments: %q, %v", got, err)
	}

	if _, err := r.Execute(ctx, "missing", "{}"); err == nil || !strings.Contains(err.Error(), `unknown tool "missing"`) || IsRetryable(err) {
		t.Fatalf("unknown key: %v", err)
	}

	for _, args := range []string{"not json", "[1,2]", "null", `"text"`, "42", `{"a":1} {"b":2}`, `{"a":`} {
		_, err := r.Execute(ctx, "echo", args)
		if err == nil || !strings.Contains(err.Error(), "JSON object") || IsRetryable(err) {
			t.Errorf("arguments %q: err = %v, want a non-retryable JSON object error", args, err)
		}
	}

	_, err = r.Execute(ctx, "boom", "{}")
	var pe *PanicError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "kaboom") || !strings.Contains(err.Error(), `"boom"`) || IsRetryable(err) {
		t.Fatalf("panic: %v", err)
	}
	if len(pe.Stack) == 0 {
		t.Fatal("panic error has no stack")
	}

	if _, err := r.Execute(ctx, "flaky", "{}"); !IsRetryable(err) || err.Error() != "try later" {
		t.Fatalf("tool errors must come back as they are: %v", err)
	}
}

func TestRetryable(t *testing.T) {
	if Retryable(nil) != nil {
		t.Fatal("Retryable(nil) != nil")
	}
	base := errors.New("503")
	err := Retryable(base)
	if !IsRetryable(err) || !errors.Is(err, base) || err.Error() != "503" {
		t.Fatalf("Retryable: %v", err)
	}
	if !IsRetryable(fmt.Errorf("wrapped: %w", err)) {
		t.Fatal("IsRetryable must see through wrapping")
	}
	if IsRetryable(base) || IsRetryable(nil) {
		t.Fatal("plain errors are not retryable")
	}
}

func TestDecodeArguments(t *testing.T) {
	var v struct {
		URL string `json:"url"`
	}
	if err := DecodeArguments(json.RawMessage(`{"url":"x"}`), &v); err != nil || v.URL != "x" {
		t.Fatalf("decode: %v", err)
	}
	if err := DecodeArguments(json.RawMessage(`{"ulr":"x"}`), &v); err == nil || !strings.Contains(err.Error(), `unknown field "ulr"`) {
		t.Fatalf("unknown field: %v", err)
	}
	if err := DecodeArguments(json.RawMessage(`{"url":1}`), &v); err == nil || !strings.Contains(err.Error(), "invalid arguments") {
		t.Fatalf("wrong type: %v", err)
	}
}

func TestDefault(t *testing.T) {
	r := Default(Config{})
	for _, key := range []string{KeyHTTPGet, KeyCalculator, KeyCurrentTime, KeySaveFile, models.MemorySearchToolName, models.MemorySaveToolName} {
		if !r.Has(key) {
			t.Fatalf("Default lacks %s", key)
		}
	}
	if len(r.Keys()) != 6+len(Custom()) {
		t.Fatalf("Keys = %v", r.Keys())
	}
	for _, d := range r.Definitions(r.Keys()) {
		var schema map[string]any
		if err := json.Unmarshal(d.Parameters, &schema); err != nil {
			t.Fatalf("%s: parameters: %v", d.Name, err)
		}
		if schema["type"] != "object" || schema["additionalProperties"] != false || d.Description == "" {
			t.Fatalf("%s: schema %v", d.Name, schema)
		}
	}
	got, err := r.Execute(context.Background(), KeyCalculator, `{"expression":"6*7"}`)
	if err != nil || got != `{"expression":"6*7","result":42}` {
		t.Fatalf("calculator through Default: %q, %v", got, err)
	}
}
