package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/op-stack/executor/client"
)

// mcpFlags are the fields of an MCP server that create and update take as
// flags; only the flags given change the body.
type mcpFlags struct {
	file             string
	name, url        string
	bearerTokenEnv   string
	bearerTokenStdin bool
	headerEnv        []string
	allowedTools     []string
	timeout          time.Duration
	approval         string
}

func (f *mcpFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVarP(&f.file, "file", "f", "", "the server's whole JSON body (the body of mcp-servers/create; - for standard input); flags given too override its fields")
	fl.StringVar(&f.name, "name", "", "the server's name: how agents name its tools, mcp:<name>/<tool>")
	fl.StringVar(&f.url, "url", "", "the server's Streamable HTTP endpoint (http or https)")
	fl.StringVar(&f.bearerTokenEnv, "bearer-token-env", "", "the workers' environment variable that holds the bearer token")
	fl.BoolVar(&f.bearerTokenStdin, "bearer-token-stdin", false, "read an inline bearer token from standard input (stored encrypted; needs MCP_SECRET_KEY on the service)")
	fl.StringArrayVar(&f.headerEnv, "header-env", nil, "HEADER=ENV: send HEADER with the value of the workers' environment variable ENV (repeatable)")
	fl.StringArrayVar(&f.allowedTools, "allowed-tool", nil, "a tool agents may use (repeatable; default: every tool the server offers)")
	fl.DurationVar(&f.timeout, "timeout", 0, "per-call timeout, e.g. 30s (default 60s, at most 1h)")
	fl.StringVar(&f.approval, "approval", "", "which tool calls wait for a human's approval: none, destructive or not_read_only")
}

