package app

import (
	"context"
	"log/slog"
	"sort"
	"strings"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/models"
)

// useSearchAttributes decides whether runs carry the custom search
// attributes (HierarchyId, RunStatus, HierarchyName, and TenantId apart): a
// namespace without them would reject every run that sets them, so with
// TEMPORAL_SEARCH_ATTRIBUTES=auto the namespace is asked once at start, and
// a missing attribute turns it off with a warning saying how to create it.
// TenantId is decided on its own, so that a namespace set up before tenants
// keeps the other three.
//
// TotalTokens and CostUsd (usage) are decided on their own the same way,
// and so is ForkedFrom (fork).
func useSearchAttributes(cfg config.Config, log *slog.Logger, tc client.Client) (core, tenant, usage, fork bool) {
	switch cfg.TemporalSearchAttributes {
	case "true":
		return true, true, true, true
	case "false":
		return false, false, false, false
	}
	if tc == nil {
		return false, false, false, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := tc.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: cfg.TemporalNamespace})
	if err != nil {
		log.Warn("cannot list search attributes; runs will not set them", "error", err)
		return false, false, false, false
	}
	var missing []string
	for name, typ := range models.SearchAttributeTypes() {
		if _, ok := resp.GetCustomAttributes()[name]; !ok {
			missing = append(missing, "--name "+name+" --type "+typ)
		}
	}
	_, hasTenant := resp.GetCustomAttributes()[models.SearchTenantID.GetName()]
	_, fork = resp.GetCustomAttributes()[models.SearchForkedFrom.GetName()]
	usage = true
	for _, name := range models.UsageSearchAttributes() {
		if _, ok := resp.GetCustomAttributes()[name]; !ok {
			usage = false
		}
	}
	apart := append(models.UsageSearchAttributes(), models.SearchTenantID.GetName(), models.SearchForkedFrom.GetName())
	core = true
	for _, m := range missing {
		separate := false
		for _, name := range apart {
			if strings.Contains(m, "--name "+name+" ") {
				separate = true
			}
		}
		if !separate {
			core = false
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		log.Warn("search attributes missing; runs will not set them (create them with: temporal operator search-attribute create --namespace "+
			cfg.TemporalNamespace+" "+strings.Join(missing, " ")+")", "hierarchy_attributes", core, "tenant_attribute", hasTenant, "usage_attributes", usage, "fork_attribute", fork)
	}
	return core, hasTenant, usage, fork
}
