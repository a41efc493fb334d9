package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// errorBody is the executor API's (contract 002) error response: the numeric
// code clients switch on, a readable message, and additively the business
// code of the error vocabulary and the offending field.
type errorBody struct {
	Code      int    `json:"code"`
	Message   string `json:"message"`
	ErrorCode string `json:"error_code"`
	Field     string `json:"field,omitempty"`
}

// v1ErrorBody is spec 001's error response: success false, the business
// code, the error with its details, and a short human-readable message.
type v1ErrorBody struct {
	Success bool        `json:"success"`
	Code    string      `json:"code"`
	Error   v1ErrorInfo `json:"error"`
	Message string      `json:"message"`
}

type v1ErrorInfo struct {
	Message string         `json:"message"`
	Details map[string]any `json:"details"`
}

// codeMethodNotAllowed answers a known route called with the wrong method.
// It is not in the models vocabulary because no handler ever returns it;
// only the router does.
var codeMethodNotAllowed = models.Code{Name: "METHOD_NOT_ALLOWED", Numeric: 40501, HTTPStatus: 405}

// writeError is the one place that turns an error into an HTTP response, in
// the request's dialect (see markDialect): contract 002's envelope on the
// executor API, spec 001's on /api/v1. Both carry the same business code and
// HTTP status. Errors that are not *models.Error are internal: they are
// logged with their cause and answered with a generic 500 that leaks
// nothing.
func (s *Server) writeError(c *gin.Context, err error) {
	var e *models.Error
	if !errors.As(err, &e) && store.IsUnavailable(err) {
		// The database is down or restarting: the request may succeed
		// shortly, and the client is told so rather than that the service
		// failed. The message names no host, user or database.
		msg := "the database is unavailable; retry shortly"
		if store.IsBusy(err) {
			// Up but full (other clients hold its connections), even
			// after waiting: not an outage, and not said to be one.
			msg = "the database is busy; retry shortly"
		}
		err = &models.Error{Code: models.CodeUnavailable, Message: msg, Err: err}
		c.Header("Retry-After", "5")
	}
	code := models.ErrorCode(err)
	errors.As(err, &e)
	if code == models.CodeUnavailable && c.Writer.Header().Get("Retry-After") == "" && isTemporalOutage(err) {
		// Temporal is down or restarting, as for the database above.
		c.Header("Retry-After", temporalRetryAfter)
	}
	if code == models.CodeRateLimited && c.Writer.Header().Get("Retry-After") == "" {
		// A tenant's concurrent-run limit: runs take seconds to minutes,
		// so sooner would mostly be refused again.
		c.Header("Retry-After", "5")
	}
	if code.HTTPStatus >= 500 {
		s.log.ErrorContext(c.Request.Context(), "request failed", "method", c.Request.Method, "path", c.FullPath(), "error", err)
	}
	if isV1(c) {
		details := map[string]any{"timestamp": models.FormatTimestamp(time.Now())}
		if e != nil && e.Field != "" {
			details["field"] = e.Field
		}
		if key, ok := c.Get(v1ResourceKey); ok {
			if id := c.Param("id"); id != "" {
				details[key.(string)] = id
			}
		}
		abortWith(c, code.HTTPStatus, v1ErrorBody{
			Code:    code.Name,
			Error:   v1ErrorInfo{Message: models.ErrorMessage(err), Details: details},
			Message: v1ErrorSummary(code),
		})
		return
	}
	body := errorBody{Code: code.Numeric, Message: models.ErrorMessage(err), ErrorCode: code.Name}
	if e != nil {
		body.Field = e.Field
	}
	abortWith(c, code.HTTPStatus, body)
}

// abortWith ends the request with an error body: as JSON, or as an XML
// document when the request asked for XML results (negotiateResultFormat).
func abortWith(c *gin.Context, status int, body any) {
	if c.GetBool(xmlResponseKey) {
		writeXMLBody(c, status, body)
		return
	}
	c.AbortWithStatusJSON(status, body)
}

