package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/memory"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/pricing"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/telemetry"
	"github.com/op-stack/executor/webhooks"
)

type startInput struct {
	HierarchyID     string                `json:"hierarchy_id"`
	Task            string                `json:"task"`
	ExecutionConfig *executionConfigInput `json:"execution_config"`
	// ID and MessageID are optional caller-set ids (spec 003): the run's
	// id, and the id of the message of its final answer.
	ID        *string `json:"id"`
	MessageID *string `json:"message_id"`
	// UserMessageID is an optional caller-set id under which the task is
	// stored as the user's message (spec 003 §6.4: the client's id).
	UserMessageID *string `json:"user_message_id"`
	// PreviousRunID makes the run a follow-up of a finished run of the
	// same hierarchy (see previousRun).
	PreviousRunID *string `json:"previous_run_id"`
	// Webhook is an optional one-off endpoint of this run only
	// (docs/webhooks.md).
	Webhook *models.RunWebhookInput `json:"webhook"`
	// OnLimit is what a start beyond the tenant's concurrency limit does:
	// "queue" (the default) waits in the admission queue, "reject" is 429
	// (docs/queue.md).
	OnLimit *string `json:"on_limit"`
	// MultitaskStrategy is what a follow-up does when its thread has an
	// unfinished run: reject, enqueue (the default), interrupt, rollback.
	MultitaskStrategy *string `json:"multitask_strategy"`
	// Metadata fills the {variables} of the hierarchy's memory namespaces
	// (docs/memory.md), e.g. {"user_id": "u-42"}.
	Metadata map[string]string `json:"metadata"`
}

// queueOptions reads on_limit and multitask_strategy into opts; a
// multitask_strategy needs previous_run_id (it is about a thread).
func queueOptions(opts *StartOptions, onLimit, strategy *string, followUp bool) error {
	if onLimit != nil {
		switch *onLimit {
		case models.OnLimitQueue, models.OnLimitReject:
			opts.OnLimit = *onLimit
		default:
			return models.FieldError("on_limit", "must be %q or %q, got %q", models.OnLimitQueue, models.OnLimitReject, *onLimit)
		}
	}
	if strategy != nil {
		if !contains(models.MultitaskStrategies, *strategy) {
			return models.FieldError("multitask_strategy", "must be one of %s, got %q", strings.Join(models.MultitaskStrategies, ", "), *strategy)
		}
		if !followUp {
			return models.FieldError("multitask_strategy", "applies to a follow-up run only: give previous_run_id")
		}
		opts.Strategy = *strategy
	}
	return nil
}

// metadataKey is what a metadata key may look like (a {variable} name).
var metadataKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// checkMetadata checks a start's metadata: at most 20 keys named like
// variables, values of at most 256 characters.
func checkMetadata(md map[string]string) error {
	if len(md) > 20 {
		return models.FieldError("metadata", "must have at most 20 keys, got %d", len(md))
	}
	for k, v := range md {
		if !metadataKey.MatchString(k) {
			return models.FieldError("metadata", "key %q must be letters, digits and '_', not starting with a digit", k)
		}
		if len(v) > 256 {
			return models.FieldError("metadata."+k, "must be at most 256 characters")
		}
	}
	return nil
}

// Caller-set ids (spec 003): letters, digits, '_', '-' and '.', starting
// with a letter or digit; a run id is at most 64 characters (it names the
// run's workflow and is in URLs), a message id at most 100.
const (
	maxRunIDLength     = 64
	maxMessageIDLength = 100
)

var callerIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// callerID checks an optional caller-set id: nil is "generate one", and
// anything given must be a usable id.
func callerID(field string, id *string, maxLen int) (string, error) {
	if id == nil {
		return "", nil
	}
	v := *id
	switch {
	case v == "":
		return "", models.FieldError(field, "must be a non-empty string when given (omit it to have one generated)")
	case len(v) > maxLen:
		return "", models.FieldError(field, "must be at most %d characters, got %d", maxLen, len(v))
	case !callerIDPattern.MatchString(v):
		return "", models.FieldError(field, "must be letters, digits, '_', '-' or '.', starting with a letter or digit, got %q", v)
	}
	return v, nil
}

// callerIDs reads the optional run, answer message and user message ids
// of a start into opts; the fields name them on the surface.
func callerIDs(opts *StartOptions, runField string, runID *string, messageField string, messageID *string, userField string, userMessageID *string) error {
	var err error
	if opts.RunID, err = callerID(runField, runID, maxRunIDLength); err != nil {
		return err
	}
	if opts.MessageID, err = callerID(messageField, messageID, maxMessageIDLength); err != nil {
		return err
	}
	if opts.UserMessageID, err = callerID(userField, userMessageID, maxMessageIDLength); err != nil {
		return err
	}
	opts.runField, opts.messageField, opts.userMessageField = runField, messageField, userField
	return nil
}

// executionConfigInput is spec 001's execution_config of a start.
type executionConfigInput struct {
	StreamEvents            *bool `json:"stream_events"`
	SaveIntermediateResults *bool `json:"save_intermediate_results"`
	MaxParallelTeams        int   `json:"max_parallel_teams"`
	// Budget is checked against the hierarchy by Runs.Start.
	Budget *models.Budget `json:"budget"`
}

