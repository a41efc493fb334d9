package app

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/models"
)

// useSearchAttributes decides whether runs carry the custom search
// attributes (HierarchyId, RunStatus, HierarchyName): a namespace without
// them would reject every run that sets them, so with
// TEMPORAL_SEARCH_ATTRIBUTES=auto the namespace is asked once at start, and
// a missing attribute turns them off with a warning saying how to create
// them.
func useSearchAttributes(cfg config.Config, log *slog.Logger, tc client.Client) bool {
	switch cfg.TemporalSearchAttributes {
	case "true":
		return true
	case "false":
		return false
	}
	if tc == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := tc.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: cfg.TemporalNamespace})
	if err != nil {
		log.Warn("cannot list search attributes; runs will not set them", "error", err)
		return false
	}
	var missing []string
	for name := range models.SearchAttributeTypes() {
		if _, ok := resp.GetCustomAttributes()[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		log.Warn("search attributes missing; runs will not set them (create them with: temporal operator search-attribute create --namespace "+
			cfg.TemporalNamespace+" --name HierarchyId --type Keyword --name RunStatus --type Keyword --name HierarchyName --type Text)",
			"missing", strings.Join(missing, ","))
		return false
	}
	return true
}
