package tools

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/op-stack/executor/models"
)

// MemorySearch and MemorySave are the memory tools' definitions
// (docs/memory.md). Their calls need the run's tenant and memory scope,
// which a Tool does not get: the worker's activity runs them with its
// memory service (memory.Service.RunTool), and Run here only answers a
// worker that has none.
func MemorySearch() Tool {
	return Func(models.MemorySearchToolName,
		"Search long-term memory: what earlier runs (and people) saved about users, facts and decisions. "+
			"Give a query in words; optionally a namespace (one of this agent's memory namespaces or one under it) and a filter on the saved values' fields.",
		json.RawMessage(`{"type":"object","properties":{`+
			`"query":{"type":"string","description":"what to look for, in words"},`+
			`"namespace":{"type":"array","items":{"type":"string"},"description":"optional namespace path; default: all of this agent's"},`+
			`"filter":{"type":"object","description":"optional: only values whose top-level fields equal these"},`+
			`"limit":{"type":"integer","description":"how many results (default 5, at most 20)"}},`+
			`"required":["query"],"additionalProperties":false}`),
		noMemory)
}

// MemorySave is memory_save's definition; see MemorySearch.
func MemorySave() Tool {
	return Func(models.MemorySaveToolName,
		"Save a fact to long-term memory so that later runs can find it with memory_search: "+
			"a short key naming it and its value (text or a JSON object). Saving under an existing key replaces it. Never save passwords or keys.",
		json.RawMessage(`{"type":"object","properties":{`+
			`"key":{"type":"string","description":"a short name for the fact, e.g. favourite_drink"},`+
			`"value":{"description":"the fact: text or a JSON object"},`+
			`"text":{"type":"string","description":"optional text to search by (default: the value's text)"},`+
			`"namespace":{"type":"array","items":{"type":"string"},"description":"optional namespace path; default: this agent's first memory namespace"}},`+
			`"required":["key","value"],"additionalProperties":false}`),
		noMemory)
}

func noMemory(context.Context, json.RawMessage) (string, error) {
	return "", errors.New("memory is not available on this worker")
}