func (in *executionConfigInput) options() (StartOptions, error) {
	if in == nil {
		return StartOptions{}, nil
	}
	if in.MaxParallelTeams < 0 {
		return StartOptions{}, models.FieldError("execution_config.max_parallel_teams", "must be 0 (the hierarchy's) or more, got %d", in.MaxParallelTeams)
	}
	return StartOptions{MaxParallelTeams: in.MaxParallelTeams, Budget: in.Budget}, nil
}

type runIDInput struct {
	ID    string `json:"id"`
	RunID string `json:"run_id"`
}

func (in runIDInput) id() (string, error) {
	id := strings.TrimSpace(firstNonEmpty(in.ID, in.RunID))
	if id == "" {
		return "", models.FieldError("id", "is required")
	}
	return id, nil
}

// queryTimeout bounds a workflow query made while answering a request.
const queryTimeout = 3 * time.Second

// controlTimeout bounds how long pause and resume wait for the run's
// workflow to answer.
const controlTimeout = 30 * time.Second

// startRun stores a pending run and starts its workflow with a snapshot of
// the hierarchy, so later edits never change a run in flight.
func (s *Server) startRun(c *gin.Context) {
	var in startInput
	if err := decodeJSON(c, &in); err != nil {
		s.writeError(c, err)
		return
	}
	hierarchyID := strings.TrimSpace(in.HierarchyID)
	if hierarchyID == "" {
		s.writeError(c, models.FieldError("hierarchy_id", "is required"))
		return
	}
	if strings.TrimSpace(in.Task) == "" {
		s.writeError(c, models.FieldError("task", "must not be empty"))
		return
	}
	ctx := c.Request.Context()
	h, err := s.visibleHierarchy(ctx, hierarchyID)
	if err != nil {
		s.writeError(c, err)
		return
	}
	opts, err := in.ExecutionConfig.options()
	if err == nil {
		err = callerIDs(&opts, "id", in.ID, "message_id", in.MessageID, "user_message_id", in.UserMessageID)
	}
	if err == nil {
		err = queueOptions(&opts, in.OnLimit, in.MultitaskStrategy, in.PreviousRunID != nil)
	}
	if err == nil {
		opts.Previous, err = s.previousRun(ctx, "previous_run_id", in.PreviousRunID, h)
	}
	if err == nil && in.Webhook != nil {
		opts.Webhook, opts.WebhookSecret, err = checkRunWebhook(*in.Webhook)
	}
	if err == nil {
		err = checkMetadata(in.Metadata)
		opts.Metadata = in.Metadata
	}
	if err != nil {
		s.writeError(c, err)
		return
	}
	run, err := s.runs.Start(ctx, h, in.Task, opts)
	if err != nil {
		s.writeError(c, err)
		return
	}
	answer := gin.H{"id": run.PublicID, "workflow_id": run.WorkflowID, "status": run.Status, "thread_id": run.ThreadID}
	if run.QueuePosition > 0 {
		answer["queue_position"] = run.QueuePosition
	}
	ok(c, answer)
}

// previousRun reads a start's optional previous_run_id (field names it in
// errors): the run a follow-up follows. It must be visible to the caller
// (else 404, as any run the caller cannot see) and have run the same
// hierarchy (else 400). It may be unfinished: the follow-up's
// multitask_strategy decides, in the store, what then happens
// (docs/queue.md). nil id: no previous run.
func (s *Server) previousRun(ctx context.Context, field string, id *string, h *models.Hierarchy) (*store.Run, error) {
	if id == nil {
		return nil, nil
	}
	v := strings.TrimSpace(*id)
	if v == "" {
		return nil, models.FieldError(field, "must be a run id when given (omit it to start a new thread)")
	}
	run, err := s.visibleRun(ctx, v)
	if err != nil {
		if models.ErrorCode(err) == models.CodeExecutionNotFound {
			return nil, &models.Error{Code: models.CodeExecutionNotFound, Field: field, Message: fmt.Sprintf("%s: run %q not found", field, v)}
		}
		return nil, err
	}
	if run.HierarchyID != h.ID {
		return nil, models.FieldError(field, "run %q ran hierarchy %q; a follow-up run must run the same hierarchy (%q)", v, run.HierarchyID, h.ID)
	}
	if !models.IsTerminal(run.Status) && s.runs != nil {
		// A run whose workflow was terminated reads running until
		// reconciled.
		if reconciled, err := s.runs.Reconcile(ctx, run); err == nil {
			run = reconciled
		}
	}
	return run, nil
}

