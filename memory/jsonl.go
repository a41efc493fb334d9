package memory

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// ExportLine is one line of an export: an item as Item shows it.
type ExportLine = Item

// exportPage is how many items an export reads at once.
const exportPage = 500

// Export writes tenant's live items under prefix to w as JSON lines (one
// Item per line, oldest first), and returns how many it wrote.
func (s *Service) Export(ctx context.Context, tenant string, prefix []string, w io.Writer) (int, error) {
	if err := store.CheckMemoryPath("namespace", prefix, true); err != nil {
		return 0, err
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	var after int64
	n := 0
	for {
		items, err := s.Store.ListMemory(ctx, tenant, prefix, after, exportPage)
		if err != nil {
			return n, err
		}
		for _, it := range items {
			if err := enc.Encode(itemOf(it)); err != nil {
				return n, err
			}
			n++
			after = it.ID
		}
		if len(items) < exportPage {
			return n, nil
		}
	}
}

// analyzeAfterImport is the size of an import after which the table's
// statistics are refreshed at once rather than by autovacuum.
const analyzeAfterImport = 10_000

// MaxImportLines bounds one import.
const MaxImportLines = 100_000

// Import reads JSON lines of Export's form from r and writes each item of
// tenant (replacing one at the same namespace and key), scrubbed and
// embedded as Put does. An item whose expires_at has passed is skipped;
// one with a later expires_at keeps it. A bad line stops the import with
// INVALID_PARAMETERS naming it; the lines before it are kept.
func (s *Service) Import(ctx context.Context, tenant string, r io.Reader) (imported, skipped int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 2*store.MaxMemoryValueBytes+store.MaxMemorySearchTextLength+4096)
	line := 0
	for sc.Scan() {
		line++
		raw := sc.Bytes()
		if len(raw) == 0 {
			continue
		}
		if line > MaxImportLines {
			return imported, skipped, models.FieldError("body", "has more than %d lines: split the import", MaxImportLines)
		}
		var it Item
		if err := json.Unmarshal(raw, &it); err != nil {
			return imported, skipped, models.FieldError(fmt.Sprintf("line %d", line), "is not an item: %v", err)
		}
		req := PutRequest{Namespace: it.Namespace, Key: it.Key, Value: it.Value, Text: it.Text}
		if it.ExpiresAt != nil {
			left := time.Until(*it.ExpiresAt)
			if left <= 0 {
				skipped++
				continue
			}
			req.TTLSeconds = int(math.Ceil(left.Seconds()))
		}
		if _, err := s.Put(ctx, tenant, req); err != nil {
			if e, ok := err.(*models.Error); ok && e.Code == models.CodeInvalidParameters {
				return imported, skipped, models.FieldError(fmt.Sprintf("line %d", line), "%s: %s", e.Field, e.Message)
			}
			return imported, skipped, err
		}
		imported++
	}
	if err := sc.Err(); err != nil {
		return imported, skipped, models.FieldError(fmt.Sprintf("line %d", line+1), "cannot be read: %v", err)
	}
	if imported >= analyzeAfterImport {
		// Fresh statistics keep full-text search on its index (see
		// docs/memory.md#performance); a failure only delays them.
		_ = s.Store.AnalyzeMemory(ctx)
	}
	return imported, skipped, nil
}
