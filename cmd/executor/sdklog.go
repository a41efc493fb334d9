package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"go.temporal.io/sdk/temporal"
)

// sdkLogHandler is the handler the Temporal SDK logs through. It logs the
// SDK's "Activity error." at INFO when the error is a cancellation: the
// SDK logs every activity that returns an error at ERROR, and an activity
// cancelled because its run was cancelled (or the worker is stopping)
// returns context.Canceled, so a normal cancel or Ctrl-C looked like a
// failure. Other errors keep their level.
type sdkLogHandler struct{ slog.Handler }

func (h sdkLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level > slog.LevelInfo && r.Message == "Activity error." && cancelledRecord(r) {
		if !h.Handler.Enabled(ctx, slog.LevelInfo) {
			return nil
		}
		quiet := slog.NewRecord(r.Time, slog.LevelInfo, r.Message, r.PC)
		r.Attrs(func(a slog.Attr) bool { quiet.AddAttrs(a); return true })
		r = quiet
	}
	return h.Handler.Handle(ctx, r)
}

func (h sdkLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return sdkLogHandler{h.Handler.WithAttrs(attrs)}
}

func (h sdkLogHandler) WithGroup(name string) slog.Handler {
	return sdkLogHandler{h.Handler.WithGroup(name)}
}

// cancelledRecord reports whether the record's error is a cancellation.
func cancelledRecord(r slog.Record) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "Error" {
			return true
		}
		if err, ok := a.Value.Any().(error); ok {
			found = errors.Is(err, context.Canceled) || temporal.IsCanceledError(err)
		} else {
			found = strings.Contains(a.Value.String(), context.Canceled.Error())
		}
		return false
	})
	return found
}
