package models

import (
	"fmt"
	"strings"
)

// Kinds of fork points (ForkPoint.Kind).
const (
	// ForkAtTeamDispatch is a dispatch.team event: the fork starts the
	// dispatched team's turn, without asking the global supervisor again.
	ForkAtTeamDispatch = "dispatch.team"
	// ForkAtWorkerDispatch is a dispatch.worker event: the fork carries on
	// with the team turn from there, running the dispatched worker first.
	ForkAtWorkerDispatch = "dispatch.worker"
	// ForkAtTeamFinished is the last event of a finished team turn (for a
	// failed or cancelled one, after its error and the warnings that skip
	// its dependants): the fork's next step is the global supervisor's
	// next decision.
	ForkAtTeamFinished = "team.finished"
)

// ForkedFrom names the run and the event a fork was started from.
type ForkedFrom struct {
	RunID    string `json:"run_id"`
	Sequence int64  `json:"sequence"`
}

// ForkPoint is a point of a finished run that runs/fork can start a fork
// from: right after the event Sequence.
type ForkPoint struct {
	Sequence   int64  `json:"sequence"`
	Kind       string `json:"kind"`
	Turn       int    `json:"turn"`
	TeamName   string `json:"team_name"`
	WorkerName string `json:"worker_name,omitempty"`
}

// PlannedDispatch is a team supervisor's dispatch a team turn makes
// without asking the supervisor: the one a fork copied (already counted
// and on the stream) or one a fork forces (changes.next_worker; Forced:
// it counts as an iteration and emits its dispatch.worker event).
type PlannedDispatch struct {
	Worker      string `json:"worker"`
	Instruction string `json:"instruction"`
	Forced      bool   `json:"forced,omitempty"`
}

// ForkTurn is the team turn a fork starts with: dispatched (and perhaps
// part done) in the original run, or forced (changes.next_team).
type ForkTurn struct {
	Turn        int    `json:"turn"`
	TeamName    string `json:"team_name"`
	Instruction string `json:"instruction"`
	// Iteration counts the team supervisor's decisions so far; Outputs
	// are the workers that finished, Dispatched their names.
	Iteration  int            `json:"iteration"`
	Outputs    []WorkerOutput `json:"outputs,omitempty"`
	Dispatched []string       `json:"dispatched,omitempty"`
	Warnings   []string       `json:"warnings,omitempty"`
	// Usage is the team supervisor's usage in the turn so far.
	Usage Usage `json:"usage"`
	// Planned are the dispatches the turn makes first, in order.
	Planned []PlannedDispatch `json:"planned,omitempty"`
	// Forced says the global supervisor's dispatch is the fork's own
	// (changes.next_team): the workflow emits its dispatch.team event and
	// counts the iteration.
	Forced bool `json:"forced,omitempty"`
}

// ForkSeed is a forked run's state right after the fork point, built from
// what the original run stored (events, result, usage): RunWorkflow starts
// from it rather than from the beginning (RunInput.Fork). Everything
// before the point is the original's, copied; the seed carries no event
// (the API copies them into the fork's stored log) and no answer text
// beyond the previews the original's result held.
type ForkSeed struct {
	From ForkedFrom `json:"from"`
	// Iteration is the global supervisor's iteration count, Turns the team
	// turns started.
	Iteration int          `json:"iteration"`
	Turns     int          `json:"turns"`
	Teams     []TeamOutput `json:"teams,omitempty"`
	Warnings  []string     `json:"warnings,omitempty"`
	Errors    []ErrorInfo  `json:"errors,omitempty"`
	// Usage is the run's usage outside Turn; TeamUsage and AgentUsage
	// its parts (for budgets), likewise.
	Usage      Usage            `json:"usage"`
	TeamUsage  map[string]Usage `json:"team_usage,omitempty"`
	AgentUsage map[string]Usage `json:"agent_usage,omitempty"`
	// Turn is the team turn the fork carries on with first; nil: the next
	// step is the global supervisor's decision.
	Turn *ForkTurn `json:"turn,omitempty"`
}

