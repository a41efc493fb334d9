package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/store"
)

const apikeysUsage = `usage: executor apikeys <command> [flags]

Manage the API keys clients authenticate with (Authorization: Bearer osk_...).
Keys are stored as SHA-256 hashes in the service's database (DATABASE_URL, or
the SQLite file under DATA_DIR): a key is shown once, when it is created.

commands:
  create  create a key and print it alone on standard output
          (--tenant NAME --scopes LIST [--expires DURATION] [--description TEXT])
  list    list keys: id, prefix, tenant, scopes, dates and state; never the key
          nor its hash ([--tenant NAME])
  revoke  revoke the key with an id, at once and for good (ID)

Run 'executor apikeys <command> -h' for a command's flags.
`

// apikeys runs `executor apikeys ...` against cfg's database. Only a
// created key is written to stdout; messages go to stderr.
func apikeys(ctx context.Context, cfg config.Config, log *slog.Logger, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, apikeysUsage)
		if len(args) == 0 {
			return errors.New("apikeys: a command is required (create, list or revoke)")
		}
		return nil
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "create":
		return apikeysCreate(ctx, cfg, log, rest, stdout, stderr)
	case "list":
		return apikeysList(ctx, cfg, log, rest, stdout, stderr)
	case "revoke":
		return apikeysRevoke(ctx, cfg, log, rest, stderr)
	default:
		fmt.Fprint(stderr, apikeysUsage)
		return fmt.Errorf("apikeys: unknown command %q", cmd)
	}
}

// apikeysFlags is a flag set that prints its usage to stderr and whose -h
// is not an error.
func apikeysFlags(name, args, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("apikeys "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: executor apikeys %s %s\n\n%s\n", name, args, about)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args, reporting whether help was asked for.
func parseFlags(fs *flag.FlagSet, args []string) (help bool, err error) {
	err = fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return true, nil
	}
	return false, err
}

func apikeysCreate(ctx context.Context, cfg config.Config, log *slog.Logger, args []string, stdout, stderr io.Writer) error {
	fs := apikeysFlags("create", "--tenant NAME --scopes LIST [--expires DURATION] [--description TEXT]",
		"Create an API key for a tenant and print it, alone, on standard output. It is\n"+
			"not stored and cannot be shown again: only its SHA-256 hash is kept.\n"+
			"Scopes: "+auth.JoinScopes(auth.AllScopes())+" (admin: every scope in every tenant).", stderr)
	tenant := fs.String("tenant", "", "tenant the key acts for (required)")
	scopes := fs.String("scopes", "", "comma-separated scopes (required): "+auth.JoinScopes(auth.AllScopes()))
	expires := fs.String("expires", "", "lifetime: a Go duration (720h) or days (90d); empty: never expires")
	description := fs.String("description", "", "what the key is for, shown by list")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("apikeys create: unexpected argument %q", fs.Arg(0))
	}
	if strings.TrimSpace(*scopes) == "" {
		return fmt.Errorf("apikeys create: --scopes is required (known: %s)", auth.JoinScopes(auth.AllScopes()))
	}
	sc, err := auth.ParseScopes(*scopes)
	if err != nil {
		return fmt.Errorf("apikeys create: --scopes: %w", err)
	}
	var ttl time.Duration
	if *expires != "" {
		if ttl, err = auth.ParseTTL(*expires); err != nil {
			return fmt.Errorf("apikeys create: --expires: %w", err)
		}
	}
	if err := store.CheckTenant(*tenant); err != nil {
		return fmt.Errorf("apikeys create: --%w", err)
	}

	st, err := openKeyStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer st.Close()
	key, rec, err := st.IssueAPIKey(ctx, *tenant, sc, ttl, *description)
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

func apikeysList(ctx context.Context, cfg config.Config, log *slog.Logger, args []string, stdout, stderr io.Writer) error {
	fs := apikeysFlags("list", "[--tenant NAME]",
		"List API keys, newest first: id, prefix (the key's first characters), tenant,\n"+
			"scopes, creation and expiry times and state. Neither keys nor hashes are shown.", stderr)
	tenant := fs.String("tenant", "", "list this tenant's keys only (default: every tenant's)")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("apikeys list: unexpected argument %q", fs.Arg(0))
	}
	st, err := openKeyStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer st.Close()
	keys, err := st.ListAPIKeys(ctx, strings.TrimSpace(*tenant))
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

func apikeysRevoke(ctx context.Context, cfg config.Config, log *slog.Logger, args []string, stderr io.Writer) error {
	fs := apikeysFlags("revoke", "ID",
		"Revoke the API key with ID (as list shows it): requests made with it are refused\n"+
			"from now on. Revoking cannot be undone; revoking twice keeps the first time.", stderr)
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("apikeys revoke: exactly one key id is required")
	}
	id := fs.Arg(0)
	st, err := openKeyStore(ctx, cfg, log)
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
	st, err := store.Open(cfg.DatabaseURL, cfg.SQLitePath())
	if err != nil {
		return nil, err
	}
	if _, err := st.Migrate(ctx, log); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}
