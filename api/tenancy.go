package api

import (
	"context"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// Objects belong to the tenant that created them (a run to its
// hierarchy's). The readers below are the API's only way to load an object
// by id for a request: they answer an object of another tenant exactly as
// an unknown id, so that its existence is never revealed. Lists filter by
// tenant with tenantFilter.

// canSee reports whether the request's principal may see an object of
// tenant.
func canSee(ctx context.Context, tenant string) bool {
	p, ok := auth.PrincipalFrom(ctx)
	return ok && p.CanSee(tenantOrDefault(tenant))
}

func tenantOrDefault(t string) string {
	if t == "" {
		return auth.DefaultTenant
	}
	return t
}

// ownTenant is the tenant new objects of the request are created in.
func ownTenant(ctx context.Context) string {
	p, _ := auth.PrincipalFrom(ctx)
	return tenantOrDefault(p.Tenant)
}

// tenantFilter is the tenant a list of the request is restricted to: ""
// (all) for principals that see every tenant.
func tenantFilter(ctx context.Context) string {
	p, ok := auth.PrincipalFrom(ctx)
	if ok && p.AllTenants() {
		return ""
	}
	// A missing principal lists an impossible tenant, so nothing.
	if !ok || p.Tenant == "" {
		return "\x00none"
	}
	return p.Tenant
}

func (s *Server) visibleRun(ctx context.Context, id string) (*store.Run, error) {
	run, err := s.store.GetRun(ctx, id)
	if err != nil {
		return nil, err
	}
	if !canSee(ctx, run.TenantID) {
		return nil, models.Errorf(models.CodeExecutionNotFound, "run %q not found", id)
	}
	if p, _ := auth.PrincipalFrom(ctx); p.RunID != "" && p.RunID != run.ID {
		return nil, models.Errorf(models.CodeExecutionNotFound, "run %q not found", id)
	}
	return run, nil
}

func (s *Server) visibleHierarchy(ctx context.Context, id string) (*models.Hierarchy, error) {
	h, err := s.store.GetHierarchy(ctx, id)
	if err != nil {
		return nil, err
	}
	if !canSee(ctx, h.TenantID) {
		return nil, models.Errorf(models.CodeHierarchyNotFound, "hierarchy %q not found", id)
	}
	return h, nil
}

// keepTenant checks that the hierarchy h replaces is visible and keeps its
// tenant: an update never moves an object to another tenant.
func (s *Server) keepTenant(ctx context.Context, h *models.Hierarchy) error {
	old, err := s.visibleHierarchy(ctx, h.ID)
	if err != nil {
		return err
	}
	h.TenantID = old.TenantID
	return nil
}

func (s *Server) visibleSubAgent(ctx context.Context, id string) (*models.SubAgent, error) {
	sa, err := s.store.GetSubAgent(ctx, id)
	if err != nil {
		return nil, err
	}
	if !canSee(ctx, sa.TenantID) {
		return nil, models.Errorf(models.CodeSubAgentNotFound, "sub-agent with id %q not found", id)
	}
	return sa, nil
}
