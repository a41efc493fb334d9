package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/op-stack/executor/models"
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

// writeError is the one place that turns an error into an HTTP response.
// Errors that are not *models.Error are internal: they are logged with their
// cause and answered with a generic 500 that leaks nothing.
func (s *Server) writeError(c *gin.Context, err error) {
	code := models.ErrorCode(err)
	body := errorBody{Code: code.Numeric, Message: models.ErrorMessage(err), ErrorCode: code.Name}
	var e *models.Error
	if errors.As(err, &e) {
		body.Field = e.Field
	}
	if code.HTTPStatus >= 500 {
		s.log.ErrorContext(c.Request.Context(), "request failed", "method", c.Request.Method, "path", c.FullPath(), "error", err)
	}
	c.AbortWithStatusJSON(code.HTTPStatus, body)
}

// decodeJSON reads the request body into dst, turning every way a body can
// be wrong into a client error that names the problem.
func decodeJSON(c *gin.Context, dst any) error {
	dec := json.NewDecoder(c.Request.Body)
	if err := dec.Decode(dst); err != nil {
		return bodyError(err)
	}
	// A second value after the object means the body is not one JSON object.
	if dec.More() {
		return models.Errorf(models.CodeInvalidParameters, "malformed JSON: unexpected data after the request object")
	}
	return nil
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
