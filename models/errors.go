package models

import (
	"errors"
	"fmt"
)

// Code is one entry of the service's error vocabulary. Every error a client
// can see carries one: Name is the business code of the original design
// (spec 001, e.g. "TEAM_NOT_FOUND"), Numeric is the numeric code of the
// executor contract (contract 002, e.g. 40001) and HTTPStatus is the status
// the API answers with. The api package is the only place that turns a Code
// into a response.
type Code struct {
	Name       string
	Numeric    int
	HTTPStatus int
}

// The error vocabulary. The "Error codes" table of docs/errors.md is generated from
// the same list (see AllCodes); keep both in step.
var (
	CodeInvalidParameters     = Code{"INVALID_PARAMETERS", 40001, 400}
	CodeInvalidConfig         = Code{"INVALID_CONFIG", 40001, 400}
	CodeInvalidDependencies   = Code{"INVALID_DEPENDENCIES", 40001, 400}
	CodeProviderNotSupported  = Code{"PROVIDER_NOT_SUPPORTED", 40001, 400}
	CodeMissingAPIKey         = Code{"MISSING_API_KEY", 40001, 400}
	CodeHierarchyNotFound     = Code{"TEAM_NOT_FOUND", 40401, 404}
	CodeExecutionNotFound     = Code{"EXECUTION_NOT_FOUND", 40402, 404}
	CodeSubAgentNotFound      = Code{"SUBAGENT_NOT_FOUND", 40403, 404}
	CodeRouteNotFound         = Code{"NOT_FOUND", 40404, 404}
	CodeInvalidAPIKey         = Code{"INVALID_API_KEY", 40101, 401}
	CodePermissionDenied      = Code{"PERMISSION_DENIED", 40301, 403}
	CodeIdempotencyKeyReused  = Code{"IDEMPOTENCY_KEY_REUSED", 40903, 409}
	CodeUnsupportedMediaType  = Code{"UNSUPPORTED_MEDIA_TYPE", 41501, 415}
	CodeRateLimited           = Code{"RATE_LIMIT_EXCEEDED", 42901, 429}
	CodeExecutionInProgress   = Code{"EXECUTION_IN_PROGRESS", 40901, 409}
	CodeAlreadyExists         = Code{"TEAM_ALREADY_EXISTS", 40902, 409}
	CodeResourceLimitExceeded = Code{"RESOURCE_LIMIT_EXCEEDED", 41301, 413}
	CodeSystemError           = Code{"SYSTEM_ERROR", 50001, 500}
	CodeUnavailable           = Code{"SERVICE_UNAVAILABLE", 50301, 503}
	CodeExecutionFailed       = Code{"EXECUTION_FAILED", 50002, 500}
	CodeExecutionTimeout      = Code{"EXECUTION_TIMEOUT", 50401, 504}
)

// CodeExecutionFinished refuses what only a live run allows (cancel). It
// keeps EXECUTION_IN_PROGRESS's numeric code and HTTP status, which
// contract 002 clients already switch on for "the run's state does not
// allow this"; the business code says what happened.
var CodeExecutionFinished = Code{"EXECUTION_ALREADY_FINISHED", 40901, 409}

// CodeTeamNotRunning refuses cancelling a team of a running run whose turn
// is not at work now (not started yet, or already ended).
var CodeTeamNotRunning = Code{"TEAM_NOT_RUNNING", 40904, 409}

// CodeStreamingDisabled refuses spec 001's event stream of an execution
// started with streaming off (execution_config.stream_events false, or its
// team's global_config.enable_streaming false): its client polls instead.
var CodeStreamingDisabled = Code{"STREAMING_DISABLED", 40905, 409}

// CodeSequenceNotForkable refuses runs/fork at an event that is not a
// fork point; the message names the nearest points before and after. It
// keeps INVALID_PARAMETERS's numeric code, as the other 400s do.
var CodeSequenceNotForkable = Code{"SEQUENCE_NOT_FORKABLE", 40001, 400}

// CodeBudgetExceeded is a run error only (in a run's errors, never an HTTP
// answer): the run's execution_config.budget was spent with on_exceeded
// "fail". 402 Payment Required is the status that names spending.
var CodeBudgetExceeded = Code{"BUDGET_EXCEEDED", 40201, 402}