// ForkChanges is what a fork may change (runs/fork's changes).
type ForkChanges struct {
	// TeamInstructions replaces the instruction of the team turn the fork
	// starts with (dispatched at the fork point, or forced by NextTeam),
	// by team name.
	TeamInstructions map[string]string `json:"team_instructions,omitempty"`
	// Agents replace agents' system prompts and models, by agent_id.
	Agents []AgentChange `json:"agents,omitempty"`
	// NextTeam forces the global supervisor's next dispatch (at a
	// finished team turn); NextWorker the next team supervisor dispatch
	// of the turn the fork starts with.
	NextTeam   string `json:"next_team,omitempty"`
	NextWorker string `json:"next_worker,omitempty"`
}

// AgentChange replaces an agent's system prompt and/or model in a fork.
type AgentChange struct {
	AgentID      string  `json:"agent_id"`
	SystemPrompt *string `json:"system_prompt,omitempty"`
	Model        *string `json:"model,omitempty"`
}

// forkTurn is one team turn of the original run as its events show it.
type forkTurn struct {
	n        int    // 1-based, in dispatch.team order
	team     string // its team's name
	dispatch int64  // its dispatch.team event
	last     int64  // its last own event
	end      int64  // its last event as a finished turn (0: unfinished)
	output   *TeamOutput
	workers  []int64 // its dispatch.worker events
}

// ForkAnalysis is a finished run's fork points, from its events and
// stored result: runs/fork-points lists them and runs/fork builds its
// seed from the same analysis.
type ForkAnalysis struct {
	events []Event
	result *RunResult
	turns  []*forkTurn
	Points []ForkPoint
}

// AnalyzeFork finds the fork points of a run from its stored events (from
// sequence 1, gap-free) and its stored result (nil: none stored).
//
// Team turns are told apart by their events' team; a turn's output is the
// stored result's team output of the same turn number. A point is
// forkable only when no other team turn is at work at it (in runs whose
// teams work at once, a worker's dispatch while another team works is
// not); a worker dispatch after the turn's first needs the turn's stored
// output (its earlier workers' answers).
func AnalyzeFork(events []Event, result *RunResult) *ForkAnalysis {
	a := &ForkAnalysis{events: events, result: result, Points: []ForkPoint{}}
	if result == nil {
		result = &RunResult{}
	}
	outputs := map[int]*TeamOutput{}
	for i := range result.Teams {
		if t := &result.Teams[i]; t.Turn > 0 {
			outputs[t.Turn] = t
		}
	}
	open := map[string]*forkTurn{}
	for _, e := range events {
		if e.Event.Category == CategoryDispatch && e.Event.Action == ActionTeam && e.Source.AgentType == AgentTypeGlobalSupervisor {
			name, _ := e.Data["team_name"].(string)
			t := &forkTurn{n: len(a.turns) + 1, team: name, dispatch: e.Sequence, last: e.Sequence}
			t.output = outputs[t.n]
			a.turns = append(a.turns, t)
			open[name] = t
			continue
		}
		if e.Source.TeamName == nil {
			continue
		}
		t := open[*e.Source.TeamName]
		if t == nil {
			continue
		}
		t.last = e.Sequence
		if e.Event.Category == CategoryDispatch && e.Event.Action == ActionWorker {
			t.workers = append(t.workers, e.Sequence)
		}
	}
	for _, t := range a.turns {
		if t.output == nil || t.output.Status == "" {
			continue // the run ended in the middle of it
		}
		t.end = t.last
		idx := a.index(t.end)
		if t.output.Status == TeamFailed {
			// recordTeam's system.error for it, then the skips.
			for j := idx + 1; j < len(events); j++ {
				e := events[j]
				if e.Event.Category == CategorySystem && e.Event.Action == ActionError && e.Data["team_name"] == t.team {
					t.end, idx = e.Sequence, j
					break
				}
			}
		}
		if t.output.Status == TeamFailed || t.output.Status == TeamCancelled {
			for j := idx + 1; j < len(events) && isSkipWarning(events[j]); j++ {
				t.end = events[j].Sequence
			}
		}
	}
	for _, t := range a.turns {
		if a.alone(t, t.dispatch) {
			a.Points = append(a.Points, ForkPoint{Sequence: t.dispatch, Kind: ForkAtTeamDispatch, Turn: t.n, TeamName: t.team})
		}
		for i, seq := range t.workers {
			if !a.alone(t, seq) || (i > 0 && (t.output == nil || len(t.output.Workers) < i)) {
				continue
			}
			name, _ := events[a.index(seq)].Data["worker_name"].(string)
			a.Points = append(a.Points, ForkPoint{Sequence: seq, Kind: ForkAtWorkerDispatch, Turn: t.n, TeamName: t.team, WorkerName: name})
		}
		if t.end > 0 && a.alone(t, t.end) {
			a.Points = append(a.Points, ForkPoint{Sequence: t.end, Kind: ForkAtTeamFinished, Turn: t.n, TeamName: t.team})
		}
	}
	sortPoints(a.Points)
	return a
}