// Runs starts runs: the part of the API that talks to Temporal.
type Runs struct {
	Store     *store.Store
	Temporal  client.Client
	TaskQueue string
	Options   models.RunOptions
	// Models checks, before a run starts, that every agent's model routes
	// to a supported, configured provider; nil skips the check.
	Models ModelChecker
	// Prices are the model prices (LLM_PRICES_FILE over the built-in
	// list prices) a cost budget is checked against before a run starts
	// (checkPrices); nil uses pricing.Defaults.
	Prices pricing.Table
	// MaxConcurrentRuns is how many admitted runs one tenant may have
	// unfinished; a start beyond it waits in the admission queue, or is
	// refused with 429 with on_limit "reject" (docs/queue.md). Zero:
	// unlimited. The store decides under a per-tenant lock, so the limit
	// holds across replicas. (Forks are refused beyond it, not queued.)
	MaxConcurrentRuns int
	// MaxQueuedRuns bounds one tenant's queued runs; a start that would
	// queue past it is refused with 429. Zero: unbounded.
	MaxQueuedRuns int
	// TenantSearchAttribute says the namespace has the TenantId search
	// attribute (decided apart from Options.SearchAttributes, which a
	// namespace set up before tenants has without it).
	TenantSearchAttribute bool
	// ForkSearchAttribute says the namespace has the ForkedFrom search
	// attribute (decided apart), which forks set.
	ForkSearchAttribute bool
	// Metrics counts the runs Reconcile ends (terminated or timed-out
	// workflows, which no worker counts); nil counts nothing.
	Metrics *telemetry.Metrics
	// Webhooks queues the webhook deliveries of the events Reconcile
	// stores (no workflow announced them); nil queues none.
	Webhooks *webhooks.Queue
	// Namespace is the Temporal namespace of the runs' workflows, which
	// Delete deletes ("": default).
	Namespace string
	// Log logs what Delete could not delete in Temporal (nil: slog's
	// default logger).
	Log *slog.Logger
	// Memory preloads memories into a run's start when its hierarchy
	// asks (memory.preload); nil preloads nothing.
	Memory *memory.Service
}

// ModelChecker resolves an agent's model as the worker will
// (llm.Router.CheckRequest): an unknown provider is PROVIDER_NOT_SUPPORTED,
// one without its key MISSING_API_KEY, a disallowed base URL or region
// INVALID_CONFIG.
type ModelChecker interface {
	CheckRequest(req llm.Request) error
	// RoutesOffline tells whether the built-in offline model would answer.
	RoutesOffline(req llm.Request) bool
}

// StartOptions are per-run settings a start may give (spec 001's
// execution_config).
type StartOptions struct {
	MaxParallelTeams int
	// Budget is execution_config.budget (nil: none); Start validates it.
	Budget *models.Budget
	// RunID and MessageID are caller-set ids (spec 003), validated; empty
	// ones are generated. UserMessageID, when set, stores the task as the
	// user's message under it. The *Field names name them in errors.
	RunID, MessageID, UserMessageID          string
	runField, messageField, userMessageField string
	// Previous is the finished run this one follows up (previous_run_id),
	// checked by the caller (Server.previousRun); nil: a new thread.
	Previous *store.Run
	// StreamEvents and SaveIntermediateResults are spec 001's
	// execution_config settings (nil: not given), kept with the run.
	StreamEvents, SaveIntermediateResults *bool
	// ScheduleID names the schedule starting the run; "" for a client.
	ScheduleID string
	// key is the run's key when the caller decides it (a scheduled
	// start's, for retries); "" generates one.
	key string
	// Webhook is the run's one-off webhook endpoint (checked; nil: none)
	// and WebhookSecret the secret its caller chose.
	Webhook       *store.WebhookEndpoint
	WebhookSecret string
	// OnLimit is runs/start's on_limit ("": queue) and Strategy a
	// follow-up's multitask_strategy ("": enqueue).
	OnLimit, Strategy string
	// Metadata fills the hierarchy's memory namespaces' variables
	// (checked by the caller).
	Metadata map[string]string
}

// Start checks the agents' providers, stores a pending run and starts its
// workflow. If the workflow cannot be started, the run row is removed again.
func (r *Runs) Start(ctx context.Context, h *models.Hierarchy, task string, opts StartOptions) (*store.Run, error) {
	p, err := r.prepare(ctx, h, task, opts)
	if err != nil {
		return nil, err
	}
	run := p.run
	// Admitted runs are told even when this start fails below.
	r.signalAdmitted(ctx, p.admitted)
	start := client.StartWorkflowOptions{
		ID:                    run.WorkflowID,
		TaskQueue:             r.TaskQueue,
		StaticSummary:         p.summary,
		StaticDetails:         p.details,
		TypedSearchAttributes: r.startSearchAttributes(h, run.TenantID, ""),
	}
	_, err = r.Temporal.ExecuteWorkflow(ctx, start, models.RunWorkflowName, p.input)
	if err != nil {
		_ = r.Store.DeleteRun(context.WithoutCancel(ctx), run.ID)
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			// A caller-set id whose workflow exists (its run row was removed).
			return nil, &models.Error{Code: models.CodeAlreadyExists, Field: opts.runField, Message: fmt.Sprintf("%s %q is taken", firstNonEmpty(opts.runField, "run id"), run.PublicID), Err: err}
		}
		return nil, &models.Error{Code: models.CodeUnavailable, Message: "could not start the run's workflow: Temporal is unavailable", Err: err}
	}
	r.stopAhead(ctx, opts.Strategy, p.ahead)
	return run, nil
}

// preparedRun is a stored pending run and what its workflow starts with.
type preparedRun struct {
	run              *store.Run
	input            models.RunInput
	summary, details string
	// admitted are other runs the store admitted meanwhile (to signal);
	// ahead the unfinished runs of the thread this one waits behind.
	admitted, ahead []*store.Run
}

