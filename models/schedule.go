package models

// Names of the scheduled start (issue 26, item 2; docs/schedules.md). A
// Temporal schedule's action starts ScheduledRunWorkflow, whose one
// activity stores the run's row with the same checks as runs/start, and
// which then runs RunWorkflow as its child and lives as long as the run:
// so the schedule's overlap policy applies to the runs themselves.
const (
	ScheduledRunWorkflowName = "ScheduledRunWorkflow"
	// ActivityPrepareScheduledRun is the scheduled start's activity (the
	// API package's ScheduledStarts.PrepareScheduledRun), called by name:
	// the workflows do not import the API.
	ActivityPrepareScheduledRun = "PrepareScheduledRun"
	// ScheduleIDPrefix starts every schedule id; a schedule's action
	// workflow id is ScheduledRunWorkflowPrefix + the schedule id (Temporal
	// appends the time of each action).
	ScheduleIDPrefix           = "sched-"
	ScheduledRunWorkflowPrefix = "scheduled-"
)

// ScheduledRunInput is the input a schedule's action starts
// ScheduledRunWorkflow with: which schedule fired and what to run. It holds
// no secret and no tenant: the activity reads the schedule's tenant from
// the database, so an input edited in Temporal cannot move a run to
// another tenant.
type ScheduledRunInput struct {
	ScheduleID  string `json:"schedule_id"`
	HierarchyID string `json:"hierarchy_id"`
	Task        string `json:"task"`
	// MaxParallelTeams and Budget are the execution_config given to every
	// run of the schedule (zero and nil: the hierarchy's).
	MaxParallelTeams int     `json:"max_parallel_teams,omitempty"`
	Budget           *Budget `json:"budget,omitempty"`
}

// ScheduledRunStart is what the scheduled start's activity answers: the
// stored run's workflow id and input, and what its workflow starts with.
type ScheduledRunStart struct {
	RunID         string   `json:"run_id"`
	WorkflowID    string   `json:"workflow_id"`
	Input         RunInput `json:"input"`
	StaticSummary string   `json:"static_summary"`
	StaticDetails string   `json:"static_details"`
	// SearchAttributes are the run's keyword and text search attributes by
	// name, those the namespace has (as runs/start sets them).
	SearchAttributes map[string]string `json:"search_attributes,omitempty"`
}