func isSkipWarning(e Event) bool {
	msg, _ := e.Data["message"].(string)
	return e.Event.Category == CategorySystem && e.Event.Action == ActionWarning && e.Source.AgentType == AgentTypeGlobalSupervisor &&
		strings.Contains(msg, " skipped: upstream team ")
}

// alone tells whether no team turn but t is at work at seq.
func (a *ForkAnalysis) alone(t *forkTurn, seq int64) bool {
	for _, o := range a.turns {
		if o == t || o.dispatch > seq {
			continue
		}
		if o.end == 0 || o.end > seq {
			return false
		}
	}
	return true
}

// index is the position of the event seq in the events.
func (a *ForkAnalysis) index(seq int64) int {
	if len(a.events) > 0 {
		if i := int(seq - a.events[0].Sequence); i >= 0 && i < len(a.events) && a.events[i].Sequence == seq {
			return i
		}
	}
	for i, e := range a.events {
		if e.Sequence == seq {
			return i
		}
	}
	return -1
}

func sortPoints(p []ForkPoint) {
	for i := 1; i < len(p); i++ {
		for j := i; j > 0 && p[j].Sequence < p[j-1].Sequence; j-- {
			p[j], p[j-1] = p[j-1], p[j]
		}
	}
}

// Events are the run's events the analysis read.
func (a *ForkAnalysis) Events() []Event { return a.events }

// Resolve maps a requested sequence to its fork point: the point itself,
// or, for an event of a worker's answer (its stream, tool calls,
// sub-agents), the dispatch.worker that began it. Anything else is a 400
// SEQUENCE_NOT_FORKABLE naming the nearest points before and after.
func (a *ForkAnalysis) Resolve(seq int64) (ForkPoint, error) {
	for _, p := range a.Points {
		if p.Sequence == seq {
			return p, nil
		}
	}
	if i := a.index(seq); i >= 0 {
		e := a.events[i]
		if e.Source.AgentType == AgentTypeWorker || e.Source.AgentType == AgentTypeSubAgent {
			for _, t := range a.turns {
				if e.Source.TeamName == nil || *e.Source.TeamName != t.team || seq <= t.dispatch || seq > t.last {
					continue
				}
				var began int64
				for _, w := range t.workers {
					if w < seq {
						began = w
					}
				}
				for _, p := range a.Points {
					if began > 0 && p.Sequence == began {
						return p, nil
					}
				}
			}
		}
	}
	return ForkPoint{}, a.notForkable(seq)
}

