package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/op-stack/executor/client"
	"github.com/op-stack/executor/models"
)

// researchHierarchy is a hierarchies/create body (docs/hierarchies.md): a
// global supervisor over a research team and a writing team.
const researchHierarchy = `{
  "name": "research",
  "global_supervisor_agent": {"system_prompt": "You lead a small research group."},
  "teams": [
    {"name": "research", "workers": [{"name": "searcher", "system_prompt": "You find sources."}]},
    {"name": "writing", "workers": [{"name": "writer", "system_prompt": "You write the report."}]}
  ]
}`

// gatedHierarchy is researchHierarchy with the writer's turns waiting for
// a person's approval.
const gatedHierarchy = `{
  "name": "research, approved",
  "global_supervisor_agent": {"system_prompt": "You lead a small research group."},
  "teams": [
    {"name": "research", "workers": [{"name": "searcher", "system_prompt": "You find sources."}]},
    {"name": "writing", "workers": [{"name": "writer", "system_prompt": "You write the report.", "requires_approval": true}]}
  ]
}`

// Create a hierarchy from its JSON body and read it back.
func ExampleClient_CreateHierarchy() {
	ctx := context.Background()
	c, err := client.New(baseURL, "", nil) // the API key, when access control is on
	if err != nil {
		log.Fatal(err)
	}
	id, err := c.CreateHierarchy(ctx, json.RawMessage(researchHierarchy))
	if err != nil {
		log.Fatal(err) // a refused body is an *client.APIError naming the field
	}
	raw, err := c.GetHierarchy(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	var h models.Hierarchy
	if err := json.Unmarshal(raw, &h); err != nil {
		log.Fatal(err)
	}
	fmt.Println(h.Name)
	for _, t := range h.Teams {
		fmt.Println("team", t.Name, "with", len(t.Workers), "worker(s)")
	}
	// Output:
	// research
	// team research with 1 worker(s)
	// team writing with 1 worker(s)
}

// Start a run; it starts pending, as the first run of a thread of its own.
func ExampleClient_StartRun() {
	ctx := context.Background()
	c, err := client.New(baseURL, "", nil)
	if err != nil {
		log.Fatal(err)
	}
	h, err := c.CreateHierarchy(ctx, json.RawMessage(researchHierarchy))
	if err != nil {
		log.Fatal(err)
	}
	run, err := c.StartRun(ctx, client.StartRequest{HierarchyID: h, Task: "Explain quantum tunnelling"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(run.Status, run.ThreadID == run.ID)
	// Output: pending true
}

// Follow a run's events until it ends: a dropped connection is resumed
// where it stopped, and the terminal event is returned.
func ExampleClient_Follow() {
	ctx := context.Background()
	c, err := client.New(baseURL, "", nil)
	if err != nil {
		log.Fatal(err)
	}
	h, err := c.CreateHierarchy(ctx, json.RawMessage(researchHierarchy))
	if err != nil {
		log.Fatal(err)
	}
	run, err := c.StartRun(ctx, client.StartRequest{HierarchyID: h, Task: "Explain quantum tunnelling"})
	if err != nil {
		log.Fatal(err)
	}
	end, err := c.Follow(ctx, run.ID, client.FollowOptions{}, func(ev models.Event) error {
		// Every event once, in sequence order: here, the global
		// supervisor's dispatches.
		if ev.Event.String() == "dispatch.team" {
			fmt.Println("dispatch", ev.Data["team_name"])
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(end.Event)
	// Output:
	// dispatch research
	// dispatch writing
	// lifecycle.completed
}

// Decide approval gates as they open: here the writer's turn is approved
// with an edited instruction. (ListApprovals lists the open gates of a run
// at any time; Reject refuses one with a comment.)
func ExampleClient_Approve() {
	ctx := context.Background()
	c, err := client.New(baseURL, "", nil)
	if err != nil {
		log.Fatal(err)
	}
	h, err := c.CreateHierarchy(ctx, json.RawMessage(gatedHierarchy))
	if err != nil {
		log.Fatal(err)
	}
	run, err := c.StartRun(ctx, client.StartRequest{HierarchyID: h, Task: "Explain quantum tunnelling"})
	if err != nil {
		log.Fatal(err)
	}
	end, err := c.Follow(ctx, run.ID, client.FollowOptions{}, func(ev models.Event) error {
		if ev.Event.String() != "approval.requested" {
			return nil
		}
		open, err := c.ListApprovals(ctx, run.ID)
		if err != nil {
			return err
		}
		for _, gate := range open.Approvals {
			fmt.Printf("%s wants to start its turn (%s gate); run is %s\n", gate.AgentName, gate.Kind, open.Status)
			shorter := "Write the report in three sentences."
			res, err := c.Approve(ctx, client.Decision{RunID: run.ID, ApprovalID: gate.ApprovalID, Instruction: &shorter, Comment: "keep it short"})
			if err != nil {
				return err
			}
			fmt.Println(res.Approval.Decision)
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(end.Event)
	// Output:
	// writer wants to start its turn (agent gate); run is waiting_approval
	// approved
	// lifecycle.completed
}

// Fork a finished run: a new run from the state it had after the research
// team's turn, with another instruction for the writing team. The
// original is untouched; the fork joins its thread.
func ExampleClient_ForkRun() {
	ctx := context.Background()
	c, err := client.New(baseURL, "", nil)
	if err != nil {
		log.Fatal(err)
	}
	h, err := c.CreateHierarchy(ctx, json.RawMessage(researchHierarchy))
	if err != nil {
		log.Fatal(err)
	}
	orig, err := c.StartRun(ctx, client.StartRequest{HierarchyID: h, Task: "Explain quantum tunnelling"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Follow(ctx, orig.ID, client.FollowOptions{}, func(models.Event) error { return nil }); err != nil {
		log.Fatal(err)
	}
	points, err := c.ForkPoints(ctx, orig.ID)
	if err != nil {
		log.Fatal(err)
	}
	var after client.ForkPoint
	for _, p := range points {
		if p.Kind == models.ForkAtTeamFinished && p.TeamName == "research" {
			after = p
		}
	}
	changes := &client.ForkChanges{}
	changes.NextTeam = "writing"
	changes.TeamInstructions = map[string]string{"writing": "Write it for children."}
	fork, err := c.ForkRun(ctx, client.ForkRequest{RunID: orig.ID, AfterSequence: after.Sequence, Changes: changes})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("forked after", fork.ForkPoint.Kind, "of", fork.ForkPoint.TeamName, "in turn", fork.ForkPoint.Turn)
	fmt.Println("same thread:", fork.ThreadID == orig.ThreadID, "from the original:", fork.ForkedFrom.RunID == orig.ID)
	end, err := c.Follow(ctx, fork.ID, client.FollowOptions{}, func(models.Event) error { return nil })
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(end.Event)
	// Output:
	// forked after team.finished of research in turn 1
	// same thread: true from the original: true
	// lifecycle.completed
}
