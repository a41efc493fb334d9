package api

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// Schedules (issue 26, item 2; docs/schedules.md) are Temporal schedules
// whose action is models.ScheduledRunWorkflowName. Temporal keeps their
// spec, state and history; the store keeps which tenant owns each one.

// scheduleCatchupWindow is how late a missed action may still run (after
// an outage of Temporal): one run for a missed window, not a year of them
// (Temporal's default).
const scheduleCatchupWindow = 5 * time.Minute

// overlapPolicies maps the surface's overlap names to Temporal's.
var overlapPolicies = map[string]enumspb.ScheduleOverlapPolicy{
	"skip":         enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
	"buffer_one":   enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE,
	"buffer_all":   enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ALL,
	"cancel_other": enumspb.SCHEDULE_OVERLAP_POLICY_CANCEL_OTHER,
	"allow_all":    enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
}

var overlapNames = []string{"skip", "buffer_one", "buffer_all", "cancel_other", "allow_all"}

func overlapName(p enumspb.ScheduleOverlapPolicy) string {
	for name, v := range overlapPolicies {
		if v == p {
			return name
		}
	}
	return "skip" // Temporal's unspecified is skip
}

// intervalInput is one interval of a schedule: every Every, shifted by
// Offset (Go durations: "90s", "1h").
type intervalInput struct {
	Every  string `json:"every"`
	Offset string `json:"offset,omitempty"`
}

// scheduleSpecInput is what creates and updates a schedule. On update, a
// field left out keeps its value; giving cron or intervals replaces both.
type scheduleSpecInput struct {
	Task      *string          `json:"task"`
	Cron      []string         `json:"cron"`
	Intervals []intervalInput  `json:"intervals"`
	TimeZone  *string          `json:"time_zone"`
	Jitter    *string          `json:"jitter"`
	Overlap   *string          `json:"overlap"`
	Note      *string          `json:"note"`
	Config    *scheduleRunConf `json:"execution_config"`
}

// scheduleRunConf is the execution_config given to every run of a
// schedule.
type scheduleRunConf struct {
	MaxParallelTeams int            `json:"max_parallel_teams"`
	Budget           *models.Budget `json:"budget"`
}

type createScheduleInput struct {
	HierarchyID string `json:"hierarchy_id"`
	scheduleSpecInput
	Paused bool `json:"paused"`
}

type scheduleIDInput struct {
	ID         string `json:"id"`
	ScheduleID string `json:"schedule_id"`
}

func (in scheduleIDInput) id() (string, error) {
	id := strings.TrimSpace(firstNonEmpty(in.ID, in.ScheduleID))
	if id == "" {
		return "", models.FieldError("id", "is required")
	}
	return id, nil
}

type updateScheduleInput struct {
	scheduleIDInput
	scheduleSpecInput
}

type scheduleNoteInput struct {
	scheduleIDInput
	Note string `json:"note"`
}

type triggerScheduleInput struct {
	scheduleIDInput
	// Overlap overrides the schedule's policy for this action ("": the
	// schedule's).
	Overlap string `json:"overlap"`
}

type listSchedulesInput struct {
	pageInput
	HierarchyID string `json:"hierarchy_id"`
}

func parseDuration(field, v string, allowZero bool) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		return 0, models.FieldError(field, "must be a duration such as \"90s\", \"5m\" or \"1h\", got %q", v)
	}
	if d < 0 || (!allowZero && d == 0) {
		return 0, models.FieldError(field, "must be positive, got %q", v)
	}
	return d, nil
}

