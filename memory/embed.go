package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Embedder turns texts into vectors, one per text, in order.
type Embedder interface {
	// Model names the embedding model; vectors of different models are
	// never compared.
	Model() string
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// OpenAIEmbedder calls an OpenAI-compatible POST {BaseURL}/embeddings.
type OpenAIEmbedder struct {
	BaseURL string
	APIKey  string
	// Name is the model, e.g. "text-embedding-3-small".
	Name string
	// Dimensions asks models that can shorten their vectors for this many
	// (0: the model's own). Shorter vectors cost less memory and scan
	// faster: see docs/memory.md.
	Dimensions int
	// Client is the HTTP client (nil: one with a 30 s timeout).
	Client *http.Client
}

// Model implements Embedder.
func (e *OpenAIEmbedder) Model() string {
	if e.Dimensions > 0 {
		return fmt.Sprintf("%s@%d", e.Name, e.Dimensions)
	}
	return e.Name
}

// Embed implements Embedder.
func (e *OpenAIEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	body := map[string]any{"model": e.Name, "input": texts, "encoding_format": "float"}
	if e.Dimensions > 0 {
		body["dimensions"] = e.Dimensions
	}
	raw, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(e.BaseURL, "/")+"/embeddings", bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if e.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.APIKey)
	}
	client := e.Client
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		// The URL may carry credentials in its query: say only what failed.
		return nil, errors.New("embeddings: the embedding endpoint did not answer")
	}
	defer resp.Body.Close()
	payload, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("embeddings: read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("embeddings: the endpoint answered %d", resp.StatusCode)
	}
	var out struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(payload, &out); err != nil {
		return nil, fmt.Errorf("embeddings: the answer is not JSON: %w", err)
	}
	vecs := make([][]float32, len(texts))
	for i, d := range out.Data {
		idx := d.Index
		if idx < 0 || idx >= len(texts) {
			idx = i
		}
		vecs[idx] = d.Embedding
	}
	for i, v := range vecs {
		if len(v) == 0 {
			return nil, fmt.Errorf("embeddings: no vector for input %d", i)
		}
	}
	return vecs, nil
}
