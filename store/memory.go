package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/op-stack/executor/models"
)

// MemoryItem is one item of a tenant's long-term memory (docs/memory.md):
// a JSON value under a namespace path and a key.
type MemoryItem struct {
	// ID is the item's row id (stable while the item exists).
	ID       int64
	TenantID string
	// Namespace is the item's path, e.g. ["users", "u-42"].
	Namespace []string
	Key       string
	Value     json.RawMessage
	// SearchText is what full-text search reads (and what was embedded).
	SearchText string
	// Embedding is the vector of SearchText by EmbeddingModel; nil when no
	// embedding model was configured when the item was written.
	Embedding      []float32
	EmbeddingModel string
	// RunID is the key (Run.ID) of the run whose agent wrote the item
	// last; "" for items written through the API. PurgeRun deletes a run's
	// items with it.
	RunID     string
	CreatedAt time.Time
	UpdatedAt time.Time
	// ExpiresAt is when the item stops being found (nil: never).
	ExpiresAt *time.Time
}

type memoryItemRow struct {
	ID             int64 `gorm:"primaryKey;autoIncrement"`
	TenantID       string
	Namespace      string
	ItemKey        string
	Value          string
	SearchText     string
	Embedding      []byte
	EmbeddingModel string
	RunID          string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	ExpiresAt      *time.Time
}

func (memoryItemRow) TableName() string { return "memory_item" }

type memoryNamespaceRow struct {
	TenantID  string `gorm:"primaryKey"`
	Namespace string `gorm:"primaryKey"`
	Version   int64
	UpdatedAt time.Time
}

func (memoryNamespaceRow) TableName() string { return "memory_namespace" }

// Limits of memory items, checked by CheckMemoryPath.
const (
	MaxMemoryNamespaceDepth   = 10
	MaxMemorySegmentLength    = 128
	MaxMemoryKeyLength        = 255
	maxMemoryNamespaceColumn  = 1024
	MaxMemoryValueBytes       = 64 << 10
	MaxMemorySearchTextLength = 16 << 10
)

// CheckMemoryPath checks a namespace (which may be empty only when
// allowEmpty, for a prefix that means "all") and, when key is not nil, a
// key. Segments and keys are 1 to 128 (keys 255) characters without '/' or
// control characters. field names the namespace in errors.
func CheckMemoryPath(field string, ns []string, allowEmpty bool) error {
	if len(ns) == 0 && !allowEmpty {
		return models.FieldError(field, "must name at least one segment, e.g. [\"users\", \"u-42\"]")
	}
	if len(ns) > MaxMemoryNamespaceDepth {
		return models.FieldError(field, "must have at most %d segments, got %d", MaxMemoryNamespaceDepth, len(ns))
	}
	for i, seg := range ns {
		if err := checkMemoryName(seg, MaxMemorySegmentLength); err != nil {
			return models.FieldError(fmt.Sprintf("%s[%d]", field, i), "%v", err)
		}
	}
	return nil
}

// CheckMemoryKey checks an item's key.
func CheckMemoryKey(field, key string) error {
	if err := checkMemoryName(key, MaxMemoryKeyLength); err != nil {
		return models.FieldError(field, "%v", err)
	}
	return nil
}

func checkMemoryName(s string, maxLen int) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	if utf8.RuneCountInString(s) > maxLen || !utf8.ValidString(s) {
		return fmt.Errorf("must be valid UTF-8 of at most %d characters", maxLen)
	}
	for _, r := range s {
		if r == '/' || unicode.IsControl(r) {
			return fmt.Errorf("must not contain '/' or control characters, got %q", s)
		}
	}
	return nil
}

// memoryNamespace encodes a path as stored: each segment followed by '/'.
func memoryNamespace(ns []string) string {
	if len(ns) == 0 {
		return ""
	}
	return strings.Join(ns, "/") + "/"
}

// MemoryPath decodes a stored namespace.
func MemoryPath(stored string) []string {
	stored = strings.TrimSuffix(stored, "/")
	if stored == "" {
		return []string{}
	}
	return strings.Split(stored, "/")
}

// EncodeVector is the stored form of an embedding: float32s, little-endian.
func EncodeVector(v []float32) []byte {
	if v == nil {
		return nil
	}
	out := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(f))
	}
	return out
}