// apply checks in and writes what it gives into spec, policy and action
// input (nil ones are left alone: an update's unchanged parts).
func (in *scheduleSpecInput) apply(spec *client.ScheduleSpec, policy *client.SchedulePolicies, run *models.ScheduledRunInput, h *models.Hierarchy, creating bool) error {
	if in.Task != nil {
		if strings.TrimSpace(*in.Task) == "" {
			return models.FieldError("task", "must not be empty")
		}
		run.Task = *in.Task
	} else if creating {
		return models.FieldError("task", "must not be empty")
	}
	if in.Cron != nil || in.Intervals != nil || creating {
		if len(in.Cron) == 0 && len(in.Intervals) == 0 {
			return models.FieldError("cron", "a schedule needs at least one cron expression (cron) or interval (intervals)")
		}
		spec.CronExpressions, spec.Intervals, spec.Calendars = nil, nil, nil
		for i, c := range in.Cron {
			if err := checkCron(c); err != nil {
				return models.FieldError(fmt.Sprintf("cron[%d]", i), "%q is not a cron expression: %v", c, err)
			}
			spec.CronExpressions = append(spec.CronExpressions, strings.TrimSpace(c))
		}
		for i, iv := range in.Intervals {
			every, err := parseDuration(fmt.Sprintf("intervals[%d].every", i), iv.Every, false)
			if err != nil {
				return err
			}
			if every < time.Second {
				return models.FieldError(fmt.Sprintf("intervals[%d].every", i), "must be at least 1s, got %q", iv.Every)
			}
			var offset time.Duration
			if iv.Offset != "" {
				if offset, err = parseDuration(fmt.Sprintf("intervals[%d].offset", i), iv.Offset, true); err != nil {
					return err
				}
				if offset >= every {
					return models.FieldError(fmt.Sprintf("intervals[%d].offset", i), "must be less than every (%s), got %q", every, iv.Offset)
				}
			}
			spec.Intervals = append(spec.Intervals, client.ScheduleIntervalSpec{Every: every, Offset: offset})
		}
	}
	if in.TimeZone != nil {
		tz := strings.TrimSpace(*in.TimeZone)
		if _, err := time.LoadLocation(tz); err != nil || strings.EqualFold(tz, "local") {
			return models.FieldError("time_zone", "must be an IANA time zone name such as \"Europe/Paris\" or \"UTC\", got %q", *in.TimeZone)
		}
		spec.TimeZoneName = tz
	}
	if in.Jitter != nil {
		var d time.Duration
		if *in.Jitter != "" {
			var err error
			if d, err = parseDuration("jitter", *in.Jitter, true); err != nil {
				return err
			}
		}
		spec.Jitter = d
	}
	if in.Overlap != nil {
		p, ok := overlapPolicies[*in.Overlap]
		if !ok {
			return models.FieldError("overlap", "must be one of %s; got %q", strings.Join(overlapNames, ", "), *in.Overlap)
		}
		policy.Overlap = p
	} else if creating {
		policy.Overlap = enumspb.SCHEDULE_OVERLAP_POLICY_SKIP
	}
	if in.Config != nil {
		if in.Config.MaxParallelTeams < 0 {
			return models.FieldError("execution_config.max_parallel_teams", "must be 0 (the hierarchy's) or more, got %d", in.Config.MaxParallelTeams)
		}
		if err := checkBudget(in.Config.Budget, h); err != nil {
			return err
		}
		run.MaxParallelTeams, run.Budget = in.Config.MaxParallelTeams, in.Config.Budget
	}
	return nil
}

var (
	cronField      = regexp.MustCompile(`^[0-9A-Za-z*?/,#-]+$`)
	cronDescriptor = map[string]bool{"@yearly": true, "@annually": true, "@monthly": true, "@weekly": true, "@daily": true, "@midnight": true, "@hourly": true}
	// cronRanges bound the numbers of the five standard fields.
	cronRanges = [5][2]int{{0, 59}, {0, 23}, {1, 31}, {1, 12}, {0, 7}}
	cronNumber = regexp.MustCompile(`[0-9]+`)
)