// prepare checks a start (budget, models, the tenant's concurrency) and
// stores the pending run: what runs/start and a schedule's action
// (ScheduledStarts) share before the run's workflow starts.
func (r *Runs) prepare(ctx context.Context, h *models.Hierarchy, task string, opts StartOptions) (*preparedRun, error) {
	if err := checkBudget(opts.Budget, h); err != nil {
		return nil, err
	}
	if opts.Budget == nil {
		opts.Budget = h.Budget // the hierarchy's default, validated when stored
	}
	budgetField := "execution_config.budget"
	if opts.Budget == h.Budget {
		budgetField = "budget"
	}
	if err := r.checkPrices(opts.Budget, budgetField, h); err != nil {
		return nil, err
	}
	offline, err := r.checkModels(h)
	if err != nil {
		return nil, err
	}
	// A run belongs to its hierarchy's tenant, whoever starts it (an admin
	// may start another tenant's hierarchy): never to a tenant the request
	// names.
	tenant := tenantOrDefault(h.TenantID)
	// The run's key is always generated: a caller-chosen id is the run's
	// public id, unique in its tenant only (issue 23, item 8), while the
	// key names the workflow and must be unique across tenants.
	id := firstNonEmpty(opts.key, models.NewID())
	run := &store.Run{
		ID: id, PublicID: firstNonEmpty(opts.RunID, id), HierarchyID: h.ID, HierarchyName: h.Name, TotalTeams: len(h.Teams),
		WorkflowID: models.RunWorkflowID(id), Task: task, TenantID: tenant, ScheduleID: opts.ScheduleID,
		// Kept for forks (runs/fork), which start from them.
		Hierarchy: h, ExecutionConfig: &store.ExecutionConfig{
			MaxParallelTeams: opts.MaxParallelTeams, Budget: opts.Budget,
			StreamEvents: opts.StreamEvents, SaveIntermediateResults: opts.SaveIntermediateResults,
		},
		// Claimed with the run, atomically (spec 003: the message's key).
		AnswerMessageID: opts.MessageID, UserMessageID: opts.UserMessageID,
	}
	mem, err := r.runMemory(ctx, h, tenant, task, opts.Metadata)
	if err != nil {
		return nil, err
	}
	var previous *models.PreviousRun
	if p := opts.Previous; p != nil {
		run.ThreadID, run.PreviousRunID = firstNonEmpty(p.ThreadID, p.PublicID), p.PublicID
		if models.IsTerminal(p.Status) {
			if previous, err = r.previousInput(ctx, p, run.ThreadID); err != nil {
				return nil, err
			}
		}
	}
	admission, err := r.Store.AdmitRun(ctx, run, store.Admission{
		Limit: r.MaxConcurrentRuns, MaxQueued: r.MaxQueuedRuns, RejectOverLimit: opts.OnLimit == models.OnLimitReject,
		FollowUp: opts.Previous != nil, Strategy: firstNonEmpty(opts.Strategy, models.MultitaskEnqueue),
	})
	if err != nil {
		var e *models.Error
		if errors.As(err, &e) && e.Code == models.CodeAlreadyExists {
			// The store names its columns; the answer names the surface's
			// fields (contract 002's or spec 001's).
			field, value := opts.runField, run.PublicID
			switch e.Field {
			case "message_id":
				field, value = opts.messageField, opts.MessageID
			case "user_message_id":
				field, value = opts.userMessageField, opts.UserMessageID
			}
			if field != "" {
				e.Field, e.Message = field, fmt.Sprintf("%s %q is taken", field, value)
			}
		}
		return nil, err
	}
	var queue *models.QueueInfo
	switch {
	case admission.Queued:
		// Its context is built when it is admitted (CheckAdmission).
		previous = nil
		queue = &models.QueueInfo{Reason: admission.Reason, Position: admission.Position}
		run.QueuePosition = admission.Position
		if opts.Strategy == models.MultitaskRollback {
			if prev := r.rollbackPrevious(ctx, opts.Previous, admission.Ahead); prev != run.PreviousRunID {
				run.PreviousRunID = prev
				if err := r.Store.SetPreviousRun(ctx, run.ID, prev); err != nil {
					_ = r.Store.DeleteRun(context.WithoutCancel(ctx), id)
					return nil, err
				}
			}
		}
	case opts.Previous != nil && previous == nil:
		// The run it follows was unfinished when read and has ended since
		// (else its thread would be busy): its context is read now.
		p, err := r.Store.GetRun(ctx, opts.Previous.ID)
		if err == nil {
			previous, err = r.previousInput(ctx, p, run.ThreadID)
		}
		if err != nil {
			_ = r.Store.DeleteRun(context.WithoutCancel(ctx), id)
			return nil, err
		}
	}
	if opts.Webhook != nil {
		// Stored before the workflow starts, so that it gets the run's
		// first event; removed with the run if the workflow cannot start.
		opts.Webhook.TenantID, opts.Webhook.RunID = tenant, id
		opts.Webhook.Description = "runs/start webhook of run " + run.PublicID
		if err := r.Store.CreateRunWebhook(ctx, opts.Webhook, opts.WebhookSecret); err != nil {
			_ = r.Store.DeleteRun(context.WithoutCancel(ctx), id)
			return nil, webhookSecretError(err)
		}
	}
	p := &preparedRun{
		run:      run,
		summary:  h.Name + ": " + oneLine(task, 200),
		details:  fmt.Sprintf("Run %s. Hierarchy %s (%s), %d teams, %s.\n\nTask: %s", run.PublicID, h.Name, h.ID, len(h.Teams), h.ExecutionMode, task),
		input:    models.RunInput{RunID: id, Task: task, Hierarchy: *h, Options: r.runOptions(tenant, opts, firstNonEmpty(run.ThreadID, run.PublicID)), AnswerMessageID: opts.MessageID, OfflineAgents: offline, Previous: previous, Queue: queue},
		admitted: admission.Admitted, ahead: admission.Ahead,
	}
	p.input.Options.Memory = mem
	if run.PreviousRunID != "" {
		p.details += fmt.Sprintf("\n\nFollows up run %s (thread %s).", run.PreviousRunID, run.ThreadID)
	}
	if queue != nil {
		p.details += fmt.Sprintf("\n\nQueued (%s) at position %d.", queue.Reason, queue.Position)
	}
	if opts.ScheduleID != "" {
		p.details += fmt.Sprintf("\n\nStarted by schedule %s.", opts.ScheduleID)
	}
	return p, nil
}