// DecodeVector reads EncodeVector's form.
func DecodeVector(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func (r memoryItemRow) item() MemoryItem {
	return MemoryItem{ID: r.ID, TenantID: r.TenantID, Namespace: MemoryPath(r.Namespace), Key: r.ItemKey, Value: json.RawMessage(r.Value),
		SearchText: r.SearchText, Embedding: DecodeVector(r.Embedding), EmbeddingModel: r.EmbeddingModel, RunID: r.RunID,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, ExpiresAt: r.ExpiresAt}
}

// memoryNotFound is the answer for an item that does not exist, has
// expired or is another tenant's (answered alike).
func memoryNotFound(ns []string, key string) error {
	e := models.Errorf(models.CodeMemoryNotFound, "memory item %q not found in namespace %q", key, strings.Join(ns, "/"))
	e.Field = "key"
	return e
}

// PutMemory creates or replaces the item at (tenant, namespace, key),
// keeping its creation time, and bumps the namespace's version. The caller
// has checked the path (CheckMemoryPath, CheckMemoryKey).
func (s *Store) PutMemory(ctx context.Context, it *MemoryItem) error {
	it.TenantID = tenantOr(it.TenantID)
	ns := memoryNamespace(it.Namespace)
	if len(ns) > maxMemoryNamespaceColumn {
		return models.FieldError("namespace", "is too long: at most %d characters in all", maxMemoryNamespaceColumn)
	}
	now := dbTime(time.Now())
	row := memoryItemRow{TenantID: it.TenantID, Namespace: ns, ItemKey: it.Key, Value: string(it.Value), SearchText: it.SearchText,
		Embedding: EncodeVector(it.Embedding), EmbeddingModel: it.EmbeddingModel, RunID: it.RunID, CreatedAt: now, UpdatedAt: now, ExpiresAt: dbTimePtr(it.ExpiresAt)}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "tenant_id"}, {Name: "namespace"}, {Name: "item_key"}},
			DoUpdates: clause.AssignmentColumns([]string{"value", "search_text", "embedding", "embedding_model", "run_id", "updated_at", "expires_at"}),
		}).Create(&row).Error; err != nil {
			return err
		}
		var saved memoryItemRow
		if err := tx.Where("tenant_id = ? AND namespace = ? AND item_key = ?", it.TenantID, ns, it.Key).Take(&saved).Error; err != nil {
			return err
		}
		*it = saved.item()
		return bumpMemoryNamespace(tx, it.TenantID, ns, now)
	})
}

// bumpMemoryNamespace moves a namespace's version, so that processes
// holding its vectors reload them.
func bumpMemoryNamespace(tx *gorm.DB, tenant, ns string, now time.Time) error {
	return tx.Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "tenant_id"}, {Name: "namespace"}},
		DoUpdates: clause.Assignments(map[string]any{"version": gorm.Expr("memory_namespace.version + 1"), "updated_at": now}),
	}).Create(&memoryNamespaceRow{TenantID: tenant, Namespace: ns, Version: 1, UpdatedAt: now}).Error
}

// live restricts q to items not expired at now.
func live(q *gorm.DB, now time.Time) *gorm.DB {
	return q.Where("(memory_item.expires_at IS NULL OR memory_item.expires_at > ?)", now)
}

// GetMemory returns the live item at (tenant, namespace, key); a missing,
// expired or other tenant's item is MEMORY_NOT_FOUND.
func (s *Store) GetMemory(ctx context.Context, tenant string, ns []string, key string) (*MemoryItem, error) {
	var row memoryItemRow
	q := s.db.WithContext(ctx).Where("tenant_id = ? AND namespace = ? AND item_key = ?", tenantOr(tenant), memoryNamespace(ns), key)
	err := live(q, dbTime(time.Now())).Take(&row).Error
	if notFound(err) {
		return nil, memoryNotFound(ns, key)
	}
	if err != nil {
		return nil, err
	}
	it := row.item()
	return &it, nil
}

// DeleteMemory deletes the item at (tenant, namespace, key); a missing one
// is MEMORY_NOT_FOUND.
func (s *Store) DeleteMemory(ctx context.Context, tenant string, ns []string, key string) error {
	tenant = tenantOr(tenant)
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Where("tenant_id = ? AND namespace = ? AND item_key = ?", tenant, memoryNamespace(ns), key).Delete(&memoryItemRow{})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return memoryNotFound(ns, key)
		}
		return bumpMemoryNamespace(tx, tenant, memoryNamespace(ns), dbTime(time.Now()))
	})
}

// underPrefix restricts q to items whose namespace starts with prefix (all
// of the tenant's when prefix is empty). substr compares characters on
// both databases, and needs no escaping of LIKE's wildcards.
func underPrefix(q *gorm.DB, column string, prefix []string) *gorm.DB {
	p := memoryNamespace(prefix)
	if p == "" {
		return q
	}
	return q.Where("substr("+column+", 1, ?) = ?", utf8.RuneCountInString(p), p)
}

