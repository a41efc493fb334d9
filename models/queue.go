package models

// The admission queue and thread policies (issue 26, items 3 and 4;
// docs/queue.md).
const (
	// RunQueued is a run whose workflow has started but waits for
	// admission: its tenant is at MAX_CONCURRENT_RUNS_PER_TENANT, or an
	// earlier run of its thread is unfinished. It is not terminal.
	RunQueued = "queued"

	// ActionQueued is lifecycle.queued: the run waits for admission.
	ActionQueued = "queued"

	// SignalAdmit tells a queued run's workflow that it may have been
	// admitted; the workflow asks the store (ActivityCheckAdmission).
	SignalAdmit = "admit"
	// ActivityCheckAdmission is the queued run's activity (registered by
	// the worker by this name): it admits what fits of the run's tenant
	// and answers whether the run is admitted, with its previous run's
	// context when it is a follow-up.
	ActivityCheckAdmission = "CheckAdmission"

	// OnLimitQueue and OnLimitReject are runs/start's on_limit: what a
	// start beyond the tenant's concurrency limit does.
	OnLimitQueue  = "queue"
	OnLimitReject = "reject"

	// Multitask strategies: what a follow-up start does when its thread
	// has an unfinished run (runs/start's multitask_strategy).
	MultitaskReject    = "reject"
	MultitaskEnqueue   = "enqueue"
	MultitaskInterrupt = "interrupt"
	MultitaskRollback  = "rollback"
)

// MultitaskStrategies lists the multitask strategies.
var MultitaskStrategies = []string{MultitaskReject, MultitaskEnqueue, MultitaskInterrupt, MultitaskRollback}

// QueueInfo is what a queued run's workflow is started with: why it waits
// and where it stood in its tenant's queue then (for lifecycle.queued).
type QueueInfo struct {
	// Reason is "concurrency_limit" or "thread_busy".
	Reason   string `json:"reason"`
	Position int    `json:"position"`
}

// Queue reasons (QueueInfo.Reason).
const (
	QueueReasonLimit  = "concurrency_limit"
	QueueReasonThread = "thread_busy"
)

// AdmissionInput asks whether a queued run is admitted.
type AdmissionInput struct {
	RunID string `json:"run_id"`
}

// AdmissionResult answers AdmissionInput. Previous is the context of the
// run a follow-up follows, built at admission (the run it follows had
// no final answer when it was queued).
type AdmissionResult struct {
	Admitted bool         `json:"admitted"`
	Previous *PreviousRun `json:"previous,omitempty"`
}