// CodeProviderKeyRejected says a model provider refused the service's own
// key for it (HTTP 401 or 403 from the provider): the operator must fix or
// rotate the key (docs/providers.md), and retrying will not help. It is a
// run error (a run's errors, its lifecycle.failed event) and the answer of
// a results formatting that met it. Spec 001 lists INVALID_API_KEY for
// this, but here that code means the caller's key to this API (401), which
// a client must not confuse with the operator's provider key; 502 Bad
// Gateway says an upstream refused the service.
var CodeProviderKeyRejected = Code{"PROVIDER_KEY_REJECTED", 50201, 502}

// CodeArtifactNotFound answers a download of an artifact id that does not
// exist or belongs to another tenant (the two are answered alike).
var CodeArtifactNotFound = Code{"ARTIFACT_NOT_FOUND", 40405, 404}

// CodeArtifactTooLarge refuses storing a file over ARTIFACT_MAX_BYTES, or
// one that would take a run's files over ARTIFACT_RUN_MAX_BYTES. It is
// never an HTTP answer today: it reaches clients in the system.warning
// event of the file that was not stored. It keeps
// RESOURCE_LIMIT_EXCEEDED's numeric code and status.
var CodeArtifactTooLarge = Code{"ARTIFACT_TOO_LARGE", 41301, 413}

// CodeMCPServerNotFound answers an MCP server id or name that does not
// exist or belongs to another tenant (the two are answered alike).
var CodeMCPServerNotFound = Code{"MCP_SERVER_NOT_FOUND", 40406, 404}

// CodeScheduleNotFound answers a schedule id that does not exist or
// belongs to another tenant (the two are answered alike).
var CodeScheduleNotFound = Code{"SCHEDULE_NOT_FOUND", 40407, 404}

// CodeWebhookNotFound answers a webhook endpoint or delivery id that does
// not exist or belongs to another tenant (the two are answered alike).
var CodeWebhookNotFound = Code{"WEBHOOK_NOT_FOUND", 40408, 404}

// CodeMemoryNotFound answers a memory item (namespace and key) that does
// not exist, has expired or belongs to another tenant (answered alike).
var CodeMemoryNotFound = Code{"MEMORY_NOT_FOUND", 40409, 404}

// AllCodes lists the vocabulary in the order docs/errors.md documents it.
func AllCodes() []Code {
	return []Code{
		CodeInvalidParameters, CodeInvalidConfig, CodeInvalidDependencies,
		CodeProviderNotSupported, CodeMissingAPIKey, CodeSequenceNotForkable,
		CodeInvalidAPIKey, CodeBudgetExceeded, CodePermissionDenied,
		CodeHierarchyNotFound, CodeExecutionNotFound, CodeSubAgentNotFound, CodeArtifactNotFound, CodeMCPServerNotFound, CodeScheduleNotFound, CodeWebhookNotFound, CodeMemoryNotFound, CodeRouteNotFound,
		CodeExecutionInProgress, CodeExecutionFinished, CodeTeamNotRunning, CodeStreamingDisabled, CodeAlreadyExists, CodeIdempotencyKeyReused, CodeResourceLimitExceeded, CodeArtifactTooLarge,
		CodeUnsupportedMediaType, CodeRateLimited,
		CodeSystemError, CodeExecutionFailed, CodeProviderKeyRejected, CodeUnavailable, CodeExecutionTimeout,
	}
}