// checkCron checks a cron expression's shape before Temporal sees it, so
// that a bad one is a 400 naming its field: a descriptor (@daily, @every
// 5m…), or 5 fields (minute hour day-of-month month day-of-week), or 6-7
// with seconds first and a year last, as Temporal reads them; in the
// 5-field form every number must be in its field's range. Temporal checks
// the rest (and its refusal is still a 400 on cron).
func checkCron(expr string) error {
	e := strings.TrimSpace(expr)
	if e == "" {
		return errors.New("it is empty")
	}
	if strings.HasPrefix(e, "@") {
		if cronDescriptor[e] {
			return nil
		}
		if rest, ok := strings.CutPrefix(e, "@every "); ok {
			if d, err := time.ParseDuration(strings.TrimSpace(rest)); err != nil || d <= 0 {
				return errors.New("@every needs a positive duration")
			}
			return nil
		}
		return errors.New("unknown descriptor")
	}
	fields := strings.Fields(e)
	if len(fields) < 5 || len(fields) > 7 {
		return fmt.Errorf("it has %d fields; want 5 (minute hour day-of-month month day-of-week)", len(fields))
	}
	for _, f := range fields {
		if !cronField.MatchString(f) {
			return fmt.Errorf("field %q has characters a cron field cannot have", f)
		}
	}
	if len(fields) == 5 {
		for i, f := range fields {
			for _, n := range cronNumber.FindAllString(f, -1) {
				v, _ := strconv.Atoi(n)
				if strings.Contains(f, "/") && strings.HasSuffix(f, "/"+n) {
					continue // a step, not a value
				}
				if v < cronRanges[i][0] || v > cronRanges[i][1] {
					return fmt.Errorf("%d is out of range %d-%d in field %d", v, cronRanges[i][0], cronRanges[i][1], i+1)
				}
			}
		}
	}
	return nil
}

// scheduleAction is the action of a schedule: it starts the scheduled
// start with in, under a workflow id Temporal suffixes with each action's
// time.
func (r *Runs) scheduleAction(id string, h *models.Hierarchy, in models.ScheduledRunInput) *client.ScheduleWorkflowAction {
	a := &client.ScheduleWorkflowAction{
		ID:            models.ScheduledRunWorkflowPrefix + id,
		Workflow:      models.ScheduledRunWorkflowName,
		Args:          []any{in},
		TaskQueue:     r.TaskQueue,
		StaticSummary: fmt.Sprintf("Schedule %s: %s: %s", id, h.Name, oneLine(in.Task, 200)),
	}
	var attrs []temporal.SearchAttributeUpdate
	if r.Options.SearchAttributes {
		attrs = append(attrs, models.SearchHierarchyID.ValueSet(h.ID))
	}
	if r.TenantSearchAttribute {
		attrs = append(attrs, models.SearchTenantID.ValueSet(tenantOrDefault(h.TenantID)))
	}
	if len(attrs) > 0 {
		a.TypedSearchAttributes = temporal.NewSearchAttributes(attrs...)
	}
	return a
}

// scheduleError maps Temporal's answers about a schedule: not found (gone
// from Temporal though recorded here) is SCHEDULE_NOT_FOUND, a refused
// spec is a 400 on cron (every other field was checked), the rest 503.
func scheduleError(id string, err error) error {
	var nf *serviceerror.NotFound
	var bad *serviceerror.InvalidArgument
	switch {
	case errors.As(err, &nf):
		return &models.Error{Code: models.CodeScheduleNotFound, Field: "id", Message: fmt.Sprintf("schedule %q not found", id), Err: err}
	case errors.As(err, &bad):
		return &models.Error{Code: models.CodeInvalidParameters, Field: "cron", Message: "cron: Temporal refused the schedule's spec: " + bad.Message, Err: err}
	}
	var e *models.Error
	if errors.As(err, &e) {
		return err
	}
	return &models.Error{Code: models.CodeUnavailable, Message: "could not reach the schedule in Temporal: Temporal is unavailable", Err: err}
}

// visibleSchedule loads a schedule the request may see; another tenant's
// is SCHEDULE_NOT_FOUND.
func (s *Server) visibleSchedule(ctx context.Context, id string) (*store.Schedule, error) {
	tenant := tenantFilter(ctx)
	if tenant == noTenant {
		return nil, models.Errorf(models.CodeScheduleNotFound, "schedule %q not found", id)
	}
	return s.store.GetSchedule(ctx, tenant, id)
}