func (a *ForkAnalysis) notForkable(seq int64) error {
	var before, after *ForkPoint
	for i := range a.Points {
		p := &a.Points[i]
		if p.Sequence < seq {
			before = p
		} else if p.Sequence > seq && after == nil {
			after = p
		}
	}
	describe := func(p *ForkPoint) string {
		if p == nil {
			return "none"
		}
		s := fmt.Sprintf("%d (%s, team %q", p.Sequence, p.Kind, p.TeamName)
		if p.WorkerName != "" {
			s += fmt.Sprintf(", worker %q", p.WorkerName)
		}
		return s + ")"
	}
	msg := fmt.Sprintf("after_sequence: event %d is not a forkable point; nearest before: %s; nearest after: %s (runs/fork-points lists them all)", seq, describe(before), describe(after))
	if len(a.Points) == 0 {
		msg = fmt.Sprintf("after_sequence: event %d is not a forkable point, and the run has none (it dispatched no team)", seq)
	}
	return &Error{Code: CodeSequenceNotForkable, Field: "after_sequence", Message: msg}
}

// Nearest returns the forkable points nearest before and after seq (nil
// when there is none), as the error of Resolve names them.
func (a *ForkAnalysis) Nearest(seq int64) (before, after *ForkPoint) {
	for i := range a.Points {
		p := a.Points[i]
		if p.Sequence < seq {
			before = &p
		} else if p.Sequence > seq && after == nil {
			after = &p
		}
	}
	return before, after
}

// Seed is the state right after point p (one of a.Points): what the fork
// starts from. Usage comes from the llm.usage events up to the point.
func (a *ForkAnalysis) Seed(from string, p ForkPoint) *ForkSeed {
	seed := &ForkSeed{From: ForkedFrom{RunID: from, Sequence: p.Sequence}}
	var pending *forkTurn
	if p.Kind != ForkAtTeamFinished {
		pending = a.turns[p.Turn-1]
	}
	// The original's recorded team outputs finished by the point, in the
	// order it recorded them, and the teams it skipped by then.
	skipped := map[string]bool{}
	for _, e := range a.events {
		if e.Sequence > p.Sequence {
			break
		}
		if isSkipWarning(e) {
			msg, _ := e.Data["message"].(string)
			if name, ok := quotedPrefix(msg); ok {
				skipped[name] = true
			}
		}
	}
	failed := map[string]bool{}
	if a.result != nil {
		for _, o := range a.result.Teams {
			if o.Status == TeamSkipped {
				if skipped[o.TeamName] {
					seed.Teams = append(seed.Teams, o)
				}
				continue
			}
			if o.Turn < 1 || o.Turn > len(a.turns) {
				continue
			}
			if t := a.turns[o.Turn-1]; t != pending && t.end > 0 && t.end <= p.Sequence {
				seed.Teams = append(seed.Teams, o)
				if o.Status == TeamFailed {
					failed[o.TeamName] = true
				}
			}
		}
		for _, e := range a.result.Errors {
			if name, _ := e.Context["team_name"].(string); failed[name] {
				seed.Errors = append(seed.Errors, e)
			}
		}
	}
	for _, t := range a.turns {
		if t.dispatch <= p.Sequence {
			seed.Turns = t.n
		}
	}
	for _, e := range a.events {
		if e.Sequence > p.Sequence {
			break
		}
		inPending := pending != nil && e.Sequence > pending.dispatch && e.Source.TeamName != nil && *e.Source.TeamName == pending.team
		switch {
		case e.Event.Category == CategoryDispatch && e.Event.Action == ActionTeam && e.Source.AgentType == AgentTypeGlobalSupervisor:
			seed.Iteration = intOf(e.Data["iteration"])
		case e.Event.Category == CategorySystem && e.Event.Action == ActionWarning:
			msg, _ := e.Data["message"].(string)
			if inPending {
				seed.Turn = ensureTurn(seed.Turn)
				seed.Turn.Warnings = append(seed.Turn.Warnings, msg)
			} else {
				seed.Warnings = append(seed.Warnings, msg)
			}
		case e.Event.Category == CategoryLLM && e.Event.Action == ActionUsage:
			u := UsageOfEvent(e)
			if inPending {
				if e.Source.AgentType == AgentTypeTeamSupervisor {
					seed.Turn = ensureTurn(seed.Turn)
					seed.Turn.Usage = seed.Turn.Usage.Add(u)
				}
				continue // workers' usage is their outputs'
			}
			seed.Usage = seed.Usage.Add(u)
			if e.Source.TeamName != nil {
				if seed.TeamUsage == nil {
					seed.TeamUsage = map[string]Usage{}
				}
				seed.TeamUsage[*e.Source.TeamName] = seed.TeamUsage[*e.Source.TeamName].Add(u)
			}
			agent := e.Source.AgentID
			if e.Source.AgentType == AgentTypeSubAgent && len(e.Source.Path) > 2 {
				agent = e.Source.Path[2] // counted against the worker that called it
			}
			if seed.AgentUsage == nil {
				seed.AgentUsage = map[string]Usage{}
			}
			seed.AgentUsage[agent] = seed.AgentUsage[agent].Add(u)
		}
	}
	if pending == nil {
		return seed
	}
	turn := ensureTurn(seed.Turn)
	turn.Turn, turn.TeamName = pending.n, pending.team
	dispatch := a.events[a.index(pending.dispatch)]
	turn.Instruction, _ = dispatch.Data["instruction"].(string)
	if p.Kind == ForkAtWorkerDispatch {
		e := a.events[a.index(p.Sequence)]
		turn.Iteration = intOf(e.Data["iteration"])
		done := 0
		for _, w := range pending.workers {
			if w < p.Sequence {
				done++
			}
		}
		if done > 0 {
			turn.Outputs = append([]WorkerOutput(nil), pending.output.Workers[:done]...)
			for _, o := range turn.Outputs {
				if !containsString(turn.Dispatched, o.Name) {
					turn.Dispatched = append(turn.Dispatched, o.Name)
				}
			}
		}
		worker, _ := e.Data["worker_name"].(string)
		instruction, _ := e.Data["instruction"].(string)
		turn.Planned = []PlannedDispatch{{Worker: worker, Instruction: instruction}}
	}
	seed.Turn = turn
	return seed
}

