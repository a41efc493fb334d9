package llmfake

import (
	"encoding/json"
	"hash/fnv"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"unicode"
)

// embeddingCalls counts the fake's /embeddings requests (all fakes of the
// process: tests read the difference).
var embeddingCalls atomic.Int64

// EmbeddingCalls is how many /embeddings requests the fakes of this
// process have answered.
func EmbeddingCalls() int64 { return embeddingCalls.Load() }

// Embed is the fake's embedding of text in dim dimensions: each word
// (lower-cased, a trailing "s" dropped) adds 1 to a dimension chosen by
// its hash. Texts that share words point the same way, which is enough
// meaning for tests of semantic search, and the same text always gives the
// same vector.
func Embed(text string, dim int) []float32 {
	v := make([]float32, dim)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		h := fnv.New32a()
		h.Write([]byte(strings.TrimSuffix(w, "s")))
		v[h.Sum32()%uint32(dim)]++
	}
	return v
}

// embeddings answers POST /v1/embeddings as OpenAI does: input is a
// string or a list of strings; dimensions (default 64) sets the vectors'
// size.
func (f *fake) embeddings(w http.ResponseWriter, r *http.Request) {
	embeddingCalls.Add(1)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req struct {
		Model      string          `json:"model"`
		Input      json.RawMessage `json:"input"`
		Dimensions int             `json:"dimensions"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "the fake could not parse the request body: "+err.Error(), "invalid_request_error", "")
		return
	}
	var inputs []string
	if err := json.Unmarshal(req.Input, &inputs); err != nil {
		var one string
		if err := json.Unmarshal(req.Input, &one); err != nil {
			writeError(w, http.StatusBadRequest, "input must be a string or a list of strings", "invalid_request_error", "")
			return
		}
		inputs = []string{one}
	}
	dim := req.Dimensions
	if dim <= 0 || dim > 4096 {
		dim = 64
	}
	type datum struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	data := make([]datum, len(inputs))
	tokens := 0
	for i, in := range inputs {
		data[i] = datum{Object: "embedding", Index: i, Embedding: Embed(in, dim)}
		tokens += len(strings.Fields(in))
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model,
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens}})
}