func (s *Server) createSchedule(c *gin.Context) {
	var in createScheduleInput
	if err := decodeJSON(c, &in); err != nil {
		s.writeError(c, err)
		return
	}
	hierarchyID := strings.TrimSpace(in.HierarchyID)
	if hierarchyID == "" {
		s.writeError(c, models.FieldError("hierarchy_id", "is required"))
		return
	}
	ctx := c.Request.Context()
	h, err := s.visibleHierarchy(ctx, hierarchyID)
	if err != nil {
		s.writeError(c, err)
		return
	}
	spec := client.ScheduleSpec{}
	policy := client.SchedulePolicies{}
	run := models.ScheduledRunInput{HierarchyID: h.ID}
	if err := in.apply(&spec, &policy, &run, h, true); err != nil {
		s.writeError(c, err)
		return
	}
	// A schedule whose runs could not reach their models would only fail,
	// every time: refuse it now, as runs/start would.
	if _, err := s.runs.checkModels(h); err != nil {
		s.writeError(c, err)
		return
	}
	// Likewise a cost budget over a model without a price (checkPrices).
	budget, field := run.Budget, "execution_config.budget"
	if budget == nil {
		budget, field = h.Budget, "budget"
	}
	if err := s.runs.checkPrices(budget, field, h); err != nil {
		s.writeError(c, err)
		return
	}
	id := models.ScheduleIDPrefix + models.NewID()
	run.ScheduleID = id
	sc := &store.Schedule{ID: id, TenantID: tenantOrDefault(h.TenantID), HierarchyID: h.ID, Cron: spec.CronExpressions}
	// Recorded first: a scheduled start finds its schedule's tenant here.
	if err := s.store.CreateSchedule(ctx, sc); err != nil {
		s.writeError(c, err)
		return
	}
	note := ""
	if in.Note != nil {
		note = *in.Note
	}
	_, err = s.runs.Temporal.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:                    id,
		Spec:                  spec,
		Action:                s.runs.scheduleAction(id, h, run),
		Overlap:               policy.Overlap,
		CatchupWindow:         scheduleCatchupWindow,
		Paused:                in.Paused,
		Note:                  note,
		Memo:                  map[string]any{"tenant_id": sc.TenantID, "hierarchy_id": h.ID},
		TypedSearchAttributes: s.runs.scheduleSearchAttributes(sc.TenantID),
	})
	if err != nil {
		_ = s.store.DeleteSchedule(context.WithoutCancel(ctx), id)
		s.writeError(c, scheduleError(id, err))
		return
	}
	view, err := s.describeSchedule(ctx, sc)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, view)
}

// scheduleSearchAttributes are the schedule's own search attributes
// (temporal schedule list --query 'TenantId="acme"').
func (r *Runs) scheduleSearchAttributes(tenant string) temporal.SearchAttributes {
	if !r.TenantSearchAttribute {
		return temporal.SearchAttributes{}
	}
	return temporal.NewSearchAttributes(models.SearchTenantID.ValueSet(tenant))
}

// scheduleView is a schedule as answers show it.
type scheduleView struct {
	ID              string           `json:"id"`
	TenantID        string           `json:"tenant_id"`
	HierarchyID     string           `json:"hierarchy_id"`
	Task            string           `json:"task"`
	Cron            []string         `json:"cron"`
	Intervals       []intervalInput  `json:"intervals"`
	TimeZone        string           `json:"time_zone"`
	Jitter          string           `json:"jitter"`
	Overlap         string           `json:"overlap"`
	Paused          bool             `json:"paused"`
	Note            string           `json:"note"`
	ExecutionConfig *scheduleRunConf `json:"execution_config,omitempty"`
	CreatedAt       time.Time        `json:"created_at"`
	Info            scheduleInfoView `json:"info"`
}

// scheduleInfoView is what Temporal tells of a schedule's actions. The
// workflow ids are the scheduled starts' (whose child is the run; list
// the runs with runs/list and schedule_id).
type scheduleInfoView struct {
	NumActions             int                  `json:"num_actions"`
	NumSkippedOverlap      int                  `json:"num_skipped_overlap"`
	NumMissedCatchupWindow int                  `json:"num_missed_catchup_window"`
	Running                []string             `json:"running_workflow_ids"`
	RecentActions          []scheduleActionView `json:"recent_actions"`
	NextActionTimes        []time.Time          `json:"next_action_times"`
}

type scheduleActionView struct {
	ScheduleTime time.Time `json:"schedule_time"`
	ActualTime   time.Time `json:"actual_time"`
	WorkflowID   string    `json:"workflow_id"`
}

