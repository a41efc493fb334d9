package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// TestStreamTokenLivesNoLongerThanItsKey: a token issued by an API key is
// refused once the key is revoked or has expired; a token of no key (an
// identity provider's caller, or access control off) is unaffected.
func TestStreamTokenLivesNoLongerThanItsKey(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		exp := time.Now().Add(time.Minute)
		_, k := newKey(t, st, "acme", "runs:read")
		_, shortLived := newKey(t, st, "acme", "runs:read")
		past := time.Now().Add(-time.Second)
		if err := st.DB().Exec("UPDATE api_key SET expires_at = ? WHERE id = ?", past, shortLived.ID).Error; err != nil {
			t.Fatal(err)
		}
		for name, keyID := range map[string]string{"of-key": k.ID, "of-expired-key": shortLived.ID, "of-no-key": "", "of-deleted-key": "key_gone"} {
			if err := st.CreateKeyStreamToken(ctx, auth.HashSecret(name), "run-1", "acme", keyID, exp); err != nil {
				t.Fatal(err)
			}
		}
		if run, _, _, err := st.StreamToken(ctx, auth.HashSecret("of-key")); err != nil || run != "run-1" {
			t.Fatalf("token of a live key: %q %v", run, err)
		}
		for _, name := range []string{"of-expired-key", "of-deleted-key"} {
			if _, _, _, err := st.StreamToken(ctx, auth.HashSecret(name)); !errors.Is(err, store.ErrStreamTokenNotFound) {
				t.Errorf("token %s: %v, want ErrStreamTokenNotFound", name, err)
			}
		}
		if err := st.RevokeAPIKey(ctx, k.ID); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := st.StreamToken(ctx, auth.HashSecret("of-key")); !errors.Is(err, store.ErrStreamTokenNotFound) {
			t.Errorf("token of a revoked key: %v, want ErrStreamTokenNotFound", err)
		}
		if _, _, _, err := st.StreamToken(ctx, auth.HashSecret("of-no-key")); err != nil {
			t.Errorf("token of no key: %v", err)
		}
	})
}