// ListMemoryNamespaces lists the distinct namespaces of tenant's live
// items under prefix, sorted, cut to maxDepth segments when maxDepth > 0,
// from offset, at most limit.
func (s *Store) ListMemoryNamespaces(ctx context.Context, tenant string, prefix []string, maxDepth, limit, offset int) ([][]string, error) {
	q := s.db.WithContext(ctx).Model(&memoryItemRow{}).Where("tenant_id = ?", tenantOr(tenant))
	q = live(underPrefix(q, "namespace", prefix), dbTime(time.Now()))
	var all []string
	if err := q.Distinct().Order("namespace").Pluck("namespace", &all).Error; err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	out := [][]string{}
	for _, stored := range all {
		path := MemoryPath(stored)
		if maxDepth > 0 && len(path) > maxDepth {
			path = path[:maxDepth]
		}
		k := memoryNamespace(path)
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, path)
	}
	if offset >= len(out) {
		return [][]string{}, nil
	}
	out = out[offset:]
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// MemoryTextHit is an item found by full-text search with its rank (higher
// is better; 0 when the search had no query text).
type MemoryTextHit struct {
	Item MemoryItem
	Rank float64
}

// searchTerms splits a query into words of letters and digits: what both
// full-text engines match, free of their query syntax.
func searchTerms(query string) []string {
	words := strings.FieldsFunc(strings.ToLower(query), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	seen := map[string]bool{}
	var out []string
	for _, w := range words {
		if !seen[w] && len(out) < 32 {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// memoryColumns are the columns searches and listings read: all but the
// embedding (which only semantic search's cache reads) and PostgreSQL's
// tsvector.
const memoryColumns = "memory_item.id, memory_item.tenant_id, memory_item.namespace, memory_item.item_key, memory_item.value, memory_item.search_text, " +
	"memory_item.embedding_model, memory_item.run_id, memory_item.created_at, memory_item.updated_at, memory_item.expires_at"

// SearchMemoryText finds tenant's live items under prefix whose search text
// matches any word of query (PostgreSQL: tsvector, english configuration,
// ranked by ts_rank_cd; SQLite: FTS5, porter stemmer, ranked by bm25),
// best first, skipping offset and returning at most limit. An empty query
// (or one of stop words only) lists the newest items instead, rank 0.
func (s *Store) SearchMemoryText(ctx context.Context, tenant string, prefix []string, query string, limit, offset int) ([]MemoryTextHit, error) {
	now := dbTime(time.Now())
	terms := searchTerms(query)
	base := func() *gorm.DB {
		q := s.db.WithContext(ctx).Table("memory_item").Where("memory_item.tenant_id = ?", tenantOr(tenant))
		return live(underPrefix(q, "memory_item.namespace", prefix), now)
	}
	type hitRow struct {
		Row  memoryItemRow `gorm:"embedded"`
		Rank float64
	}
	var rows []hitRow
	var err error
	switch {
	case len(terms) == 0:
		err = base().Select(memoryColumns + ", 0 AS rank").Order("memory_item.updated_at DESC, memory_item.id DESC").Limit(limit).Offset(offset).Scan(&rows).Error
	case s.dialect == DialectPostgres:
		tsq := strings.Join(terms, " | ")
		err = base().Select(memoryColumns+", ts_rank_cd(memory_item.search_tsv, to_tsquery('english', ?)) AS rank", tsq).
			Where("memory_item.search_tsv @@ to_tsquery('english', ?)", tsq).
			Order("rank DESC, memory_item.updated_at DESC").Limit(limit).Offset(offset).Scan(&rows).Error
	default:
		quoted := make([]string, len(terms))
		for i, t := range terms {
			quoted[i] = `"` + t + `"`
		}
		// bm25 is lower for better matches; its negation ranks like
		// PostgreSQL's.
		err = base().Select(memoryColumns+", -bm25(memory_item_fts) AS rank").
			Joins("JOIN memory_item_fts ON memory_item_fts.rowid = memory_item.id").
			Where("memory_item_fts MATCH ?", strings.Join(quoted, " OR ")).
			Order("rank DESC, memory_item.updated_at DESC").Limit(limit).Offset(offset).Scan(&rows).Error
	}
	if err != nil {
		return nil, err
	}
	out := make([]MemoryTextHit, len(rows))
	for i, r := range rows {
		out[i] = MemoryTextHit{Item: r.Row.item(), Rank: r.Rank}
	}
	return out, nil
}

// MemoryNamespaceVersions returns the version of each of tenant's
// namespaces under prefix (stored form → version): what a process holding
// their vectors compares with its own.
func (s *Store) MemoryNamespaceVersions(ctx context.Context, tenant string, prefix []string) (map[string]int64, error) {
	var rows []memoryNamespaceRow
	q := s.db.WithContext(ctx).Where("tenant_id = ?", tenantOr(tenant))
	if err := underPrefix(q, "namespace", prefix).Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Namespace] = r.Version
	}
	return out, nil
}

// MemoryVector is one item's embedding, as semantic search scans it.
type MemoryVector struct {
	ID        int64
	UpdatedAt time.Time
	ExpiresAt *time.Time
	Vector    []float32
}

// MemoryVectors reads the embeddings by model of every item of one stored
// namespace (see MemoryNamespaceVersions) of tenant, expired ones included
// (the caller skips them, so that it can keep the list until the
// namespace's version moves).
func (s *Store) MemoryVectors(ctx context.Context, tenant, storedNamespace, model string) ([]MemoryVector, error) {
	rows, err := s.db.WithContext(ctx).Model(&memoryItemRow{}).Select("id, updated_at, expires_at, embedding").
		Where("tenant_id = ? AND namespace = ? AND embedding_model = ? AND embedding IS NOT NULL", tenantOr(tenant), storedNamespace, model).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []MemoryVector
	for rows.Next() {
		var (
			v   MemoryVector
			raw []byte
		)
		if err := rows.Scan(&v.ID, &v.UpdatedAt, &v.ExpiresAt, &raw); err != nil {
			return nil, err
		}
		v.Vector = DecodeVector(raw)
		out = append(out, v)
	}
	return out, rows.Err()
}

// MemoryItemsByID returns tenant's live items among ids, in no order,
// without their embeddings.
func (s *Store) MemoryItemsByID(ctx context.Context, tenant string, ids []int64) ([]MemoryItem, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var rows []memoryItemRow
	q := s.db.WithContext(ctx).Select(memoryColumns).Where("tenant_id = ? AND id IN ?", tenantOr(tenant), ids)
	if err := live(q, dbTime(time.Now())).Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]MemoryItem, len(rows))
	for i, r := range rows {
		out[i] = r.item()
	}
	return out, nil
}

