package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/op-stack/executor/client"
	"github.com/op-stack/executor/models"
)

// newWebhooksCommand is `executor webhooks`: a client of the API's webhook
// routes (docs/webhooks.md).
func newWebhooksCommand() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{
		Use:     "webhooks",
		Aliases: []string{"webhook"},
		Short:   "Create, show, list, update and delete webhook endpoints; list and resend deliveries",
		Long: `Manage the tenant's webhook endpoints (docs/webhooks.md): URLs that receive
its runs' lifecycle events (` + strings.Join(models.WebhookEventTypes(), ", ") + `),
signed as Standard Webhooks. An endpoint's secret is printed once, by
create (and update --rotate-secret).` + clientLong,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return groupRun(cmd, args) },
	}
	af.register(cmd)

	var url, description string
	var events []string
	create := &cobra.Command{
		Use:   "create --url URL [--event TYPE]... [--description TEXT]",
		Short: "Register an endpoint; prints its id, and its secret once",
		Long: `Register a webhook endpoint in the tenant. The id is printed on standard
output, the signing secret (whsec_...) on the next line: keep it, it is not
shown again. Without --event, the endpoint gets every event type.` + clientLong,
		Example: `  ./bin/executor webhooks create --url https://example.com/hooks --event run.completed --event run.failed`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			if url == "" {
				return errors.New("webhooks create: --url is required")
			}
			in := client.WebhookEndpointInput{URL: url, Description: description, Events: events}
			if len(in.Events) == 0 {
				in.Events = models.WebhookEventTypes()
			}
			ep, err := c.CreateWebhook(cmd.Context(), in)
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), ep)
			}
			fmt.Fprintln(cmd.OutOrStdout(), ep.ID)
			fmt.Fprintln(cmd.OutOrStdout(), ep.Secret)
			fmt.Fprintln(cmd.ErrOrStderr(), "created webhook endpoint; the second line is its signing secret, shown only now")
			return nil
		},
	}
	create.Flags().StringVar(&url, "url", "", "the endpoint's URL (http or https)")
	create.Flags().StringVar(&description, "description", "", "a note for people")
	create.Flags().StringArrayVar(&events, "event", nil, "an event type to receive (repeatable; default: all)")

	get := &cobra.Command{
		Use:   "get ID",
		Short: "Show an endpoint (never its secret)",
		Args:  exactArgs("webhook endpoint's id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			ep, err := c.GetWebhook(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), ep)
			}
			printWebhook(cmd.OutOrStdout(), ep)
			return nil
		},
	}

	list := &cobra.Command{
		Use:   "list",
		Short: "List the tenant's endpoints",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			l, err := c.ListWebhooks(cmd.Context())
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), l)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tURL\tEVENTS\tENABLED")
			for _, ep := range l.Items {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%t\n", ep.ID, clip(ep.URL, 60), strings.Join(ep.Events, ","), ep.Enabled)
			}
			tw.Flush()
			fmt.Fprintf(cmd.ErrOrStderr(), "%d webhook endpoints\n", l.Total)
			return nil
		},
	}

	var uURL, uDescription string
	var uEvents []string
	var enable, disable, rotate bool
	update := &cobra.Command{
		Use:   "update ID [--url URL] [--event TYPE]... [--enable|--disable] [--rotate-secret]",
		Short: "Change an endpoint: only the flags given change",
		Long: `Change an endpoint: it is read first and only the flags given change it
(--event, when given, replaces the list). --rotate-secret makes a new
secret, printed once; the old one stops working at once.` + clientLong,
		Args: exactArgs("webhook endpoint's id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			if enable && disable {
				return errors.New("webhooks update: --enable and --disable exclude each other")
			}
			cur, err := c.GetWebhook(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			in := client.WebhookEndpointInput{ID: cur.ID, URL: cur.URL, Description: cur.Description, Events: cur.Events, RotateSecret: rotate}
			changed := cmd.Flags().Changed
			if changed("url") {
				in.URL = uURL
			}
			if changed("description") {
				in.Description = uDescription
			}
			if changed("event") {
				in.Events = uEvents
			}
			if enable || disable {
				on := enable
				in.Enabled = &on
			}
			ep, err := c.UpdateWebhook(cmd.Context(), in)
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), ep)
			}
			printWebhook(cmd.OutOrStdout(), ep)
			if ep.Secret != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "new secret  %s  (shown only now)\n", ep.Secret)
			}
			return nil
		},
	}
	update.Flags().StringVar(&uURL, "url", "", "the endpoint's new URL")
	update.Flags().StringVar(&uDescription, "description", "", "a new note")
	update.Flags().StringArrayVar(&uEvents, "event", nil, "an event type to receive (repeatable; replaces the list)")
	update.Flags().BoolVar(&enable, "enable", false, "send deliveries again")
	update.Flags().BoolVar(&disable, "disable", false, "stop sending deliveries")
	update.Flags().BoolVar(&rotate, "rotate-secret", false, "make a new signing secret and print it once")

	del := &cobra.Command{
		Use:   "delete ID",
		Short: "Delete an endpoint and its deliveries",
		Args:  exactArgs("webhook endpoint's id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			if err := c.DeleteWebhook(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s deleted\n", args[0])
			return nil
		},
	}

	var f client.WebhookDeliveryFilter
	deliveries := &cobra.Command{
		Use:   "deliveries [--endpoint ID] [--run ID] [--status pending|delivered|failed]",
		Short: "List deliveries, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			l, err := c.WebhookDeliveries(cmd.Context(), f)
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), l)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tRUN\tSEQ\tEVENT\tSTATUS\tATTEMPTS\tLAST ERROR\tCREATED")
			for _, d := range l.Items {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\n", d.ID, d.RunID, d.Sequence, d.EventType, d.Status, d.Attempts,
					clip(d.LastError, 50), d.CreatedAt.Local().Format(time.DateTime))
			}
			tw.Flush()
			fmt.Fprintf(cmd.ErrOrStderr(), "%d deliveries\n", l.Total)
			return nil
		},
	}
	deliveries.Flags().StringVar(&f.EndpointID, "endpoint", "", "an endpoint's id")
	deliveries.Flags().StringVar(&f.RunID, "run", "", "a run's id")
	deliveries.Flags().StringVar(&f.Status, "status", "", "pending, delivered or failed")
	deliveries.Flags().IntVar(&f.Limit, "limit", 0, "most deliveries to list (default 100, at most 1000)")

	redeliver := &cobra.Command{
		Use:   "redeliver DELIVERY_ID",
		Short: "Send a delivery again (same webhook-id and body)",
		Args:  exactArgs("delivery's id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			d, err := c.RedeliverWebhook(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), d)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", d.ID, d.Status)
			return nil
		},
	}

	cmd.AddCommand(create, get, list, update, del, deliveries, redeliver)
	return cmd
}

func printWebhook(w io.Writer, ep client.WebhookEndpoint) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "id\t%s\n", ep.ID)
	fmt.Fprintf(tw, "url\t%s\n", ep.URL)
	fmt.Fprintf(tw, "events\t%s\n", strings.Join(ep.Events, ", "))
	fmt.Fprintf(tw, "enabled\t%t\n", ep.Enabled)
	if ep.Description != "" {
		fmt.Fprintf(tw, "description\t%s\n", ep.Description)
	}
	fmt.Fprintf(tw, "created\t%s\n", ep.CreatedAt.Local().Format(time.DateTime))
	fmt.Fprintf(tw, "updated\t%s\n", ep.UpdatedAt.Local().Format(time.DateTime))
	tw.Flush()
}
