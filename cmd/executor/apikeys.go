package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/store"
)

// newAPIKeysCommand is `executor apikeys`: create, list and revoke API
// keys in the service's database. Only a created key is written to
// standard output; messages go to standard error.
func newAPIKeysCommand(load func() (service, error)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "apikeys",
		Short: "Create, list and revoke API keys",
		Long: `Manage the API keys clients authenticate with (Authorization: Bearer osk_...).
Keys are stored as SHA-256 hashes in the service's database (DATABASE_URL, or
the SQLite file under DATA_DIR): a key is shown once, when it is created.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return groupRun(cmd, args) },
	}

	var tenant, scopes, expires, description string
	create := &cobra.Command{
		Use:   "create --tenant NAME --scopes LIST [--expires DURATION] [--description TEXT]",
		Short: "Create a key and print it alone on standard output",
		Long: "Create an API key for a tenant and print it, alone, on standard output. It is\n" +
			"not stored and cannot be shown again: only its SHA-256 hash is kept.\n" +
			"Scopes: " + auth.JoinScopes(auth.AllScopes()) + " (admin: every scope in every tenant).",
		Example: "  KEY=$(./bin/executor apikeys create --tenant acme --scopes runs:read,runs:write,hierarchies:read,hierarchies:write)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			svc, err := load()
			if err != nil {
				return err
			}
			return apikeysCreate(cmd.Context(), svc, tenant, scopes, expires, description, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	create.Flags().StringVar(&tenant, "tenant", "", "tenant the key acts for (required)")
	create.Flags().StringVar(&scopes, "scopes", "", "comma-separated scopes (required): "+auth.JoinScopes(auth.AllScopes()))
	create.Flags().StringVar(&expires, "expires", "", "lifetime: a Go duration (720h) or days (90d); empty: never expires")
	create.Flags().StringVar(&description, "description", "", "what the key is for, shown by list")

	var listTenant string
	list := &cobra.Command{
		Use:   "list [--tenant NAME]",
		Short: "List keys: id, prefix, tenant, scopes, dates and state; never the key nor its hash",
		Long: "List API keys, newest first: id, prefix (the key's first characters), tenant,\n" +
			"scopes, creation and expiry times and state. Neither keys nor hashes are shown.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			svc, err := load()
			if err != nil {
				return err
			}
			return apikeysList(cmd.Context(), svc, listTenant, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	list.Flags().StringVar(&listTenant, "tenant", "", "list this tenant's keys only (default: every tenant's)")

	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke the key with an id, at once and for good",
		Long: "Revoke the API key with ID (as list shows it): requests made with it are refused\n" +
			"from now on. Revoking cannot be undone; revoking twice keeps the first time.",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("apikeys revoke: exactly one key id is required")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			svc, err := load()
			if err != nil {
				return err
			}
			return apikeysRevoke(cmd.Context(), svc, args[0], cmd.ErrOrStderr())
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func apikeysCreate(ctx context.Context, svc service, tenant, scopes, expires, description string, stdout, stderr io.Writer) error {
	if strings.TrimSpace(scopes) == "" {
		return fmt.Errorf("apikeys create: --scopes is required (known: %s)", auth.JoinScopes(auth.AllScopes()))
	}
	sc, err := auth.ParseScopes(scopes)
	if err != nil {
		return fmt.Errorf("apikeys create: --scopes: %w", err)
	}
	var ttl time.Duration
	if expires != "" {
		if ttl, err = auth.ParseTTL(expires); err != nil {
			return fmt.Errorf("apikeys create: --expires: %w", err)
		}
	}
	if err := store.CheckTenant(tenant); err != nil {
		return fmt.Errorf("apikeys create: --%w", err)
	}

	st, err := openKeyStore(ctx, svc.cfg, svc.log)
	if err != nil {
		return err
	}
	defer st.Close()
	key, rec, err := st.IssueAPIKey(ctx, tenant, sc, ttl, description)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, key)
	until := "never expires"
	if rec.ExpiresAt != nil {
		until = "expires " + rec.ExpiresAt.Format(time.RFC3339)
	}
	fmt.Fprintf(stderr, "created API key %s (%s...) for tenant %s with scopes %s; it %s.\nThe key is shown only this once: store it now.\n",
		rec.ID, rec.Prefix, rec.Tenant, auth.JoinScopes(sc), until)
	return nil
}

func apikeysList(ctx context.Context, svc service, tenant string, stdout, stderr io.Writer) error {
	st, err := openKeyStore(ctx, svc.cfg, svc.log)
	if err != nil {
		return err
	}
	defer st.Close()
	keys, err := st.ListAPIKeys(ctx, strings.TrimSpace(tenant))
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		fmt.Fprintln(stderr, "no API keys")
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPREFIX\tTENANT\tSCOPES\tCREATED\tEXPIRES\tSTATE\tDESCRIPTION")
	for _, k := range keys {
		expires, state := "never", "active"
		if k.ExpiresAt != nil {
			expires = k.ExpiresAt.Format(time.RFC3339)
			if !now.Before(*k.ExpiresAt) {
				state = "expired"
			}
		}
		if k.RevokedAt != nil {
			state = "revoked " + k.RevokedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Prefix, k.Tenant, strings.Join(k.Scopes, ","),
			k.CreatedAt.Format(time.RFC3339), expires, state, oneLine(k.Description))
	}
	return tw.Flush()
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func apikeysRevoke(ctx context.Context, svc service, id string, stderr io.Writer) error {
	st, err := openKeyStore(ctx, svc.cfg, svc.log)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.RevokeAPIKey(ctx, id); err != nil {
		if errors.Is(err, store.ErrAPIKeyNotFound) {
			return fmt.Errorf("apikeys revoke: no API key with id %q", id)
		}
		return err
	}
	fmt.Fprintf(stderr, "revoked API key %s\n", id)
	return nil
}

// openKeyStore opens and migrates the database `executor serve` uses.
func openKeyStore(ctx context.Context, cfg config.Config, log *slog.Logger) (*store.Store, error) {
	st, err := store.Open(cfg.DatabaseURL, cfg.SQLitePath(), dbPool(cfg))
	if err != nil {
		return nil, err
	}
	if _, err := st.Migrate(ctx, log); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}