// startSearchAttributes are the search attributes a run's workflow starts
// with: those the namespace has (see app's search-attribute check), with
// ForkedFrom naming the original of a fork ("" for a run started afresh).
func (r *Runs) startSearchAttributes(h *models.Hierarchy, tenant, forkedFrom string) temporal.SearchAttributes {
	var attrs []temporal.SearchAttributeUpdate
	if r.Options.SearchAttributes {
		attrs = append(attrs,
			models.SearchHierarchyID.ValueSet(h.ID),
			models.SearchHierarchyName.ValueSet(h.Name),
			models.SearchRunStatus.ValueSet(models.RunPending),
		)
	}
	if r.TenantSearchAttribute {
		attrs = append(attrs, models.SearchTenantID.ValueSet(tenant))
	}
	if r.ForkSearchAttribute && forkedFrom != "" {
		attrs = append(attrs, models.SearchForkedFrom.ValueSet(forkedFrom))
	}
	if len(attrs) == 0 {
		return temporal.SearchAttributes{}
	}
	return temporal.NewSearchAttributes(attrs...)
}

// previousInput is what a follow-up run's workflow is given of the run it
// follows: its task, team results and final answer, answers by reference
// to their stored messages and the whole within the context limits
// (models.PreviousRunContext).
func (r *Runs) previousInput(ctx context.Context, p *store.Run, thread string) (*models.PreviousRun, error) {
	src := models.PreviousRunSource{RunID: p.PublicID, Status: p.Status, Task: p.Task, FinalAnswer: p.FinalAnswer, Error: p.Error}
	if p.Result != nil {
		src.Teams = p.Result.Teams
		if src.FinalAnswer == "" {
			src.FinalAnswer = p.Result.FinalAnswer
		}
	}
	if src.FinalAnswer != "" {
		id, err := r.Store.FinalAnswerMessageID(ctx, p.ID)
		if err != nil {
			return nil, err
		}
		src.FinalAnswerMessageID = id
	}
	return &models.PreviousRun{RunID: p.PublicID, ThreadID: thread, Status: p.Status, Context: models.PreviousRunContext(src, r.Options)}, nil
}

func (r *Runs) runOptions(tenant string, opts StartOptions, thread string) models.RunOptions {
	o := r.Options
	o.Tenant, o.ThreadID = tenant, thread
	if opts.MaxParallelTeams > 0 {
		o.MaxParallelTeams = opts.MaxParallelTeams
	}
	o.Budget = opts.Budget
	return o
}

// checkModels fails fast, before anything is stored, when an agent could
// not reach its model, instead of failing later mid-run: a model that
// routes to no configured provider (executor serve without a key, unless
// the offline model was chosen) is MISSING_API_KEY naming the agent's
// field, agent_id and model. It returns the agent_ids the offline model
// will answer.
func (r *Runs) checkModels(h *models.Hierarchy) ([]string, error) {
	if r.Models == nil {
		return nil, nil
	}
	var offline []string
	check := func(field string, a models.Agent) error {
		model := a.Model
		if model == "" {
			model = r.Options.DefaultModel
		}
		req := llm.Request{Model: model, Provider: a.Provider, BaseURL: a.BaseURL, Region: a.Region}
		if err := r.Models.CheckRequest(req); err != nil {
			var e *models.Error
			if errors.As(err, &e) {
				return &models.Error{Code: e.Code, Field: field, Message: fmt.Sprintf("%s (agent_id %s, model %s): %s", field, a.AgentID, model, e.Message)}
			}
			return err
		}
		if r.Models.RoutesOffline(req) {
			offline = append(offline, a.AgentID)
		}
		for i, m := range a.FallbackModels {
			// Routed by the model table, as completeWithFallback sends them.
			if err := r.Models.CheckRequest(llm.Request{Model: m}); err != nil {
				var e *models.Error
				if errors.As(err, &e) {
					return &models.Error{Code: e.Code, Field: fmt.Sprintf("%s.fallback_models[%d]", field, i), Message: fmt.Sprintf("%s (agent_id %s, fallback model %s): %s", field, a.AgentID, m, e.Message)}
				}
				return err
			}
		}
		return nil
	}
	if err := check("global_supervisor_agent", h.GlobalSupervisor); err != nil {
		return nil, err
	}
	for i, t := range h.Teams {
		if err := check(fmt.Sprintf("teams[%d].team_supervisor_agent", i), t.Supervisor); err != nil {
			return nil, err
		}
		for j, w := range t.Workers {
			if err := check(fmt.Sprintf("teams[%d].workers[%d]", i, j), w); err != nil {
				return nil, err
			}
		}
	}
	return offline, nil
}

