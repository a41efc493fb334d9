package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/op-stack/executor/client"
	"github.com/op-stack/executor/models"
)

// approver asks the person at the terminal to decide a followed run's
// approval gates (runs start --follow --interactive): approve, approve with
// an edited instruction or arguments, reject with a comment, or leave the
// gate open for someone else. Prompts go to standard error, so standard
// output stays the run's stream.
type approver struct {
	c      *client.Client
	run    string
	out    io.Writer // the prompts
	lines  <-chan string
	closed bool // standard input has ended: no more prompts
}

// newApprover reads answers from in, a line at a time, in a goroutine of
// its own so that an interrupt is not held up by a blocked read.
func newApprover(c *client.Client, run string, in io.Reader, out io.Writer) *approver {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return &approver{c: c, run: run, out: out, lines: lines}
}

// errInputEnded says standard input ended in the middle of a decision.
var errInputEnded = errors.New("standard input ended")

// ask prints prompt and returns the next line, trimmed.
func (a *approver) ask(ctx context.Context, prompt string) (string, error) {
	fmt.Fprint(a.out, prompt)
	select {
	case <-ctx.Done():
		fmt.Fprintln(a.out)
		return "", ctx.Err()
	case line, ok := <-a.lines:
		if !ok {
			fmt.Fprintln(a.out)
			a.closed = true
			return "", errInputEnded
		}
		return strings.TrimSpace(line), nil
	}
}

// onEvent decides the gate an approval.requested event opened, if it is
// still open (a replayed or copied event's gate has long been resolved, and
// someone else may have decided it meanwhile).
func (a *approver) onEvent(ctx context.Context, ev models.Event) error {
	if a.closed || ev.Event.Category != models.CategoryApproval || ev.Event.Action != models.ActionRequested {
		return nil
	}
	id := str(ev.Data, "approval_id")
	open, err := a.c.ListApprovals(ctx, a.run)
	if err != nil {
		fmt.Fprintf(a.out, "could not list the run's approvals (%v); decide %s with executor runs approve|reject\n", err, id)
		return nil
	}
	for _, g := range open.Approvals {
		if g.ApprovalID == id {
			return a.decide(ctx, g)
		}
	}
	return nil
}

// decide prompts for one gate until a decision is accepted or skipped.
func (a *approver) decide(ctx context.Context, g client.Approval) error {
	what := "start its turn: " + g.Instruction
	if g.Kind == models.ApprovalKindTool {
		what = "call " + gateWhat(g)
	}
	fmt.Fprintf(a.out, "approval %s: %s wants to %s\n", g.ApprovalID, agentLabel(g), oneLine(what))
	edit := "edit the instruction"
	if g.Kind == models.ApprovalKindTool {
		edit = "edit the arguments"
	}
	for {
		choice, err := a.ask(ctx, fmt.Sprintf("[a]pprove, [e] %s and approve, [r]eject, [s]kip (leave it open)? ", edit))
		if err != nil {
			return a.stop(err, g)
		}
		d := client.Decision{RunID: a.run, ApprovalID: g.ApprovalID}
		var res client.Resolved
		switch strings.ToLower(choice) {
		case "a", "approve", "y", "yes":
			res, err = a.c.Approve(ctx, d)
		case "e", "edit":
			if g.Kind == models.ApprovalKindTool {
				args, aerr := a.ask(ctx, fmt.Sprintf("arguments as a JSON object (now %s): ", g.Arguments))
				if aerr != nil {
					return a.stop(aerr, g)
				}
				if !json.Valid([]byte(args)) {
					fmt.Fprintf(a.out, "not valid JSON: %s\n", args)
					continue
				}
				d.Arguments = json.RawMessage(args)
			} else {
				text, aerr := a.ask(ctx, "new instruction: ")
				if aerr != nil {
					return a.stop(aerr, g)
				}
				if text == "" {
					fmt.Fprintln(a.out, "an empty instruction; nothing sent")
					continue
				}
				d.Instruction = &text
			}
			res, err = a.c.Approve(ctx, d)
		case "r", "reject", "n", "no":
			comment, cerr := a.ask(ctx, "comment (the supervisor is told why): ")
			if cerr != nil {
				return a.stop(cerr, g)
			}
			if comment == "" {
				fmt.Fprintln(a.out, "a rejection needs a comment")
				continue
			}
			res, err = a.c.Reject(ctx, a.run, g.ApprovalID, comment)
		case "s", "skip":
			fmt.Fprintf(a.out, "left %s open: executor runs approve|reject %s %s\n", g.ApprovalID, a.run, g.ApprovalID)
			return nil
		default:
			fmt.Fprintf(a.out, "answer a, e, r or s\n")
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var apiErr *client.APIError
			if errors.As(err, &apiErr) && apiErr.Status/100 == 4 && apiErr.Status != 409 {
				// A refused edit (e.g. arguments that are not an object):
				// say why and ask again.
				fmt.Fprintf(a.out, "refused: %v\n", err)
				continue
			}
			// Decided elsewhere meanwhile (409), or the API is unreachable:
			// say so and keep following.
			fmt.Fprintf(a.out, "could not decide %s: %v\n", g.ApprovalID, err)
			return nil
		}
		fmt.Fprintf(a.out, "%s %s\n", res.Approval.ApprovalID, res.Approval.Decision)
		return nil
	}
}

// stop handles a prompt that got no answer: an interrupt ends the follow;
// the end of standard input leaves the gate open and stops prompting.
func (a *approver) stop(err error, g client.Approval) error {
	if errors.Is(err, errInputEnded) {
		fmt.Fprintf(a.out, "no more input: left %s open (executor runs approve|reject %s %s); following on\n", g.ApprovalID, a.run, g.ApprovalID)
		return nil
	}
	return err
}