// describeSchedule reads the schedule from Temporal, the source of truth
// of its spec and state.
func (s *Server) describeSchedule(ctx context.Context, sc *store.Schedule) (*scheduleView, error) {
	d, err := s.runs.Temporal.ScheduleClient().GetHandle(ctx, sc.ID).Describe(ctx)
	if err != nil {
		return nil, scheduleError(sc.ID, err)
	}
	v := &scheduleView{ID: sc.ID, TenantID: sc.TenantID, HierarchyID: sc.HierarchyID, CreatedAt: sc.CreatedAt, Cron: []string{}, Intervals: []intervalInput{}}
	if spec := d.Schedule.Spec; spec != nil && len(spec.Calendars)+len(spec.CronExpressions) == 0 {
		sc = &store.Schedule{ID: sc.ID, TenantID: sc.TenantID, HierarchyID: sc.HierarchyID, CreatedAt: sc.CreatedAt} // no cron left
	}
	if spec := d.Schedule.Spec; spec != nil {
		// Temporal answers cron expressions compiled into calendars:
		// they are shown as given, from the store.
		v.Cron = append(v.Cron, sc.Cron...)
		for _, iv := range spec.Intervals {
			v.Intervals = append(v.Intervals, intervalInput{Every: iv.Every.String(), Offset: iv.Offset.String()})
		}
		v.TimeZone, v.Jitter = spec.TimeZoneName, spec.Jitter.String()
	}
	if p := d.Schedule.Policy; p != nil {
		v.Overlap = overlapName(p.Overlap)
	}
	if st := d.Schedule.State; st != nil {
		v.Paused, v.Note = st.Paused, st.Note
	}
	if in, err := scheduledInput(d.Schedule.Action); err == nil {
		v.Task = in.Task
		if in.MaxParallelTeams != 0 || in.Budget != nil {
			v.ExecutionConfig = &scheduleRunConf{MaxParallelTeams: in.MaxParallelTeams, Budget: in.Budget}
		}
	}
	info := d.Info
	v.Info = scheduleInfoView{NumActions: info.NumActions, NumSkippedOverlap: info.NumActionsSkippedOverlap, NumMissedCatchupWindow: info.NumActionsMissedCatchupWindow,
		Running: []string{}, RecentActions: []scheduleActionView{}, NextActionTimes: info.NextActionTimes}
	for _, w := range info.RunningWorkflows {
		v.Info.Running = append(v.Info.Running, w.WorkflowID)
	}
	for _, a := range info.RecentActions {
		av := scheduleActionView{ScheduleTime: a.ScheduleTime, ActualTime: a.ActualTime}
		if a.StartWorkflowResult != nil {
			av.WorkflowID = a.StartWorkflowResult.WorkflowID
		}
		v.Info.RecentActions = append(v.Info.RecentActions, av)
	}
	if v.Info.NextActionTimes == nil {
		v.Info.NextActionTimes = []time.Time{}
	}
	return v, nil
}

// scheduledInput decodes the scheduled start's input from a described
// action (Temporal answers it encoded).
func scheduledInput(a client.ScheduleAction) (models.ScheduledRunInput, error) {
	var in models.ScheduledRunInput
	wa, ok := a.(*client.ScheduleWorkflowAction)
	if !ok || len(wa.Args) != 1 {
		return in, errors.New("not a scheduled start")
	}
	switch arg := wa.Args[0].(type) {
	case *commonpb.Payload:
		err := converter.GetDefaultDataConverter().FromPayload(arg, &in)
		return in, err
	case models.ScheduledRunInput:
		return arg, nil
	}
	return in, errors.New("not a scheduled start")
}

func (s *Server) getSchedule(c *gin.Context) {
	id, valid := readID[scheduleIDInput](s, c)
	if !valid {
		return
	}
	ctx := c.Request.Context()
	sc, err := s.visibleSchedule(ctx, id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	view, err := s.describeSchedule(ctx, sc)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, view)
}