// Context keys of the request's dialect.
const (
	dialectKey    = "api.dialect"
	dialectV1     = "v1"
	v1ResourceKey = "api.v1.resource" // the name of the :id path parameter in error details
)

// markDialect marks requests under /api/v1 (spec 001's surface) so that
// writeError answers them in spec 001's envelope. It runs on every request,
// unknown routes and wrong methods included, which a group middleware would
// not see.
func markDialect(c *gin.Context) {
	if p := c.Request.URL.Path; p == V1Prefix || strings.HasPrefix(p, V1Prefix+"/") {
		c.Set(dialectKey, dialectV1)
	}
	c.Next()
}

func isV1(c *gin.Context) bool { return c.GetString(dialectKey) == dialectV1 }

// v1Resource names the :id path parameter of a spec 001 route group in
// error details ("team_id", "execution_id"), as spec 001's example does.
func v1Resource(name string) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Set(v1ResourceKey, name)
		c.Next()
	}
}

// v1ErrorSummary is the short top-level message of a spec 001 error; the
// specific one is in error.message.
func v1ErrorSummary(code models.Code) string {
	switch code.Name {
	case models.CodeHierarchyNotFound.Name:
		return "team not found"
	case models.CodeExecutionNotFound.Name:
		return "execution not found"
	case models.CodeInvalidParameters.Name, models.CodeInvalidConfig.Name:
		return "invalid request"
	case models.CodeInvalidDependencies.Name:
		return "invalid team dependencies"
	case models.CodeProviderNotSupported.Name:
		return "LLM provider not supported"
	case models.CodeMissingAPIKey.Name:
		return "LLM provider not configured"
	case models.CodeExecutionInProgress.Name:
		return "execution state does not allow this"
	case models.CodeExecutionFinished.Name:
		return "execution already finished"
	case models.CodeStreamingDisabled.Name:
		return "streaming is off for this execution"
	case models.CodeExecutionFailed.Name:
		return "execution failed"
	case models.CodeExecutionTimeout.Name:
		return "execution timed out"
	case models.CodeProviderKeyRejected.Name:
		return "LLM provider refused the key"
	case models.CodeResourceLimitExceeded.Name:
		return "resource limit exceeded"
	case models.CodeUnavailable.Name:
		return "service unavailable"
	case models.CodeRouteNotFound.Name:
		return "no such endpoint"
	case codeMethodNotAllowed.Name:
		return "method not allowed"
	case models.CodeSystemError.Name:
		return "internal error"
	}
	return strings.ToLower(strings.ReplaceAll(code.Name, "_", " "))
}

