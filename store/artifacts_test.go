package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

func artifactRun(t *testing.T, st *store.Store, id, tenant string) {
	t.Helper()
	if err := st.CreateRun(context.Background(), &store.Run{ID: id, TenantID: tenant, HierarchyID: "h", WorkflowID: "run-" + id, Task: "t"}); err != nil {
		t.Fatal(err)
	}
}

// TestArtifactsStoreReadList: a file is stored with its run's tenant, its
// size and SHA-256, read back byte for byte (binary included), listed
// without its bytes, and hidden from other tenants and other runs' tokens.
func TestArtifactsStoreReadList(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		artifactRun(t, st, "run-a", "acme")
		data := []byte{0x89, 'P', 'N', 'G', 0, 1, 2, 0xff, 0xfe}
		a := &store.Artifact{RunID: "run-a", AgentID: "w-1", AgentName: "writer", Source: models.ArtifactSourceTool, ToolName: "chart",
			Name: "chart.png", MediaType: "image/png", Content: data, Producer: "run-run-a/r1/7", Attempt: 1}
		if err := st.SaveArtifact(ctx, a, 0, store.ArtifactLimits{MaxBytes: 100, RunMaxBytes: 1000}); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if a.TenantID != "acme" || a.Size != int64(len(data)) || a.SHA256 != hex.EncodeToString(sum[:]) || a.ID != store.ArtifactID("run-run-a/r1/7", 1, 0) {
			t.Fatalf("stored %+v", a)
		}
		// A retried write of the same file stores it once.
		again := *a
		again.Content = data
		if err := st.SaveArtifact(ctx, &again, 0, store.ArtifactLimits{}); err != nil {
			t.Fatal(err)
		}
		got, err := st.GetArtifact(ctx, a.ID, "acme", "")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Content, data) || got.MediaType != "image/png" || got.Name != "chart.png" || got.AgentID != "w-1" || got.ToolName != "chart" {
			t.Fatalf("read %+v", got)
		}
		if _, err := st.GetArtifact(ctx, a.ID, "", "run-a"); err != nil {
			t.Fatalf("all tenants, its run: %v", err)
		}
		for _, c := range []struct{ tenant, run string }{{"other", ""}, {"acme", "run-b"}, {"", "run-b"}} {
			if _, err := st.GetArtifact(ctx, a.ID, c.tenant, c.run); models.ErrorCode(err) != models.CodeArtifactNotFound {
				t.Errorf("tenant %q run %q: err = %v, want ARTIFACT_NOT_FOUND", c.tenant, c.run, err)
			}
		}
		if _, err := st.GetArtifact(ctx, "art_nope", "", ""); models.ErrorCode(err) != models.CodeArtifactNotFound {
			t.Errorf("unknown id: err = %v", err)
		}
		list, err := st.ListArtifacts(ctx, "run-a")
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].ID != a.ID || len(list[0].Content) != 0 || list[0].Size != int64(len(data)) || list[0].SHA256 != a.SHA256 {
			t.Fatalf("list = %+v", list)
		}
		if err := st.SaveArtifact(ctx, &store.Artifact{RunID: "no-such-run", Name: "x", MediaType: "text/plain", Source: "answer"}, 0, store.ArtifactLimits{}); models.ErrorCode(err) != models.CodeExecutionNotFound {
			t.Errorf("unknown run: err = %v", err)
		}
	})
}

// TestArtifactLimits: a file over the per-file limit, or one that takes
// the run's files over the per-run limit, is refused with
// ARTIFACT_TOO_LARGE and leaves nothing stored; a later attempt of the same
// activity replaces the earlier attempt's files, which then no longer count.
func TestArtifactLimits(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		artifactRun(t, st, "run-l", "")
		limits := store.ArtifactLimits{MaxBytes: 10, RunMaxBytes: 15}
		save := func(producer string, attempt, index, size int) error {
			return st.SaveArtifact(ctx, &store.Artifact{RunID: "run-l", Name: "f.txt", MediaType: "text/plain", Source: models.ArtifactSourceAnswer,
				Content: bytes.Repeat([]byte("x"), size), Producer: producer, Attempt: attempt}, index, limits)
		}
		err := save("p1", 1, 0, 11)
		if !store.IsArtifactTooLarge(err) || models.ErrorCode(err).HTTPStatus != 413 {
			t.Fatalf("11 bytes over a 10-byte limit: err = %v", err)
		}
		if err := save("p1", 1, 0, 10); err != nil {
			t.Fatal(err)
		}
		if err := save("p2", 1, 0, 6); !store.IsArtifactTooLarge(err) {
			t.Fatalf("10+6 bytes over a 15-byte run limit: err = %v", err)
		}
		if err := save("p2", 1, 0, 5); err != nil {
			t.Fatalf("10+5 bytes: %v", err)
		}
		// Attempt 2 of p1 drops attempt 1's 10 bytes: 5+8 fits.
		if err := save("p1", 2, 0, 8); err != nil {
			t.Fatalf("a later attempt: %v", err)
		}
		list, err := st.ListArtifacts(ctx, "run-l")
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		for _, a := range list {
			total += a.Size
			if a.Producer == "p1" && a.Attempt != 2 {
				t.Errorf("attempt 1's file is still stored: %+v", a)
			}
			if a.TenantID != store.DefaultTenant {
				t.Errorf("tenant = %q", a.TenantID)
			}
		}
		if len(list) != 2 || total != 13 {
			t.Fatalf("stored %d files, %d bytes; want 2 files, 13 bytes", len(list), total)
		}
	})
}