// ListMemory returns tenant's live items under prefix with an id above
// after, in id order, at most limit, without their embeddings: the pages
// of an export.
func (s *Store) ListMemory(ctx context.Context, tenant string, prefix []string, after int64, limit int) ([]MemoryItem, error) {
	var rows []memoryItemRow
	q := s.db.WithContext(ctx).Select(memoryColumns).Where("tenant_id = ? AND id > ?", tenantOr(tenant), after)
	if err := live(underPrefix(q, "namespace", prefix), dbTime(time.Now())).Order("id").Limit(limit).Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]MemoryItem, len(rows))
	for i, r := range rows {
		out[i] = r.item()
	}
	return out, nil
}

// DeleteExpiredMemory deletes up to limit items of any tenant that expired
// before now, and returns how many it deleted: the retention sweep.
func (s *Store) DeleteExpiredMemory(ctx context.Context, now time.Time, limit int) (int64, error) {
	var ids []int64
	if err := s.db.WithContext(ctx).Model(&memoryItemRow{}).Where("expires_at IS NOT NULL AND expires_at <= ?", dbTime(now)).
		Order("expires_at").Limit(limit).Pluck("id", &ids).Error; err != nil || len(ids) == 0 {
		return 0, err
	}
	res := s.db.WithContext(ctx).Where("id IN ?", ids).Delete(&memoryItemRow{})
	return res.RowsAffected, res.Error
}

// PutMemoryBatch inserts new items (none may exist yet at its namespace
// and key) in batches of 1,000 rows, and bumps each namespace's version
// once: for seeding large namespaces (benchmarks, tests), where PutMemory's
// transaction per item is too slow.
func (s *Store) PutMemoryBatch(ctx context.Context, items []MemoryItem) error {
	now := dbTime(time.Now())
	rows := make([]memoryItemRow, len(items))
	spaces := map[[2]string]bool{}
	for i, it := range items {
		tenant := tenantOr(it.TenantID)
		ns := memoryNamespace(it.Namespace)
		spaces[[2]string{tenant, ns}] = true
		rows[i] = memoryItemRow{TenantID: tenant, Namespace: ns, ItemKey: it.Key, Value: string(it.Value), SearchText: it.SearchText,
			Embedding: EncodeVector(it.Embedding), EmbeddingModel: it.EmbeddingModel, RunID: it.RunID, CreatedAt: now, UpdatedAt: now, ExpiresAt: dbTimePtr(it.ExpiresAt)}
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.CreateInBatches(rows, 1000).Error; err != nil {
			return err
		}
		for k := range spaces {
			if err := bumpMemoryNamespace(tx, k[0], k[1], now); err != nil {
				return err
			}
		}
		return nil
	})
}

// AnalyzeMemory refreshes PostgreSQL's statistics of memory_item and
// merges its GIN index's pending entries (VACUUM ANALYZE), as autovacuum
// would some time after a large import or seeding; SQLite: ANALYZE.
func (s *Store) AnalyzeMemory(ctx context.Context) error {
	if s.dialect == DialectPostgres {
		return s.db.WithContext(ctx).Exec("VACUUM ANALYZE memory_item").Error
	}
	return s.db.WithContext(ctx).Exec("ANALYZE memory_item").Error
}
