package models

import (
	"slices"
	"testing"
)

func memoryHierarchy(mem *MemoryConfig, tools ...string) *Hierarchy {
	return &Hierarchy{Memory: mem, Teams: []Team{{Workers: []Agent{{Name: "w", Tools: tools}}}}}
}

// TestCheckMemoryConfig: the memory tools need a memory setting; its
// namespaces, variables, preload and TTL are checked.
func TestCheckMemoryConfig(t *testing.T) {
	if err := memoryHierarchy(nil, MemorySearchToolName).CheckMemoryConfig("memory"); ErrorCode(err) != CodeInvalidParameters {
		t.Errorf("tools without memory: %v", err)
	}
	if err := memoryHierarchy(nil, "calculator").CheckMemoryConfig("memory"); err != nil {
		t.Errorf("no memory, no tools: %v", err)
	}
	good := &MemoryConfig{Namespaces: [][]string{{"users", "{user_id}"}, {"h", "{hierarchy_id}-facts"}}, Preload: 3}
	if err := memoryHierarchy(good, MemorySaveToolName).CheckMemoryConfig("memory"); err != nil {
		t.Errorf("good setting: %v", err)
	}
	for _, bad := range []*MemoryConfig{
		{},
		{Namespaces: [][]string{{}}},
		{Namespaces: [][]string{{"a/b"}}},
		{Namespaces: [][]string{{"{user id}"}}},
		{Namespaces: [][]string{{"{user_id"}}},
		{Namespaces: [][]string{{"a"}}, Preload: 21},
		{Namespaces: [][]string{{"a"}}, TTLSeconds: -1},
	} {
		if err := memoryHierarchy(bad).CheckMemoryConfig("memory"); ErrorCode(err) != CodeInvalidParameters {
			t.Errorf("%+v: %v, want INVALID_PARAMETERS", bad, err)
		}
	}
}

// TestResolveMemory: variables are filled from the run's metadata; a
// missing one names metadata.<name>; a value with '/' is refused.
func TestResolveMemory(t *testing.T) {
	h := memoryHierarchy(&MemoryConfig{Namespaces: [][]string{{"users", "{user_id}"}, {"h", "{hierarchy_id}", "facts"}}, TTLSeconds: 60})
	got, err := h.ResolveMemory(map[string]string{"user_id": "u-42", "hierarchy_id": "h1"})
	if err != nil || len(got.Namespaces) != 2 || !slices.Equal(got.Namespaces[0], []string{"users", "u-42"}) ||
		!slices.Equal(got.Namespaces[1], []string{"h", "h1", "facts"}) || got.TTLSeconds != 60 {
		t.Fatalf("resolved = %+v, %v", got, err)
	}
	if _, err := h.ResolveMemory(map[string]string{"hierarchy_id": "h1"}); ErrorCode(err) != CodeInvalidParameters || err.(*Error).Field != "metadata.user_id" {
		t.Errorf("missing user_id: %v", err)
	}
	if _, err := h.ResolveMemory(map[string]string{"user_id": "../x", "hierarchy_id": "h1"}); ErrorCode(err) != CodeInvalidParameters {
		t.Errorf("user_id with '/': %v", err)
	}
	if got, err := memoryHierarchy(nil).ResolveMemory(nil); got != nil || err != nil {
		t.Errorf("no memory: %+v, %v", got, err)
	}
}
