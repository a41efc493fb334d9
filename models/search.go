package models

import "go.temporal.io/sdk/temporal"

// Custom search attributes of run workflows, so runs can be found in the
// Temporal Web UI and with `temporal workflow list --query`. `executor dev`
// registers them on the dev server; on a real cluster create them with
//
//	temporal operator search-attribute create --namespace <ns> \
//	  --name HierarchyId --type Keyword --name RunStatus --type Keyword --name HierarchyName --type Text \
//	  --name TenantId --type Keyword --name TotalTokens --type Int --name CostUsd --type Double \
//	  --name ForkedFrom --type Keyword
var (
	SearchHierarchyID   = temporal.NewSearchAttributeKeyKeyword("HierarchyId")
	SearchRunStatus     = temporal.NewSearchAttributeKeyKeyword("RunStatus")
	SearchHierarchyName = temporal.NewSearchAttributeKeyString("HierarchyName")
	// SearchTenantID is the tenant owning the run, so operators can filter
	// one tenant's runs: TenantId = "acme".
	SearchTenantID = temporal.NewSearchAttributeKeyKeyword("TenantId")
	// SearchTotalTokens and SearchCostUSD are the run's usage so far (its
	// tokens and its cost in US dollars, priced calls only), kept current
	// by the run's workflow: CostUsd > 1.5.
	SearchTotalTokens = temporal.NewSearchAttributeKeyInt64("TotalTokens")
	SearchCostUSD     = temporal.NewSearchAttributeKeyFloat64("CostUsd")
	// SearchForkedFrom is the run id a fork was started from (runs/fork):
	// ForkedFrom = "<run id>" lists a run's forks.
	SearchForkedFrom = temporal.NewSearchAttributeKeyKeyword("ForkedFrom")
)

// UsageSearchAttributes are the names of the usage search attributes,
// decided apart from the others (a namespace set up before them keeps the
// others).
func UsageSearchAttributes() []string {
	return []string{SearchTotalTokens.GetName(), SearchCostUSD.GetName()}
}

// SearchAttributeTypes lists the custom search attributes with their types
// in the temporal CLI's spelling.
func SearchAttributeTypes() map[string]string {
	return map[string]string{
		SearchHierarchyID.GetName():   "Keyword",
		SearchRunStatus.GetName():     "Keyword",
		SearchHierarchyName.GetName(): "Text",
		SearchTenantID.GetName():      "Keyword",
		SearchTotalTokens.GetName():   "Int",
		SearchCostUSD.GetName():       "Double",
		SearchForkedFrom.GetName():    "Keyword",
	}
}
