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
		return noTenant
	}
	return p.Tenant
}

// noTenant is tenantFilter's answer for a request without a principal: a
// tenant no object has. No query is made for it (PostgreSQL text cannot
// hold NUL), and an unknown id answers the same without one.
const noTenant = "\x00none"

// visibleRun loads the run the request knows by id (its public id, unique
// in a tenant; see store.Run). The tenant is part of the query
// (store.GetTenantRun), so another tenant's run and an unknown id do the
// same work and answer the same 404 (issue 23, item 8). A principal that
// sees every tenant gets its own tenant's run first. Handlers use the
// answer's ID (its key) for everything stored and its PublicID in answers.
func (s *Server) visibleRun(ctx context.Context, id string) (*store.Run, error) {
	notFound := models.Errorf(models.CodeExecutionNotFound, "run %q not found", id)
	tenant := tenantFilter(ctx)
	// A stream token's principal may read its one run only: its tenant's
	// run by that public id.
	if p, _ := auth.PrincipalFrom(ctx); tenant == noTenant || (p.RunID != "" && p.RunID != id) {
		return nil, notFound
	}
	run, err := s.store.GetTenantRun(ctx, tenant, ownTenant(ctx), id)
	if models.ErrorCode(err) == models.CodeExecutionNotFound {
		return nil, notFound
	}
	return run, err
}

// visibleHierarchy loads a hierarchy the request may see, as visibleRun
// loads a run.
func (s *Server) visibleHierarchy(ctx context.Context, id string) (*models.Hierarchy, error) {
	tenant := tenantFilter(ctx)
	if tenant == noTenant {
		return nil, models.Errorf(models.CodeHierarchyNotFound, "hierarchy %q not found", id)
	}
	return s.store.GetTenantHierarchy(ctx, tenant, id)
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

// visibleSubAgent loads a sub-agent the request may see, as visibleRun
// loads a run; sub-agent ids are unique per tenant, so a principal that
// sees every tenant gets its own tenant's first.
func (s *Server) visibleSubAgent(ctx context.Context, id string) (*models.SubAgent, error) {
	tenant := tenantFilter(ctx)
	if tenant == noTenant {
		return nil, models.Errorf(models.CodeSubAgentNotFound, "sub-agent with id %q not found", id)
	}
	return s.store.GetSubAgent(ctx, tenant, ownTenant(ctx), id)
}
