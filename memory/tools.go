package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/op-stack/executor/models"
)

// ToolCall is one call of an agent's memory tool, with the run it comes
// from.
type ToolCall struct {
	Tenant string
	// RunKey is the run's key (store.Run.ID): what it saves is deleted
	// with it.
	RunKey string
	// Scope is the run's resolved memory (RunOptions.Memory).
	Scope *models.RunMemory
	// Name is memory_search or memory_save; Arguments its JSON object.
	Name      string
	Arguments string
}

// IsTool reports whether name is one of the memory tools.
func IsTool(name string) bool {
	return name == models.MemorySearchToolName || name == models.MemorySaveToolName
}

// within reports whether ns is one of the declared namespaces or under one.
func within(ns []string, declared [][]string) bool {
	for _, d := range declared {
		if len(ns) >= len(d) && slices.Equal(ns[:len(d)], d) {
			return true
		}
	}
	return false
}

// scopeError is the answer to a call that names a namespace outside the
// run's: the model sees which it may use.
func scopeError(ns []string, declared [][]string) error {
	parts := make([]string, len(declared))
	for i, d := range declared {
		raw, _ := json.Marshal(d)
		parts[i] = string(raw)
	}
	raw, _ := json.Marshal(ns)
	return fmt.Errorf("namespace %s is outside this agent's memory: use one of %s (or a namespace under one)", raw, strings.Join(parts, ", "))
}

// decodeStrict decodes a tool's arguments, refusing unknown fields.
func decodeStrict(arguments string, v any) error {
	dec := json.NewDecoder(bytes.NewReader([]byte(arguments)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid arguments: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("invalid arguments: unexpected data after the JSON object")
	}
	return nil
}

// RunTool runs a memory tool call; the error is the tool's error result
// for the model (a call outside the run's namespaces, bad arguments), the
// text its result otherwise.
func (s *Service) RunTool(ctx context.Context, call ToolCall) (string, error) {
	if call.Scope == nil || len(call.Scope.Namespaces) == 0 {
		return "", errors.New("memory: this run's hierarchy declares no memory namespaces")
	}
	declared := call.Scope.Namespaces
	switch call.Name {
	case models.MemorySaveToolName:
		var in struct {
			Namespace []string        `json:"namespace"`
			Key       string          `json:"key"`
			Value     json.RawMessage `json:"value"`
			Text      string          `json:"text"`
		}
		if err := decodeStrict(call.Arguments, &in); err != nil {
			return "", err
		}
		ns := in.Namespace
		if len(ns) == 0 {
			ns = declared[0]
		}
		if !within(ns, declared) {
			return "", scopeError(ns, declared)
		}
		if len(in.Value) == 0 && in.Text != "" {
			in.Value, _ = json.Marshal(in.Text)
		}
		it, err := s.Put(ctx, call.Tenant, PutRequest{Namespace: ns, Key: in.Key, Value: in.Value, Text: in.Text, TTLSeconds: call.Scope.TTLSeconds, runKey: call.RunKey})
		if err != nil {
			return "", toolError(err)
		}
		raw, _ := json.Marshal(map[string]any{"saved": true, "namespace": it.Namespace, "key": it.Key})
		return string(raw), nil
	case models.MemorySearchToolName:
		var in struct {
			Namespace []string       `json:"namespace"`
			Query     string         `json:"query"`
			Filter    map[string]any `json:"filter"`
			Limit     int            `json:"limit"`
		}
		if err := decodeStrict(call.Arguments, &in); err != nil {
			return "", err
		}
		if in.Limit <= 0 || in.Limit > 20 {
			in.Limit = 5
		}
		spaces := declared
		if len(in.Namespace) > 0 {
			if !within(in.Namespace, declared) {
				return "", scopeError(in.Namespace, declared)
			}
			spaces = [][]string{in.Namespace}
		}
		results, err := s.searchAll(ctx, call.Tenant, spaces, in.Query, in.Filter, in.Limit)
		if err != nil {
			return "", toolError(err)
		}
		type found struct {
			Namespace []string        `json:"namespace"`
			Key       string          `json:"key"`
			Value     json.RawMessage `json:"value"`
			UpdatedAt string          `json:"updated_at"`
			Score     float64         `json:"score"`
		}
		out := make([]found, len(results))
		for i, r := range results {
			out[i] = found{Namespace: r.Namespace, Key: r.Key, Value: r.Value, UpdatedAt: r.UpdatedAt.Format("2006-01-02T15:04:05Z07:00"), Score: float64(int(r.Score*1000)) / 1000}
		}
		raw, _ := json.Marshal(map[string]any{"results": out})
		return string(raw), nil
	}
	return "", fmt.Errorf("memory: unknown tool %q", call.Name)
}

// searchAll searches each namespace and keeps the best limit overall.
func (s *Service) searchAll(ctx context.Context, tenant string, spaces [][]string, query string, filter map[string]any, limit int) ([]Result, error) {
	var all []Result
	seen := map[string]bool{}
	for _, ns := range spaces {
		rs, err := s.Search(ctx, tenant, SearchRequest{Namespace: ns, Query: query, Filter: filter, Limit: limit})
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			k := strings.Join(r.Namespace, "/") + "\x00" + r.Key
			if !seen[k] {
				seen[k] = true
				all = append(all, r)
			}
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Score > all[j].Score })
	if len(all) > limit {
		all = all[:limit]
	}
	return all, nil
}

// toolError is a service error as the model reads it.
func toolError(err error) error {
	var e *models.Error
	if errors.As(err, &e) {
		if e.Field != "" && !strings.Contains(e.Message, e.Field) {
			return fmt.Errorf("%s: %s", e.Field, e.Message)
		}
		return errors.New(e.Message)
	}
	return err
}

// Preload is the text of the best limit memories for task in the run's
// namespaces, for the global supervisor's prompt ("" when none).
func (s *Service) Preload(ctx context.Context, tenant string, scope *models.RunMemory, task string, limit int) (string, error) {
	if scope == nil || limit <= 0 {
		return "", nil
	}
	results, err := s.searchAll(ctx, tenant, scope.Namespaces, task, nil, limit)
	if err != nil || len(results) == 0 {
		return "", err
	}
	var b strings.Builder
	for _, r := range results {
		fmt.Fprintf(&b, "- [%s] %s: %s\n", strings.Join(r.Namespace, "/"), r.Key, string(r.Value))
	}
	return b.String(), nil
}