func (s *Server) listSchedules(c *gin.Context) {
	var in listSchedulesInput
	f, valid := s.readPage(c, &in)
	if !valid {
		return
	}
	ctx := c.Request.Context()
	f.Tenant = tenantFilter(ctx)
	list, total, err := s.store.ListSchedules(ctx, f, strings.TrimSpace(in.HierarchyID))
	if err != nil {
		s.writeError(c, err)
		return
	}
	items := make([]*scheduleView, 0, len(list))
	for _, sc := range list {
		view, err := s.describeSchedule(ctx, sc)
		if err != nil {
			s.writeError(c, err)
			return
		}
		items = append(items, view)
	}
	ok(c, gin.H{"items": items, "total": total, "page": f.Page, "page_size": f.PageSize})
}

// scheduleControl runs do on the visible schedule's handle and answers the
// schedule as it is after.
func (s *Server) scheduleControl(c *gin.Context, id string, do func(context.Context, client.ScheduleHandle) error) {
	ctx := c.Request.Context()
	sc, err := s.visibleSchedule(ctx, id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if err := do(ctx, s.runs.Temporal.ScheduleClient().GetHandle(ctx, sc.ID)); err != nil {
		s.writeError(c, scheduleError(sc.ID, err))
		return
	}
	view, err := s.describeSchedule(ctx, sc)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, view)
}

func (s *Server) pauseSchedule(c *gin.Context) {
	in, id, valid := readIDBody[scheduleNoteInput](s, c)
	if !valid {
		return
	}
	s.scheduleControl(c, id, func(ctx context.Context, h client.ScheduleHandle) error {
		return h.Pause(ctx, client.SchedulePauseOptions{Note: firstNonEmpty(in.Note, "paused through the executor API")})
	})
}

func (s *Server) unpauseSchedule(c *gin.Context) {
	in, id, valid := readIDBody[scheduleNoteInput](s, c)
	if !valid {
		return
	}
	s.scheduleControl(c, id, func(ctx context.Context, h client.ScheduleHandle) error {
		return h.Unpause(ctx, client.ScheduleUnpauseOptions{Note: firstNonEmpty(in.Note, "unpaused through the executor API")})
	})
}

// triggerSchedule takes the schedule's action now, under its overlap
// policy (or the one given): a skip policy with a run going starts none.
func (s *Server) triggerSchedule(c *gin.Context) {
	in, id, valid := readIDBody[triggerScheduleInput](s, c)
	if !valid {
		return
	}
	var overlap enumspb.ScheduleOverlapPolicy
	if in.Overlap != "" {
		p, found := overlapPolicies[in.Overlap]
		if !found {
			s.writeError(c, models.FieldError("overlap", "must be one of %s; got %q", strings.Join(overlapNames, ", "), in.Overlap))
			return
		}
		overlap = p
	}
	s.scheduleControl(c, id, func(ctx context.Context, h client.ScheduleHandle) error {
		return h.Trigger(ctx, client.ScheduleTriggerOptions{Overlap: overlap})
	})
}

// updateSchedule changes what the update gives; runs already started keep
// what they started with.
func (s *Server) updateSchedule(c *gin.Context) {
	in, id, valid := readIDBody[updateScheduleInput](s, c)
	if !valid {
		return
	}
	ctx := c.Request.Context()
	sc, err := s.visibleSchedule(ctx, id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	h, err := s.store.GetTenantHierarchy(ctx, sc.TenantID, sc.HierarchyID)
	if err != nil {
		s.writeError(c, err)
		return
	}
	var applyErr error
	err = s.runs.Temporal.ScheduleClient().GetHandle(ctx, sc.ID).Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(u client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			sched := u.Description.Schedule
			if sched.Spec == nil {
				sched.Spec = &client.ScheduleSpec{}
			}
			if sched.Policy == nil {
				sched.Policy = &client.SchedulePolicies{}
			}
			run, err := scheduledInput(sched.Action)
			if err != nil {
				applyErr = models.Errorf(models.CodeInvalidConfig, "schedule %q does not start runs of this service", sc.ID)
				return nil, applyErr
			}
			// Cron expressions come back compiled (Calendars); apply
			// leaves the spec alone unless cron or intervals are given.
			if applyErr = in.apply(sched.Spec, sched.Policy, &run, h, false); applyErr != nil {
				return nil, applyErr
			}
			if in.Note != nil && sched.State != nil {
				sched.State.Note = *in.Note
			}
			sched.Action = s.runs.scheduleAction(sc.ID, h, run)
			return &client.ScheduleUpdate{Schedule: &sched}, nil
		},
	})
	if applyErr != nil {
		s.writeError(c, applyErr)
		return
	}
	if err != nil {
		s.writeError(c, scheduleError(sc.ID, err))
		return
	}
	if in.Cron != nil || in.Intervals != nil {
		sc.Cron = in.Cron
		if err := s.store.SetScheduleCron(ctx, sc.ID, in.Cron); err != nil {
			s.writeError(c, err)
			return
		}
	}
	view, err := s.describeSchedule(ctx, sc)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, view)
}