func ensureTurn(t *ForkTurn) *ForkTurn {
	if t == nil {
		return &ForkTurn{}
	}
	return t
}

// quotedPrefix reads X out of a message `team "X" ...`.
func quotedPrefix(msg string) (string, bool) {
	rest, ok := strings.CutPrefix(msg, "team \"")
	if !ok {
		return "", false
	}
	name, _, ok := strings.Cut(rest, "\"")
	return name, ok
}

// UsageOfEvent is the usage an llm.usage event reports.
func UsageOfEvent(e Event) Usage {
	u := Usage{PromptTokens: intOf(e.Data["prompt_tokens"]), CompletionTokens: intOf(e.Data["completion_tokens"]), TotalTokens: intOf(e.Data["total_tokens"])}
	switch c := e.Data["cost_usd"].(type) {
	case float64:
		u.CostUSD = c
	case nil:
		u.CostUnknown = true
	}
	if unknown, _ := e.Data["cost_unknown"].(bool); unknown {
		u.CostUnknown = true
	}
	return u
}

// intOf reads a JSON number (float64 once decoded, int when built in
// memory).
func intOf(v any) int {
	switch n := v.(type) {
	case float64:
		return int(n)
	case int:
		return n
	case int64:
		return int(n)
	}
	return 0
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ApplyForkChanges applies a fork's changes to its seed and to h, the
// fork's copy of the original's hierarchy snapshot, after checking them
// against the fork point p: 400s naming the field for what cannot apply.
// task is the run's task, the instruction of a forced team turn that
// team_instructions does not give one.
func ApplyForkChanges(seed *ForkSeed, p ForkPoint, ch ForkChanges, h *Hierarchy, task string) error {
	for i, c := range ch.Agents {
		field := fmt.Sprintf("changes.agents[%d]", i)
		agent := agentByID(h, c.AgentID)
		if agent == nil {
			return FieldError(field+".agent_id", "no agent %q in the run's hierarchy", c.AgentID)
		}
		if c.SystemPrompt == nil && c.Model == nil {
			return FieldError(field, "changes neither system_prompt nor model")
		}
		if c.SystemPrompt != nil {
			if strings.TrimSpace(*c.SystemPrompt) == "" {
				return FieldError(field+".system_prompt", "must not be empty")
			}
			agent.SystemPrompt = *c.SystemPrompt
		}
		if c.Model != nil {
			agent.Model = strings.TrimSpace(*c.Model) // "": the default model
		}
	}
	if ch.NextTeam != "" {
		field := "changes.next_team"
		if p.Kind != ForkAtTeamFinished {
			return FieldError(field, "forces the global supervisor's next dispatch, so it needs a %s point; at a %s point the next dispatch is decided already", ForkAtTeamFinished, p.Kind)
		}
		if h.ExecutionMode == ExecutionModeParallel {
			return FieldError(field, "a parallel-mode run dispatches its teams by their dependencies; there is no decision to force")
		}
		team := teamByName(h, ch.NextTeam)
		if team == nil {
			return FieldError(field, "no team %q in the run's hierarchy", ch.NextTeam)
		}
		status := map[string]string{}
		for _, t := range seed.Teams {
			if status[t.TeamName] != TeamCompleted {
				status[t.TeamName] = t.Status
			}
		}
		if st := status[team.Name]; st == TeamFailed || st == TeamSkipped || st == TeamCancelled {
			return FieldError(field, "team %q has %s at the fork point and cannot be dispatched", team.Name, st)
		}
		for _, dep := range h.Dependencies[team.Name] {
			if status[dep] != TeamCompleted {
				return FieldError(field, "team %q depends on %q, which has not completed at the fork point", team.Name, dep)
			}
		}
		seed.Turn = &ForkTurn{TeamName: team.Name, Instruction: task, Forced: true}
	}
	for name, instruction := range ch.TeamInstructions {
		field := "changes.team_instructions"
		if seed.Turn == nil || seed.Turn.TeamName != name {
			return FieldError(field, "team %q: the fork starts no turn of it (a team's instruction can be changed at its dispatch.team or dispatch.worker points, or with next_team)", name)
		}
		if strings.TrimSpace(instruction) == "" {
			return FieldError(field, "team %q: the instruction must not be empty", name)
		}
		seed.Turn.Instruction = instruction
	}
	if ch.NextWorker != "" {
		field := "changes.next_worker"
		if seed.Turn == nil {
			return FieldError(field, "the fork starts no team turn at a %s point; name the team with next_team", p.Kind)
		}
		team := teamByName(h, seed.Turn.TeamName)
		var worker *Agent
		for i := range team.Workers {
			if team.Workers[i].Name == ch.NextWorker || team.Workers[i].AgentID == ch.NextWorker {
				worker = &team.Workers[i]
			}
		}
		if worker == nil {
			return FieldError(field, "team %q has no worker %q", team.Name, ch.NextWorker)
		}
		if team.PreventDuplicate {
			taken := containsString(seed.Turn.Dispatched, worker.Name)
			for _, pd := range seed.Turn.Planned {
				taken = taken || pd.Worker == worker.Name
			}
			if taken {
				return FieldError(field, "team %q has prevent_duplicate and worker %q has had its turn", team.Name, worker.Name)
			}
		}
		seed.Turn.Planned = append(seed.Turn.Planned, PlannedDispatch{Worker: worker.Name, Instruction: seed.Turn.Instruction, Forced: true})
	}
	return nil
}

func agentByID(h *Hierarchy, id string) *Agent {
	if id == "" {
		return nil
	}
	if h.GlobalSupervisor.AgentID == id {
		return &h.GlobalSupervisor
	}
	for i := range h.Teams {
		t := &h.Teams[i]
		if t.Supervisor.AgentID == id {
			return &t.Supervisor
		}
		for j := range t.Workers {
			if t.Workers[j].AgentID == id {
				return &t.Workers[j]
			}
		}
	}
	return nil
}

func teamByName(h *Hierarchy, name string) *Team {
	for i := range h.Teams {
		if h.Teams[i].Name == name {
			return &h.Teams[i]
		}
	}
	return nil
}
