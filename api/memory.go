package api

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/op-stack/executor/memory"
	"github.com/op-stack/executor/models"
)

// Long-term memory (issue 29, docs/memory.md): the caller's tenant's items,
// always in the caller's own tenant (a principal that sees every tenant
// reads and writes its own tenant's memory here too: memory has no owner
// object to find another tenant by).

// requireMemory answers 503 on memory routes of a server built without a
// memory service.
func (s *Server) requireMemory(c *gin.Context) {
	if s.memory == nil {
		s.writeError(c, models.Errorf(models.CodeUnavailable, "memory is not configured on this server"))
		c.Abort()
		return
	}
	c.Next()
}

type memoryItemInput struct {
	Namespace []string `json:"namespace"`
	Key       string   `json:"key"`
}

func (s *Server) putMemory(c *gin.Context) {
	var in memory.PutRequest
	if err := decodeJSON(c, &in); err != nil {
		s.writeError(c, err)
		return
	}
	it, err := s.memory.Put(c.Request.Context(), ownTenant(c.Request.Context()), in)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, it)
}

func (s *Server) getMemory(c *gin.Context) {
	var in memoryItemInput
	if err := decodeJSON(c, &in); err != nil {
		s.writeError(c, err)
		return
	}
	it, err := s.memory.Get(c.Request.Context(), ownTenant(c.Request.Context()), in.Namespace, in.Key)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, it)
}

func (s *Server) deleteMemory(c *gin.Context) {
	var in memoryItemInput
	if err := decodeJSON(c, &in); err != nil {
		s.writeError(c, err)
		return
	}
	if err := s.memory.Delete(c.Request.Context(), ownTenant(c.Request.Context()), in.Namespace, in.Key); err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, gin.H{"namespace": in.Namespace, "key": in.Key, "deleted": true})
}

func (s *Server) searchMemory(c *gin.Context) {
	var in memory.SearchRequest
	if c.Request.ContentLength != 0 {
		if err := decodeJSON(c, &in); err != nil {
			s.writeError(c, err)
			return
		}
	}
	results, err := s.memory.Search(c.Request.Context(), ownTenant(c.Request.Context()), in)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if results == nil {
		results = []memory.Result{}
	}
	ok(c, gin.H{"results": results, "semantic": s.memory.Embedder != nil})
}

func (s *Server) listMemoryNamespaces(c *gin.Context) {
	var in struct {
		Prefix   []string `json:"prefix"`
		MaxDepth int      `json:"max_depth"`
		Limit    int      `json:"limit"`
		Offset   int      `json:"offset"`
	}
	if c.Request.ContentLength != 0 {
		if err := decodeJSON(c, &in); err != nil {
			s.writeError(c, err)
			return
		}
	}
	switch {
	case in.MaxDepth < 0:
		s.writeError(c, models.FieldError("max_depth", "must be 0 (whole paths) or more, got %d", in.MaxDepth))
		return
	case in.Limit < 0 || in.Limit > 1000:
		s.writeError(c, models.FieldError("limit", "must be between 0 (100) and 1000, got %d", in.Limit))
		return
	case in.Offset < 0:
		s.writeError(c, models.FieldError("offset", "must be 0 or more, got %d", in.Offset))
		return
	}
	if in.Limit == 0 {
		in.Limit = 100
	}
	spaces, err := s.memory.ListNamespaces(c.Request.Context(), ownTenant(c.Request.Context()), in.Prefix, in.MaxDepth, in.Limit, in.Offset)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, gin.H{"namespaces": spaces})
}

// exportMemory answers the items under the body's namespace (all without
// one) as JSON lines (application/x-ndjson), not in the usual envelope.
func (s *Server) exportMemory(c *gin.Context) {
	var in struct {
		Namespace []string `json:"namespace"`
	}
	if c.Request.ContentLength != 0 {
		if err := decodeJSON(c, &in); err != nil {
			s.writeError(c, err)
			return
		}
	}
	// Checked before the first byte, so a bad prefix is a JSON error.
	if _, err := s.memory.ListNamespaces(c.Request.Context(), ownTenant(c.Request.Context()), in.Namespace, 1, 1, 0); err != nil {
		s.writeError(c, err)
		return
	}
	c.Header("Content-Type", "application/x-ndjson")
	c.Header("Content-Disposition", `attachment; filename="memory.jsonl"`)
	c.Status(http.StatusOK)
	if _, err := s.memory.Export(c.Request.Context(), ownTenant(c.Request.Context()), in.Namespace, c.Writer); err != nil {
		s.log.Warn("memory export stopped", "error", err)
	}
}

// importMemory reads a body of JSON lines (Content-Type
// application/x-ndjson) in export's form.
func (s *Server) importMemory(c *gin.Context) {
	imported, skipped, err := s.memory.Import(c.Request.Context(), ownTenant(c.Request.Context()), c.Request.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.writeError(c, models.FieldError("body", "is larger than the server's limit of %d bytes: import in parts (%d items were imported)", s.maxBodyBytes, imported))
			return
		}
		s.writeError(c, err)
		return
	}
	ok(c, gin.H{"imported": imported, "skipped": skipped})
}
