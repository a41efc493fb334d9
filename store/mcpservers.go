package store

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/op-stack/executor/models"
)

// MCPServer is a tenant's Model Context Protocol server (issue 24). Its
// secrets (Headers, BearerToken) are sealed at rest under the key given to
// SetMCPSecretKey; the readers leave them empty unless asked to open them
// (MCPServerSecrets), so nothing that lists or shows servers can leak one.
type MCPServer struct {
	ID       string
	TenantID string
	Name     string
	URL      string
	Command  []string
	// HeaderEnv maps a header name to the environment variable of the
	// workers that holds its value; BearerTokenEnv names the one holding
	// the bearer token. Their values never reach the database.
	HeaderEnv      map[string]string
	BearerTokenEnv string
	// Headers and BearerToken are the inline secrets: written when set,
	// kept when an update leaves them nil, never read back but by
	// MCPServerSecrets.
	Headers     map[string]string
	BearerToken *string
	// SecretNames lists the inline secrets that are set ("authorization"
	// for the bearer token, header names otherwise), for answers.
	SecretNames  []string
	AllowedTools []string
	Timeout      time.Duration
	// Approval is "" (none), "destructive" or "not_read_only".
	Approval  string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// MCPSecrets are a server's inline secrets, opened.
type MCPSecrets struct {
	Headers     map[string]string `json:"headers,omitempty"`
	BearerToken string            `json:"bearer_token,omitempty"`
}

type mcpServerRow struct {
	ID             string `gorm:"primaryKey"`
	TenantID       string
	Name           string
	URL            string
	Command        string
	HeaderEnv      string
	BearerTokenEnv string
	Secrets        []byte
	SecretNames    string
	AllowedTools   string
	TimeoutMS      int64 `gorm:"column:timeout_ms"`
	Approval       string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

func (mcpServerRow) TableName() string { return "mcp_server" }

// ErrNoMCPSecretKey refuses inline secrets on a deployment without
// MCP_SECRET_KEY: storing them in the clear is not an option.
var ErrNoMCPSecretKey = errors.New("this deployment stores no MCP secrets (MCP_SECRET_KEY is not set); name an environment variable of the workers instead")

// SetMCPSecretKey sets the 32-byte AES-256 key that seals MCP servers'
// inline secrets (safe to call while serving; the API and the worker of
// one process both set it). Without it, inline secrets are refused with
// ErrNoMCPSecretKey.
func (s *Store) SetMCPSecretKey(key []byte) error {
	if len(key) != 32 {
		return fmt.Errorf("the MCP secret key must be 32 bytes, got %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return err
	}
	s.mcpAEAD.Store(&aead)
	return nil
}

// NewMCPServerID returns a fresh MCP server id.
func NewMCPServerID() string { return "mcp_" + uuid.NewString() }

// seal encrypts secrets, bound to the server's id (as additional data) so
// that a sealed value copied onto another server's row does not open.
func (s *Store) seal(id string, sec MCPSecrets) ([]byte, error) {
	p := s.mcpAEAD.Load()
	if p == nil {
		return nil, ErrNoMCPSecretKey
	}
	aead := *p
	plain, err := json.Marshal(sec)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return aead.Seal(nonce, nonce, plain, []byte(id)), nil
}

func (s *Store) open(id string, sealed []byte) (MCPSecrets, error) {
	var sec MCPSecrets
	if len(sealed) == 0 {
		return sec, nil
	}
	p := s.mcpAEAD.Load()
	if p == nil {
		return sec, ErrNoMCPSecretKey
	}
	aead := *p
	n := aead.NonceSize()
	if len(sealed) < n {
		return sec, errors.New("sealed MCP secrets are truncated")
	}
	plain, err := aead.Open(nil, sealed[:n], sealed[n:], []byte(id))
	if err != nil {
		return sec, fmt.Errorf("cannot open the MCP server's secrets (was MCP_SECRET_KEY changed?): %w", err)
	}
	return sec, json.Unmarshal(plain, &sec)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only maps and slices of strings come here
	}
	return string(b)
}

// toRow builds m's row; sealed is the sealed secrets to store.
func (m *MCPServer) toRow(sealed []byte) mcpServerRow {
	return mcpServerRow{
		ID: m.ID, TenantID: m.TenantID, Name: m.Name, URL: m.URL,
		Command: mustJSON(nonNil(m.Command)), HeaderEnv: mustJSON(nonNilMap(m.HeaderEnv)), BearerTokenEnv: m.BearerTokenEnv,
		Secrets: sealed, SecretNames: mustJSON(nonNil(m.SecretNames)), AllowedTools: mustJSON(nonNil(m.AllowedTools)),
		TimeoutMS: m.Timeout.Milliseconds(), Approval: m.Approval, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt,
	}
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func (r mcpServerRow) toServer() MCPServer {
	m := MCPServer{ID: r.ID, TenantID: r.TenantID, Name: r.Name, URL: r.URL, BearerTokenEnv: r.BearerTokenEnv,
		Timeout: time.Duration(r.TimeoutMS) * time.Millisecond, Approval: r.Approval,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
	_ = json.Unmarshal([]byte(r.Command), &m.Command)
	_ = json.Unmarshal([]byte(r.HeaderEnv), &m.HeaderEnv)
	_ = json.Unmarshal([]byte(r.SecretNames), &m.SecretNames)
	_ = json.Unmarshal([]byte(r.AllowedTools), &m.AllowedTools)
	return m
}

// secretNames lists the inline secrets sec sets.
func secretNames(sec MCPSecrets) []string {
	var names []string
	if sec.BearerToken != "" {
		names = append(names, "authorization")
	}
	for k := range sec.Headers {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// CreateMCPServer stores m in its tenant ("" is the default tenant),
// sealing its inline secrets. A name taken in the tenant is an
// AlreadyExists error naming the field.
func (s *Store) CreateMCPServer(ctx context.Context, m *MCPServer) error {
	m.TenantID = tenantOr(m.TenantID)
	if m.ID == "" {
		m.ID = NewMCPServerID()
	}
	m.CreatedAt = dbTime(time.Now())
	m.UpdatedAt = m.CreatedAt
	var sec MCPSecrets
	sec.Headers = m.Headers
	if m.BearerToken != nil {
		sec.BearerToken = *m.BearerToken
	}
	var sealed []byte
	if m.SecretNames = secretNames(sec); len(m.SecretNames) > 0 {
		var err error
		if sealed, err = s.seal(m.ID, sec); err != nil {
			return err
		}
	}
	m.Headers, m.BearerToken = nil, nil
	row := m.toRow(sealed)
	if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
		if errors.Is(err, gorm.ErrDuplicatedKey) {
			e := models.Errorf(models.CodeAlreadyExists, "MCP server name %q is taken", m.Name)
			e.Field = "name"
			return e
		}
		return fmt.Errorf("insert MCP server: %w", err)
	}
	return nil
}

func mcpServerNotFound(by, key string) error {
	e := models.Errorf(models.CodeMCPServerNotFound, "MCP server with %s %q not found", by, key)
	e.Field = by
	return e
}

// GetMCPServer loads tenant's server by id or, when id is empty, by name;
// another tenant's server is not found, as an unknown one. Secrets stay
// sealed.
func (s *Store) GetMCPServer(ctx context.Context, tenant, id, name string) (*MCPServer, error) {
	row, err := s.mcpServerRow(ctx, s.db.WithContext(ctx), tenant, id, name)
	if err != nil {
		return nil, err
	}
	m := row.toServer()
	return &m, nil
}

func (s *Store) mcpServerRow(ctx context.Context, db *gorm.DB, tenant, id, name string) (mcpServerRow, error) {
	var row mcpServerRow
	q := db.Where("tenant_id = ?", tenantOr(tenant))
	by, key := "id", id
	if id != "" {
		q = q.Where("id = ?", id)
	} else {
		by, key = "name", name
		q = q.Where("name = ?", name)
	}
	err := q.Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return row, mcpServerNotFound(by, key)
	}
	return row, err
}

// MCPServerSecrets opens the inline secrets of tenant's server id: for
// the worker's activity that connects, never for an answer.
func (s *Store) MCPServerSecrets(ctx context.Context, tenant, id string) (MCPSecrets, error) {
	row, err := s.mcpServerRow(ctx, s.db.WithContext(ctx), tenant, id, "")
	if err != nil {
		return MCPSecrets{}, err
	}
	return s.open(row.ID, row.Secrets)
}

// ListMCPServers lists tenant's servers by name ("" lists every tenant's,
// for principals that see all).
func (s *Store) ListMCPServers(ctx context.Context, tenant string) ([]MCPServer, error) {
	var rows []mcpServerRow
	q := s.db.WithContext(ctx).Order("tenant_id, name")
	if tenant != "" {
		q = q.Where("tenant_id = ?", tenant)
	}
	if err := q.Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]MCPServer, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.toServer())
	}
	return out, nil
}

// UpdateMCPServer replaces m's fields on tenant's server m.ID but its
// secrets: Headers replaces the inline headers when non-nil, BearerToken
// the token when non-nil (an empty string removes it); nil keeps what is
// stored. Unknown id: MCPServerNotFound.
func (s *Store) UpdateMCPServer(ctx context.Context, m *MCPServer) error {
	m.TenantID = tenantOr(m.TenantID)
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		old, err := s.mcpServerRow(ctx, tx, m.TenantID, m.ID, "")
		if err != nil {
			return err
		}
		sealed := old.Secrets
		if m.Headers != nil || m.BearerToken != nil {
			sec, err := s.open(old.ID, old.Secrets)
			if err != nil {
				return err
			}
			if m.Headers != nil {
				sec.Headers = m.Headers
			}
			if m.BearerToken != nil {
				sec.BearerToken = *m.BearerToken
			}
			sealed = nil
			if len(secretNames(sec)) > 0 {
				if sealed, err = s.seal(old.ID, sec); err != nil {
					return err
				}
			}
			m.SecretNames = secretNames(sec)
		} else {
			_ = json.Unmarshal([]byte(old.SecretNames), &m.SecretNames)
		}
		m.Headers, m.BearerToken = nil, nil
		m.CreatedAt = old.CreatedAt.UTC()
		m.UpdatedAt = dbTime(time.Now())
		row := m.toRow(sealed)
		if err := tx.Select("*").Save(&row).Error; err != nil {
			if errors.Is(err, gorm.ErrDuplicatedKey) {
				e := models.Errorf(models.CodeAlreadyExists, "MCP server name %q is taken", m.Name)
				e.Field = "name"
				return e
			}
			return err
		}
		return nil
	})
}

// DeleteMCPServer deletes tenant's server id.
func (s *Store) DeleteMCPServer(ctx context.Context, tenant, id string) error {
	res := s.db.WithContext(ctx).Where("tenant_id = ? AND id = ?", tenantOr(tenant), id).Delete(&mcpServerRow{})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return mcpServerNotFound("id", id)
	}
	return nil
}