// Failure types: the type strings of the Temporal application errors that
// activities and workflows raise, and that retry policies, workflows and
// the API tell apart. They are recorded in run histories, so a string never
// changes (committed histories under workflows/testdata replay against
// them); a new failure goes in AllFailureTypes and in the "Failure types"
// table of docs/errors.md.
const (
	// ErrLLMRejected: the provider refused the request (a bad request;
	// runs from before ErrLLMKeyRejected also a bad key); never retried.
	ErrLLMRejected = "LLMRequestRejected"
	// ErrLLMKeyRejected: the provider refused the service's key (HTTP 401
	// or 403); never retried, and the run's error code is
	// CodeProviderKeyRejected.
	ErrLLMKeyRejected = "LLMKeyRejected"
	// ErrLLMUnavailable: the provider failed or throttled; retried, with
	// the provider's Retry-After as the next delay.
	ErrLLMUnavailable = "LLMUnavailable"
	// ErrLLMTimeout: an LLM call timed out on every attempt.
	ErrLLMTimeout = "LLMTimeout"
	// ErrFormatMismatch: the model's answers never matched the output
	// template. Not retried: the same answers would fail the same way.
	ErrFormatMismatch = "FormatMismatch"
	// ErrFormatInvalidTemplate: the output template is not a usable JSON
	// object. Not retried.
	ErrFormatInvalidTemplate = "FormatInvalidTemplate"
	// ErrToolUnavailable: a tool failed transiently on its last attempt.
	ErrToolUnavailable = "ToolUnavailable"
	// ErrSubAgentUnavailable: LoadSubAgent found the sub-agent missing or
	// disabled. Not retried.
	ErrSubAgentUnavailable = "SubAgentUnavailable"
	// ErrSubAgentFailed: a SubAgentWorkflow failed; its details are a
	// SubAgentFailure.
	ErrSubAgentFailed = "SubAgentFailed"
	// ErrTeamFailed: a team failed, which fails the run.
	ErrTeamFailed = "TeamFailed"
	// ErrForkSeed: a fork's seed names a team the run's hierarchy lacks.
	ErrForkSeed = "ForkSeed"
	// ErrSteerRefused: a cancel_team or redirect on a run that cannot be
	// steered (ended, started before steering, an empty message).
	ErrSteerRefused = "SteerRefused"
	// ErrTeamNotRunning: a cancel_team of a team whose turn is not at work.
	ErrTeamNotRunning = "TeamNotRunning"
	// ErrUnknownTeam: a steering request naming no team of the run.
	ErrUnknownTeam = "UnknownTeam"
	// ErrUnknownAgent: a redirect naming no agent of the run.
	ErrUnknownAgent = "UnknownAgent"
	// ErrApprovalRefused: an approve or reject the gate does not take
	// (already resolved, or the wrong kind of edit).
	ErrApprovalRefused = "ApprovalRefused"
	// ErrApprovalUnknown: an approve or reject naming no gate of the run.
	ErrApprovalUnknown = "ApprovalUnknown"
	// ErrPauseRefused: a pause or resume of a run that cannot take it.
	ErrPauseRefused = "PauseRefused"
	// ErrScheduledStartRefused: a schedule's action could not start its
	// run (the schedule or hierarchy is gone, or runs/start's checks
	// refused it); not retried: the schedule's next action tries again.
	ErrScheduledStartRefused = "ScheduledStartRefused"
	// ErrWebhookFailed: a webhook delivery attempt got no 2xx answer (or
	// none at all); retried until WEBHOOK_RETRY_FOR closes.
	ErrWebhookFailed = "WebhookDeliveryFailed"
	// ErrWebhookRefused: a webhook delivery that no retry can help (the
	// network guard refused the address; the endpoint is disabled or
	// deleted). Not retried.
	ErrWebhookRefused = "WebhookRefused"
)

// AllFailureTypes lists every failure type a run's activities and
// workflows raise, in the order docs/errors.md documents them. A run that
// fails on its own error code (EXECUTION_TIMEOUT, BUDGET_EXCEEDED) uses the
// code's Name as the type; those two are included.
func AllFailureTypes() []string {
	return []string{
		ErrLLMRejected, ErrLLMKeyRejected, ErrLLMUnavailable, ErrLLMTimeout,
		ErrFormatMismatch, ErrFormatInvalidTemplate,
		ErrToolUnavailable, ErrSubAgentUnavailable, ErrSubAgentFailed,
		ErrTeamFailed, ErrForkSeed,
		ErrSteerRefused, ErrTeamNotRunning, ErrUnknownTeam, ErrUnknownAgent,
		ErrApprovalRefused, ErrApprovalUnknown, ErrPauseRefused,
		ErrScheduledStartRefused,
		ErrWebhookFailed, ErrWebhookRefused,
		CodeExecutionTimeout.Name, CodeBudgetExceeded.Name,
		ErrA2ATaskFailed, ErrA2ARefused, ErrA2AUnavailable,
	}
}

// Error is an error meant for the client: its Message is safe to show, and
// Field names the offending request field when there is one. Internal causes
// go in Err, which is logged but never sent.
type Error struct {
	Code    Code
	Message string
	Field   string
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code.Name, e.Message, e.Err)
	}
	return e.Code.Name + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds a client-facing error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// FieldError is a 400 INVALID_PARAMETERS error about one request field.
func FieldError(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidParameters, Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err, or CodeSystemError for anything that is
// not a client-facing *Error.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeSystemError
}

// ErrorMessage returns the client-safe message of err. Internal errors get a
// generic message so nothing about the implementation leaks.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal server error"
}