// deleteSchedule deletes the schedule in Temporal and forgets it; runs it
// started go on and stay listed with their schedule_id.
func (s *Server) deleteSchedule(c *gin.Context) {
	id, valid := readID[scheduleIDInput](s, c)
	if !valid {
		return
	}
	ctx := c.Request.Context()
	sc, err := s.visibleSchedule(ctx, id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	err = s.runs.Temporal.ScheduleClient().GetHandle(ctx, sc.ID).Delete(ctx)
	var nf *serviceerror.NotFound
	if err != nil && !errors.As(err, &nf) {
		s.writeError(c, scheduleError(sc.ID, err))
		return
	}
	if err := s.store.DeleteSchedule(ctx, sc.ID); err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, gin.H{"id": sc.ID, "deleted": true})
}

// ScheduledStarts is the scheduled start's activity, registered on workers
// as models.ActivityPrepareScheduledRun: it stores a schedule's run with
// runs/start's checks and answers its workflow's input.
type ScheduledStarts struct {
	Runs *Runs
}

// PrepareScheduledRun stores the run of a schedule's action. The run's key
// is the scheduled start's Temporal run id, so a retry after a stored run
// replaces that pending row instead of leaving a second one (its workflow
// starts only after this activity has answered).
func (ss *ScheduledStarts) PrepareScheduledRun(ctx context.Context, in models.ScheduledRunInput) (*models.ScheduledRunStart, error) {
	r := ss.Runs
	refused := func(err error) error {
		return temporal.NewNonRetryableApplicationError(err.Error(), models.ErrScheduledStartRefused, nil)
	}
	sc, err := r.Store.GetSchedule(ctx, "", in.ScheduleID)
	if err != nil {
		if models.ErrorCode(err) == models.CodeScheduleNotFound {
			return nil, refused(err)
		}
		return nil, err
	}
	h, err := r.Store.GetTenantHierarchy(ctx, sc.TenantID, sc.HierarchyID)
	if err != nil {
		if models.ErrorCode(err) == models.CodeHierarchyNotFound {
			return nil, refused(err)
		}
		return nil, err
	}
	key := activity.GetInfo(ctx).WorkflowExecution.RunID
	if old, err := r.Store.GetRun(ctx, key); err == nil && (old.Status == models.RunPending || old.Status == models.RunQueued) {
		_ = r.Store.DeleteRun(ctx, key)
	}
	p, err := r.prepare(ctx, h, in.Task, StartOptions{MaxParallelTeams: in.MaxParallelTeams, Budget: in.Budget, ScheduleID: sc.ID, key: key})
	if p != nil {
		// Queued runs its admission let in are told (docs/queue.md).
		r.signalAdmitted(ctx, p.admitted)
	}
	if err != nil {
		var e *models.Error
		if errors.As(err, &e) && e.Code.HTTPStatus < 500 {
			return nil, refused(err)
		}
		return nil, err
	}
	attrs := map[string]string{}
	if r.Options.SearchAttributes {
		attrs[models.SearchHierarchyID.GetName()] = h.ID
		attrs[models.SearchHierarchyName.GetName()] = h.Name
		attrs[models.SearchRunStatus.GetName()] = models.RunPending
	}
	if r.TenantSearchAttribute {
		attrs[models.SearchTenantID.GetName()] = p.run.TenantID
	}
	return &models.ScheduledRunStart{RunID: p.run.PublicID, WorkflowID: p.run.WorkflowID, Input: p.input, StaticSummary: p.summary, StaticDetails: p.details, SearchAttributes: attrs}, nil
}