// apply reads the file (when given) into in, then the flags given on cmd.
func (f *mcpFlags) apply(cmd *cobra.Command, in *client.MCPServerInput) error {
	if f.file != "" {
		var raw []byte
		var err error
		if f.file == "-" {
			if f.bearerTokenStdin {
				return errors.New("-f - and --bearer-token-stdin both read standard input; put bearer_token in the file instead")
			}
			raw, err = io.ReadAll(cmd.InOrStdin())
		} else {
			raw, err = os.ReadFile(f.file)
		}
		if err != nil {
			return err
		}
		id := in.ID
		*in = client.MCPServerInput{}
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(in); err != nil {
			return fmt.Errorf("%s is not an MCP server's JSON body: %w", f.file, err)
		}
		if id != "" {
			in.ID = id
		}
	}
	changed := cmd.Flags().Changed
	if changed("name") {
		in.Name = f.name
	}
	if changed("url") {
		in.URL, in.Command = f.url, nil
	}
	if changed("bearer-token-env") {
		in.BearerTokenEnv = f.bearerTokenEnv
		if f.bearerTokenEnv != "" && in.BearerToken != nil {
			empty := ""
			in.BearerToken = &empty // the token now comes from the environment
		}
	}
	if f.bearerTokenStdin {
		raw, err := io.ReadAll(cmd.InOrStdin())
		if err != nil {
			return err
		}
		token := strings.TrimSpace(string(raw))
		if token == "" {
			return errors.New("--bearer-token-stdin: standard input is empty")
		}
		in.BearerToken, in.BearerTokenEnv = &token, ""
	}
	if changed("header-env") {
		in.HeaderEnv = map[string]string{}
		for _, kv := range f.headerEnv {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || strings.TrimSpace(k) == "" || strings.TrimSpace(v) == "" {
				return fmt.Errorf("--header-env: want HEADER=ENV, got %q", kv)
			}
			in.HeaderEnv[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	if changed("allowed-tool") {
		in.AllowedTools = f.allowedTools
	}
	if changed("timeout") {
		in.TimeoutSeconds = f.timeout.Seconds()
	}
	if changed("approval") {
		in.Approval = f.approval
	}
	return nil
}

// mcpRef reads a command's argument as a server's id (mcp_<uuid>) or name.
func mcpRef(arg string) client.MCPServerRef {
	arg = strings.TrimSpace(arg)
	if rest, ok := strings.CutPrefix(arg, "mcp_"); ok {
		if _, err := uuid.Parse(rest); err == nil {
			return client.MCPServerRef{ID: arg}
		}
	}
	return client.MCPServerRef{Name: arg}
}

func newMCPServersCommand() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{
		Use:     "mcp-servers",
		Aliases: []string{"mcp-server", "mcp"},
		Short:   "Create, show, list, update and delete MCP servers through the API",
		Long: `Create, show, list, update and delete the tenant's MCP servers (docs/mcp.md):
Model Context Protocol servers whose tools agents list as
mcp:<server>/<tool>. Secrets go in and never come out: the commands show
which are set (secrets_set), never a value.` + clientLong,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return groupRun(cmd, args) },
	}
	af.register(cmd)

	var cf mcpFlags
	create := &cobra.Command{
		Use:   "create --name NAME --url URL [flags] | -f FILE",
		Short: "Add an MCP server and print its id",
		Long: `Add an MCP server to the tenant, from flags or from its whole JSON body
(the body of POST /api/executor/v1/mcp-servers/create) read from FILE, or
from standard input with -f -; flags given with -f override the file's
fields. The new server's id is printed alone on standard output; a refused
body is reported with the field at fault.

Give the server's credentials as the names of the workers' environment
variables (--bearer-token-env, --header-env), or inline with
--bearer-token-stdin or in the file (bearer_token, headers), which the
service stores encrypted and needs MCP_SECRET_KEY for. No command prints
a secret's value.` + clientLong,
		Example: `  ./bin/executor mcp-servers create --name docs --url https://mcp.example.com/mcp \
      --bearer-token-env DOCS_MCP_TOKEN --allowed-tool search --allowed-tool fetch --timeout 30s
  printf %s "$TOKEN" | ./bin/executor mcp-servers create --name docs --url https://mcp.example.com/mcp --bearer-token-stdin
  ./bin/executor mcp-servers create -f docs-server.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			if cf.file == "" && (!cmd.Flags().Changed("name") || !cmd.Flags().Changed("url")) {
				return errors.New("mcp-servers create: --name and --url are required (or -f FILE with the whole body)")
			}
			var in client.MCPServerInput
			if err := cf.apply(cmd, &in); err != nil {
				return fmt.Errorf("mcp-servers create: %w", err)
			}
			m, err := c.CreateMCPServer(cmd.Context(), in)
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), m)
			}
			fmt.Fprintln(cmd.OutOrStdout(), m.ID)
			fmt.Fprintf(cmd.ErrOrStderr(), "created MCP server %s; agents list its tools as mcp:%s/<tool>\n", m.Name, m.Name)
			printMCPWarnings(cmd.ErrOrStderr(), m)
			return nil
		},
	}
	cf.register(create)

	get := &cobra.Command{
		Use:   "get ID|NAME",
		Short: "Show an MCP server (which secrets are set, never their values)",
		Long:  "Show one of the tenant's MCP servers, named by its id (mcp_...) or its name; -o json prints it as the API returns it." + clientLong,
		Args:  exactArgs("MCP server's id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			m, err := c.GetMCPServer(cmd.Context(), mcpRef(args[0]))
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), m)
			}
			printMCPServer(cmd.OutOrStdout(), m)
			return nil
		},
	}

	list := &cobra.Command{
		Use:   "list",
		Short: "List the tenant's MCP servers",
		Long:  "List the tenant's MCP servers by name: id, name, endpoint, allowed tools and which secrets are set." + clientLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			l, err := c.ListMCPServers(cmd.Context())
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), l)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tENDPOINT\tTOOLS\tSECRETS\tAPPROVAL")
			for _, m := range l.Items {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.Name, clip(mcpEndpoint(m), 60), listOr(m.AllowedTools, "all"),
					listOr(mcpCredentials(m), "-"), m.Approval)
			}
			tw.Flush()
			fmt.Fprintf(cmd.ErrOrStderr(), "%d MCP servers\n", l.Total)
			return nil
		},
	}

	var uf mcpFlags
	update := &cobra.Command{
		Use:   "update ID|NAME [flags] | -f FILE",
		Short: "Change an MCP server: only the fields given change",
		Long: `Change one of the tenant's MCP servers, named by its id or name. Without -f
the server is read first and only the flags given change it (--header-env
and --allowed-tool, when given, replace the whole list); with -f FILE the
file's body replaces the server's, and flags given override its fields.
Stored secrets are kept unless the body or --bearer-token-stdin gives new
ones.` + clientLong,
		Example: `  ./bin/executor mcp-servers update docs --url https://mcp.example.com/v2 --allowed-tool search`,
		Args:    exactArgs("MCP server's id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			cur, err := c.GetMCPServer(cmd.Context(), mcpRef(args[0]))
			if err != nil {
				return err
			}
			in := client.MCPServerInput{ID: cur.ID, Name: cur.Name, URL: cur.URL, Command: cur.Command,
				HeaderEnv: cur.HeaderEnv, BearerTokenEnv: cur.BearerTokenEnv, AllowedTools: cur.AllowedTools,
				TimeoutSeconds: cur.TimeoutSeconds, Approval: cur.Approval}
			if uf.bearerTokenEnv != "" && slices.Contains(cur.SecretsSet, "authorization") {
				empty := ""
				in.BearerToken = &empty // the token now comes from the environment
			}
			if err := uf.apply(cmd, &in); err != nil {
				return fmt.Errorf("mcp-servers update: %w", err)
			}
			m, err := c.UpdateMCPServer(cmd.Context(), in)
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), m)
			}
			printMCPServer(cmd.OutOrStdout(), m)
			printMCPWarnings(cmd.ErrOrStderr(), m)
			return nil
		},
	}
	uf.register(update)

	del := &cobra.Command{
		Use:   "delete ID|NAME",
		Short: "Delete an MCP server",
		Long: `Delete one of the tenant's MCP servers, named by its id or name, with its
stored secrets. Hierarchies that list its tools keep their keys; runs that
start afterwards no longer find the server.` + clientLong,
		Args: exactArgs("MCP server's id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			d, err := c.DeleteMCPServer(cmd.Context(), mcpRef(args[0]))
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), d)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s deleted\n", d.ID, d.Name)
			return nil
		},
	}

	cmd.AddCommand(create, get, list, update, del)
	return cmd
}