// checkPrices refuses a cost budget (max_cost_usd, for the run, a team or
// an agent) that would count a model without a price: such a call's cost
// is unknown, not $0, so the budget could not see it. Every agent the limit
// covers is checked with its model (or the default) and its fallback
// models; agents the offline model answers cost nothing and pass. field is
// where the budget came from (execution_config.budget, or the hierarchy's
// default budget).
func (r *Runs) checkPrices(b *models.Budget, field string, h *models.Hierarchy) error {
	if b == nil {
		return nil
	}
	prices := r.Prices
	if prices == nil {
		prices = pricing.Defaults
	}
	check := func(limitField string, a models.Agent, where string) error {
		model := a.Model
		if model == "" {
			model = r.Options.DefaultModel
		}
		if r.Models != nil && r.Models.RoutesOffline(llm.Request{Model: model, Provider: a.Provider, BaseURL: a.BaseURL, Region: a.Region}) {
			return nil // the offline model costs nothing
		}
		for _, m := range append([]string{model}, a.FallbackModels...) {
			if _, ok := prices.Lookup(m); !ok {
				return &models.Error{Code: models.CodeInvalidParameters, Field: limitField, Message: fmt.Sprintf(
					"%s: agent %s (%s) uses model %q, which has no price: its calls' cost would be unknown, not $0, and a cost budget cannot count them; "+
						"price the model in LLM_PRICES_FILE (docs/cost-and-budgets.md) or cap the run with max_tokens instead", limitField, a.AgentID, where, m)}
			}
		}
		return nil
	}
	covered := func(team string, a models.Agent) string {
		switch {
		case b.MaxCostUSD > 0:
			return field + ".max_cost_usd"
		case b.Teams[team].MaxCostUSD > 0:
			return field + ".teams." + team + ".max_cost_usd"
		case b.Agents[a.AgentID].MaxCostUSD > 0:
			return field + ".agents." + a.AgentID + ".max_cost_usd"
		}
		return ""
	}
	if f := covered("", h.GlobalSupervisor); f != "" {
		if err := check(f, h.GlobalSupervisor, "global_supervisor_agent"); err != nil {
			return err
		}
	}
	for i, t := range h.Teams {
		if f := covered(t.Name, t.Supervisor); f != "" {
			if err := check(f, t.Supervisor, fmt.Sprintf("teams[%d].team_supervisor_agent", i)); err != nil {
				return err
			}
		}
		for j, w := range t.Workers {
			if f := covered(t.Name, w); f != "" {
				if err := check(f, w, fmt.Sprintf("teams[%d].workers[%d]", i, j)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// runView is runs/get's answer.
type runView struct {
	*store.Run
	Progress progressView `json:"progress"`
	// Offline says some answer came from the built-in offline model
	// (runs/get only; the list leaves it out rather than query per run).
	Offline bool `json:"offline,omitempty"`
	// Usage is the run's totals so far, from its recorded LLM calls:
	// tokens, cost_usd and cost_unknown (some call's model has no price).
	Usage runUsageView `json:"usage"`
	// ErrorCode is the code of Error for a failed or timed-out run
	// (runErrorCode): PROVIDER_KEY_REJECTED tells the operator to fix a
	// provider key.
	ErrorCode string `json:"error_code,omitempty"`
}

// runUsageView is a run's usage totals with cost_usd and cost_unknown
// always present (cost_usd is the priced calls' part when cost_unknown).
type runUsageView struct {
	PromptTokens     int     `json:"prompt_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	TotalTokens      int     `json:"total_tokens"`
	CachedTokens     int     `json:"cached_tokens"`
	CacheWriteTokens int     `json:"cache_write_tokens"`
	ReasoningTokens  int     `json:"reasoning_tokens"`
	CostUSD          float64 `json:"cost_usd"`
	CostUnknown      bool    `json:"cost_unknown"`
}

func usageView(u models.Usage) runUsageView {
	return runUsageView{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
		CachedTokens: u.CachedTokens, CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens,
		CostUSD: roundCost(u.CostUSD), CostUnknown: u.CostUnknown}
}

// roundCost rounds a sum of costs to a billionth of a dollar, dropping
// floating-point noise.
func roundCost(usd float64) float64 { return math.Round(usd*1e9) / 1e9 }

// runListItem is a run in runs/list: its row and its usage totals.
type runListItem struct {
	*store.Run
	Usage runUsageView `json:"usage"`
}

// runUsage reads the runs' usage totals; a failed read leaves them zero
// (logged), it does not fail the request.
func (s *Server) runUsage(ctx context.Context, ids ...string) map[string]models.Usage {
	u, err := s.store.RunUsage(ctx, ids...)
	if err != nil {
		s.log.Warn("run usage", "error", err)
	}
	return u
}

type progressView struct {
	CurrentTeam          string   `json:"current_team"`
	CurrentWorker        string   `json:"current_worker"`
	ActiveAgentID        string   `json:"active_agent_id"`
	CompletedTeams       []string `json:"completed_teams"`
	TotalTeams           int      `json:"total_teams"`
	CompletionPercentage int      `json:"completion_percentage"`
}

func (s *Server) getRun(c *gin.Context) {
	id, valid := readID[runIDInput](s, c)
	if !valid {
		return
	}
	run, err := s.visibleRun(c.Request.Context(), id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if reconciled, err := s.runs.Reconcile(c.Request.Context(), run); err == nil {
		run = reconciled
	} else {
		s.log.Warn("reconcile run", "run_id", id, "error", err)
	}
	v := s.viewRun(c.Request.Context(), run)
	s.markOffline(c.Request.Context(), &v)
	v.Usage = usageView(s.runUsage(c.Request.Context(), run.ID)[run.ID])
	ok(c, v)
}

// markOffline sets the run-level offline flags of a run's view: on the
// view and on its result, when any answer came from the offline model.
func (s *Server) markOffline(ctx context.Context, v *runView) {
	offline := resultOffline(v.Result)
	if !offline {
		var err error
		if offline, err = s.store.RunUsedOffline(ctx, v.ID); err != nil {
			s.log.Warn("offline usage", "run_id", v.ID, "error", err)
		}
	}
	if !offline {
		return
	}
	v.Offline = true
	if v.Result != nil {
		run := *v.Run
		res := *run.Result
		res.Offline = true
		run.Result = &res
		v.Run = &run
	}
}

// resultOffline tells whether a worker's answer in the result came from
// the offline model.
func resultOffline(res *models.RunResult) bool {
	if res == nil {
		return false
	}
	for _, t := range res.Teams {
		for _, w := range t.Workers {
			if w.Offline {
				return true
			}
		}
	}
	return false
}

// viewRun adds the progress: from the workflow while the run is live, from
// the stored result once it has ended.
func (s *Server) viewRun(ctx context.Context, run *store.Run) runView {
	v := runView{Run: run, Progress: progressView{TotalTeams: run.TotalTeams, CompletedTeams: []string{}}}
	if run.Result != nil {
		for _, t := range run.Result.Teams {
			if !contains(v.Progress.CompletedTeams, t.TeamName) {
				v.Progress.CompletedTeams = append(v.Progress.CompletedTeams, t.TeamName)
			}
		}
	}
	if !models.IsTerminal(run.Status) && s.runs != nil {
		qctx, cancel := context.WithTimeout(ctx, queryTimeout)
		defer cancel()
		if p, err := s.queryProgress(qctx, run.WorkflowID); err == nil {
			v.Progress.CurrentTeam, v.Progress.CurrentWorker, v.Progress.ActiveAgentID = p.CurrentTeam, p.CurrentWorker, p.ActiveAgentID
			v.Progress.CompletedTeams = p.CompletedTeams
		} else {
			s.log.Debug("progress query", "run_id", run.ID, "error", err)
		}
	}
	if v.Progress.TotalTeams > 0 {
		v.Progress.CompletionPercentage = min(100, 100*len(v.Progress.CompletedTeams)/v.Progress.TotalTeams)
	}
	if run.Status == models.RunCompleted {
		v.Progress.CompletionPercentage = 100
	}
	if run.Error != "" && (run.Status == models.RunFailed || run.Status == models.RunTimedOut) {
		v.ErrorCode = runErrorCode(run)
	}
	return v
}

func (s *Server) queryProgress(ctx context.Context, workflowID string) (models.Progress, error) {
	var p models.Progress
	resp, err := s.runs.Temporal.QueryWorkflow(ctx, workflowID, "", models.QueryProgress)
	if err != nil {
		return p, err
	}
	return p, resp.Get(&p)
}

type listRunsInput struct {
	pageInput
	HierarchyID string `json:"hierarchy_id"`
	Status      string `json:"status"`
	ThreadID    string `json:"thread_id"`
	// ForkedFrom lists the forks of a run (runs/fork).
	ForkedFrom string `json:"forked_from"`
	// ScheduleID lists the runs a schedule started (schedules/create).
	ScheduleID string `json:"schedule_id"`
}

func (s *Server) listRuns(c *gin.Context) {
	var in listRunsInput
	f, valid := s.readPage(c, &in)
	if !valid {
		return
	}
	if in.Status != "" && !contains(models.RunStatuses, in.Status) {
		s.writeError(c, models.FieldError("status", "must be one of %s; got %q", strings.Join(models.RunStatuses, ", "), in.Status))
		return
	}
	f.Tenant = tenantFilter(c.Request.Context())
	runs, total, err := s.store.ListRuns(c.Request.Context(), store.RunFilter{ListFilter: f, HierarchyID: strings.TrimSpace(in.HierarchyID), Status: in.Status, ThreadID: strings.TrimSpace(in.ThreadID), ForkedFrom: strings.TrimSpace(in.ForkedFrom), ScheduleID: strings.TrimSpace(in.ScheduleID)})
	if err != nil {
		s.writeError(c, err)
		return
	}
	ids := make([]string, len(runs))
	for i := range runs {
		ids[i] = runs[i].ID
	}
	usage := s.runUsage(c.Request.Context(), ids...)
	items := make([]runListItem, len(runs))
	for i := range runs {
		items[i] = runListItem{Run: runs[i], Usage: usageView(usage[runs[i].ID])}
	}
	ok(c, gin.H{"items": items, "total": total, "page": f.Page, "page_size": f.PageSize})
}

// cancelRun asks the run's workflow to cancel. The workflow stops its LLM
// calls and records the run as cancelled; cancelling a cancelled run again
// succeeds, cancelling a finished one is a conflict.
func (s *Server) cancelRun(c *gin.Context) {
	id, valid := readID[runIDInput](s, c)
	if !valid {
		return
	}
	status, err := s.cancel(c.Request.Context(), id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, gin.H{"id": id, "status": status})
}

// cancel asks the visible run id's workflow to cancel, and answers the
// status to report: "cancelling", or "cancelled" for a run cancelled
// already. A run that has ended otherwise is EXECUTION_FINISHED.
func (s *Server) cancel(ctx context.Context, id string) (string, error) {
	run, err := s.visibleRun(ctx, id)
	if err != nil {
		return "", err
	}
	switch run.Status {
	case models.RunCancelled:
		return run.Status, nil
	case models.RunCompleted, models.RunFailed, models.RunTimedOut:
		return "", models.Errorf(models.CodeExecutionFinished, "run %q has already %s and cannot be cancelled", id, run.Status)
	}
	if err := s.runs.Temporal.CancelWorkflow(ctx, run.WorkflowID, ""); err != nil {
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			return "", models.Errorf(models.CodeExecutionFinished, "run %q is no longer running", id)
		}
		return "", &models.Error{Code: models.CodeUnavailable, Message: "could not cancel the run: Temporal is unavailable", Err: err}
	}
	return "cancelling", nil
}

// pauseRun and resumeRun pause and resume a run (see setPaused).
func (s *Server) pauseRun(c *gin.Context)  { s.setPausedRun(c, true) }
func (s *Server) resumeRun(c *gin.Context) { s.setPausedRun(c, false) }

func (s *Server) setPausedRun(c *gin.Context, paused bool) {
	id, valid := readID[runIDInput](s, c)
	if !valid {
		return
	}
	status, err := s.setPaused(c.Request.Context(), id, paused)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, gin.H{"id": id, "status": status})
}

// setPaused pauses or resumes a run through its workflow's pause or resume
// update and returns the run's status after: "paused" or "running".
// Pausing a paused run, or resuming a running one, changes nothing and
// answers the same; a run that has ended is a conflict. In-flight LLM
// calls finish; nothing new starts until the run is resumed.
func (s *Server) setPaused(ctx context.Context, id string, paused bool) (string, error) {
	run, err := s.visibleRun(ctx, id)
	if err != nil {
		return "", err
	}
	verb := "resumed"
	if paused {
		verb = "paused"
	}
	if models.IsTerminal(run.Status) {
		return "", models.Errorf(models.CodeExecutionFinished, "run %q has already %s and cannot be %s", id, run.Status, verb)
	}
	if run.Status == models.RunQueued {
		// A paused run holds a place of its tenant's limit: a queued one
		// has none to hold (docs/queue.md).
		return "", models.Errorf(models.CodeExecutionInProgress, "run %q is queued and cannot be %s until it has started; cancel it instead", id, verb)
	}
	if s.runs == nil || s.runs.Temporal == nil {
		return "", models.Errorf(models.CodeUnavailable, "runs are not controlled by this process")
	}
	name := models.UpdateResume
	if paused {
		name = models.UpdatePause
	}
	// The workflow answers within a workflow task; without a worker it
	// never does, and the caller is told so rather than kept waiting.
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	handle, err := s.runs.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: run.WorkflowID, UpdateName: name, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var status string
	if err == nil {
		err = handle.Get(ctx, &status)
	}
	if err != nil {
		var notFound *serviceerror.NotFound
		var appErr *temporal.ApplicationError
		switch {
		case errors.As(err, &notFound):
			return "", models.Errorf(models.CodeExecutionFinished, "run %q is no longer running", id)
		case errors.As(err, &appErr):
			// The workflow's validator refused: the run has ended meanwhile,
			// or started before pause was supported.
			return "", models.Errorf(models.CodeExecutionInProgress, "run %q cannot be %s: %s", id, verb, appErr.Message())
		}
		if ctx.Err() != nil {
			return "", &models.Error{Code: models.CodeUnavailable, Message: fmt.Sprintf("the run's workflow did not answer within %s: is a worker running?", controlTimeout), Err: err}
		}
		return "", &models.Error{Code: models.CodeUnavailable, Message: "could not reach the run's workflow: Temporal is unavailable", Err: err}
	}
	return status, nil
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// checkBudget validates execution_config.budget against the hierarchy
// (models.CheckBudget).
func checkBudget(b *models.Budget, h *models.Hierarchy) error {
	return models.CheckBudget(b, "execution_config.budget", h)
}

// runMemory resolves the hierarchy's memory namespaces for a run from its
// metadata (a missing variable is INVALID_PARAMETERS) and, when the
// hierarchy asks, preloads the best memories for the task. A preload that
// fails (the embedding model down) is logged and skipped: the run starts
// without it rather than not at all.
func (r *Runs) runMemory(ctx context.Context, h *models.Hierarchy, tenant, task string, metadata map[string]string) (*models.RunMemory, error) {
	vars := map[string]string{}
	for k, v := range metadata {
		vars[k] = v
	}
	vars["hierarchy_id"], vars["tenant_id"] = h.ID, tenant
	mem, err := h.ResolveMemory(vars)
	if err != nil || mem == nil || h.Memory.Preload <= 0 || r.Memory == nil {
		return mem, err
	}
	text, err := r.Memory.Preload(ctx, tenant, mem, task, h.Memory.Preload)
	if err != nil {
		r.logger().Warn("memory preload skipped", "hierarchy_id", h.ID, "error", err)
		return mem, nil
	}
	mem.Preloaded = text
	return mem, nil
}
