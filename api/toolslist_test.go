package api_test

import (
	"testing"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
	"github.com/op-stack/executor/tools"
)

// TestToolsList checks that tools/list answers the catalog hierarchies are
// validated against, with descriptions, and an empty list for a catalog
// that cannot list itself.
func TestToolsList(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		reg := tools.Default(tools.Config{})
		a := newTestAPI(t, st, func(o *api.Options) { o.Tools = reg })
		var out struct {
			Items []struct {
				Key         string `json:"key"`
				Description string `json:"description"`
			} `json:"items"`
			Total int `json:"total"`
		}
		a.mustPost("/api/executor/v1/tools/list", map[string]any{}, &out)
		if out.Total != len(reg.Keys()) || len(out.Items) != out.Total || out.Total == 0 {
			t.Fatalf("tools/list = %+v, the registry has %v", out, reg.Keys())
		}
		for i, it := range out.Items {
			if it.Key != reg.Keys()[i] || it.Description == "" || it.Description != reg.Describe(it.Key) {
				t.Errorf("item %d = %+v", i, it)
			}
		}

		b := newTestAPI(t, st, withFakeTools)
		b.mustPost("/api/executor/v1/tools/list", map[string]any{}, &out)
		if out.Total != 0 || len(out.Items) != 0 {
			t.Errorf("a catalog that cannot list answers %+v, want none", out)
		}
	})
}