// printMCPServer prints a server for people: secrets by name only.
// printMCPWarnings prints create's and update's warnings (a server saved
// but not answering), one a line: the command still succeeds.
func printMCPWarnings(w io.Writer, m client.MCPServer) {
	for _, warn := range m.Warnings {
		fmt.Fprintf(w, "warning: %s: %s\n", warn.Code, warn.Message)
	}
}

func printMCPServer(w io.Writer, m client.MCPServer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "id\t%s\n", m.ID)
	fmt.Fprintf(tw, "name\t%s  (agents: mcp:%s/<tool>)\n", m.Name, m.Name)
	fmt.Fprintf(tw, "endpoint\t%s\n", mcpEndpoint(m))
	if m.BearerTokenEnv != "" {
		fmt.Fprintf(tw, "bearer token\tfrom $%s\n", m.BearerTokenEnv)
	}
	for _, k := range sortedKeys(m.HeaderEnv) {
		fmt.Fprintf(tw, "header %s\tfrom $%s\n", k, m.HeaderEnv[k])
	}
	fmt.Fprintf(tw, "secrets set\t%s\n", listOr(m.SecretsSet, "none"))
	fmt.Fprintf(tw, "allowed tools\t%s\n", listOr(m.AllowedTools, "all the server offers"))
	timeout := "60s (default)"
	if m.TimeoutSeconds > 0 {
		timeout = (time.Duration(m.TimeoutSeconds * float64(time.Second))).String()
	}
	fmt.Fprintf(tw, "timeout\t%s\n", timeout)
	fmt.Fprintf(tw, "approval\t%s\n", m.Approval)
	fmt.Fprintf(tw, "created\t%s\n", m.CreatedAt.Local().Format(time.DateTime))
	fmt.Fprintf(tw, "updated\t%s\n", m.UpdatedAt.Local().Format(time.DateTime))
	tw.Flush()
}

// mcpEndpoint is a server's URL, or its stdio command line.
func mcpEndpoint(m client.MCPServer) string {
	if m.URL != "" {
		return m.URL
	}
	return "stdio: " + strings.Join(m.Command, " ")
}

// mcpCredentials names where a server's credentials come from, never
// their values: $ENV for an environment variable, the name of an inline
// secret otherwise.
func mcpCredentials(m client.MCPServer) []string {
	var out []string
	if m.BearerTokenEnv != "" {
		out = append(out, "bearer $"+m.BearerTokenEnv)
	}
	for _, k := range sortedKeys(m.HeaderEnv) {
		out = append(out, k+" $"+m.HeaderEnv[k])
	}
	return append(out, m.SecretsSet...)
}

func listOr(s []string, none string) string {
	if len(s) == 0 {
		return none
	}
	return strings.Join(s, ",")
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