// decodeJSON reads the request body into dst, turning every way a body can
// be wrong into a client error that names the problem.
func decodeJSON(c *gin.Context, dst any) error {
	raw, err := io.ReadAll(c.Request.Body)
	if err != nil {
		return bodyError(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(dst); err != nil {
		return bodyError(err)
	}
	// A second value after the object means the body is not one JSON object.
	if dec.More() {
		return models.Errorf(models.CodeInvalidParameters, "malformed JSON: unexpected data after the request object")
	}
	return checkNUL(raw)
}

// checkNUL refuses a body with a NUL character (\u0000) in any string, key
// or value, naming the first such field by its JSON path
// ("teams[0].workers[1].role"): PostgreSQL cannot store one in text, and no
// field means anything with it. A raw NUL byte is malformed JSON already.
func checkNUL(raw []byte) error {
	// The only way to write NUL in JSON; a literal backslash-u0000 in a
	// string (written \\u0000) matches too, and the walk finds no NUL.
	if !bytes.Contains(raw, []byte(`\u0000`)) {
		return nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return bodyError(err)
	}
	if path, found := findNUL(v, ""); found {
		if path == "" {
			return models.Errorf(models.CodeInvalidParameters, "the request body must not contain a NUL character (\\u0000)")
		}
		return models.FieldError(path, "must not contain a NUL character (\\u0000)")
	}
	return nil
}

// findNUL returns the JSON path of the first string (or object key) in v
// that holds a NUL character, visiting keys in sorted order.
func findNUL(v any, path string) (string, bool) {
	switch v := v.(type) {
	case string:
		return path, strings.ContainsRune(v, 0)
	case []any:
		for i, e := range v {
			if p, found := findNUL(e, fmt.Sprintf("%s[%d]", path, i)); found {
				return p, true
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if strings.ContainsRune(k, 0) {
				// Name the key without its NUL, where it sits.
				return strings.ReplaceAll(p, "\x00", `\u0000`), true
			}
			if p, found := findNUL(v[k], p); found {
				return p, true
			}
		}
	}
	return "", false
}

// rejectNULParams refuses a NUL character in a path parameter or a query
// value, as checkNUL does in a body.
func (s *Server) rejectNULParams(c *gin.Context) {
	for _, p := range c.Params {
		if strings.ContainsRune(p.Value, 0) {
			s.writeError(c, models.FieldError(p.Key, "must not contain a NUL character"))
			return
		}
	}
	for k, vs := range c.Request.URL.Query() {
		for _, v := range vs {
			if strings.ContainsRune(k, 0) || strings.ContainsRune(v, 0) {
				s.writeError(c, models.FieldError(strings.ReplaceAll(k, "\x00", `\u0000`), "must not contain a NUL character"))
				return
			}
		}
	}
	c.Next()
}

func bodyError(err error) error {
	var (
		tooLarge  *http.MaxBytesError
		syntax    *json.SyntaxError
		typeError *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &tooLarge):
		return models.Errorf(models.CodeResourceLimitExceeded, "request body exceeds %d bytes", tooLarge.Limit)
	case errors.Is(err, io.EOF):
		return models.Errorf(models.CodeInvalidParameters, "request body is empty: a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return models.Errorf(models.CodeInvalidParameters, "malformed JSON: the body ends early")
	case errors.As(err, &syntax):
		return models.Errorf(models.CodeInvalidParameters, "malformed JSON at byte %d: %v", syntax.Offset, syntax)
	case errors.As(err, &typeError):
		field := typeError.Field
		if field == "" {
			return models.Errorf(models.CodeInvalidParameters, "request body must be a JSON object, got %s", typeError.Value)
		}
		return models.FieldError(field, "must be %s, got %s", jsonTypeName(typeError.Type.Kind().String()), typeError.Value)
	default:
		return models.Errorf(models.CodeInvalidParameters, "invalid request body: %v", err)
	}
}

func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "struct", "map", "ptr":
		return "an object"
	case "float32", "float64":
		return "a number"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	}
	return fmt.Sprintf("a %s", kind)
}

// idRequest is a request body that names one resource.
type idRequest interface{ id() (string, error) }

// readID decodes a body of type T and returns the id it names; on a bad
// body it writes the error and returns false.
func readID[T idRequest](s *Server, c *gin.Context) (string, bool) {
	_, id, valid := readIDBody[T](s, c)
	return id, valid
}

// readIDBody is readID for handlers that need the rest of the body too.
func readIDBody[T idRequest](s *Server, c *gin.Context) (T, string, bool) {
	var in T
	if err := decodeJSON(c, &in); err != nil {
		s.writeError(c, err)
		return in, "", false
	}
	id, err := in.id()
	if err != nil {
		s.writeError(c, err)
		return in, "", false
	}
	return in, id, true
}

// readPage decodes an optional list body into in (an empty body lists the
// first page) and returns its paging; on a bad body it writes the error
// and returns false.
func (s *Server) readPage(c *gin.Context, in interface {
	filter() (store.ListFilter, error)
}) (store.ListFilter, bool) {
	if c.Request.ContentLength != 0 {
		if err := decodeJSON(c, in); err != nil {
			s.writeError(c, err)
			return store.ListFilter{}, false
		}
	}
	f, err := in.filter()
	if err != nil {
		s.writeError(c, err)
		return store.ListFilter{}, false
	}
	return f, true
}
