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

// CodeSequenceNotForkable refuses runs/fork at an event that is not a
// fork point; the message names the nearest points before and after. It
// keeps INVALID_PARAMETERS's numeric code, as the other 400s do.
var CodeSequenceNotForkable = Code{"SEQUENCE_NOT_FORKABLE", 40001, 400}

// CodeBudgetExceeded is a run error only (in a run's errors, never an HTTP
// answer): the run's execution_config.budget was spent with on_exceeded
// "fail". 402 Payment Required is the status that names spending.
var CodeBudgetExceeded = Code{"BUDGET_EXCEEDED", 40201, 402}

// AllCodes lists the vocabulary in the order docs/errors.md documents it.
func AllCodes() []Code {
	return []Code{
		CodeInvalidParameters, CodeInvalidConfig, CodeInvalidDependencies,
		CodeProviderNotSupported, CodeMissingAPIKey, CodeSequenceNotForkable,
		CodeInvalidAPIKey, CodeBudgetExceeded, CodePermissionDenied,
		CodeHierarchyNotFound, CodeExecutionNotFound, CodeSubAgentNotFound, CodeRouteNotFound,
		CodeExecutionInProgress, CodeExecutionFinished, CodeTeamNotRunning, CodeAlreadyExists, CodeIdempotencyKeyReused, CodeResourceLimitExceeded,
		CodeUnsupportedMediaType, CodeRateLimited,
		CodeSystemError, CodeExecutionFailed, CodeUnavailable, CodeExecutionTimeout,
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
