package models

import "go.temporal.io/sdk/temporal"

// Custom search attributes of run workflows, so runs can be found in the
// Temporal Web UI and with `temporal workflow list --query`. `executor dev`
// registers them on the dev server; on a real cluster create them with
//
//	temporal operator search-attribute create --namespace <ns> \
//	  --name HierarchyId --type Keyword --name RunStatus --type Keyword --name HierarchyName --type Text \
//	  --name TenantId --type Keyword
var (
	SearchHierarchyID   = temporal.NewSearchAttributeKeyKeyword("HierarchyId")
	SearchRunStatus     = temporal.NewSearchAttributeKeyKeyword("RunStatus")
	SearchHierarchyName = temporal.NewSearchAttributeKeyString("HierarchyName")
	// SearchTenantID is the tenant owning the run, so operators can filter
	// one tenant's runs: TenantId = "acme".
	SearchTenantID = temporal.NewSearchAttributeKeyKeyword("TenantId")
)

// SearchAttributeTypes lists the custom search attributes with their types
// in the temporal CLI's spelling.
func SearchAttributeTypes() map[string]string {
	return map[string]string{
		SearchHierarchyID.GetName():   "Keyword",
		SearchRunStatus.GetName():     "Keyword",
		SearchHierarchyName.GetName(): "Text",
		SearchTenantID.GetName():      "Keyword",
	}
}
