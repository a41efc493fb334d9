package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	// The zone database compiled in, so current_time works on minimal
	// images (distroless, scratch) that have no /usr/share/zoneinfo.
	_ "time/tzdata"
)

// KeyCurrentTime is the key of the current_time tool.
const KeyCurrentTime = "current_time"

// CurrentTime is the current_time tool: the current date and time in an
// IANA time zone. Models have no clock, and guess "today" from their
// training data unless told.
func CurrentTime() Tool { return &currentTime{now: time.Now} }

type currentTime struct {
	now func() time.Time // replaced in tests
}

func (*currentTime) Key() string { return KeyCurrentTime }

func (*currentTime) Description() string {
	return "Get the current date and time. Use it whenever the answer depends on today's date or the time of day; " +
		"do not guess it. Returns JSON {timezone, time (RFC 3339 with milliseconds), unix (seconds), weekday}."
}

func (*currentTime) Parameters() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"timezone":{"type":"string","description":"IANA time zone name, e.g. \"Europe/Paris\" or \"America/New_York\"; default \"UTC\""}` +
		`},"additionalProperties":false}`)
}

func (t *currentTime) Run(_ context.Context, arguments json.RawMessage) (string, error) {
	var args struct {
		Timezone string `json:"timezone"`
	}
	if err := DecodeArguments(arguments, &args); err != nil {
		return "", err
	}
	name := strings.TrimSpace(args.Timezone)
	if name == "" {
		name = "UTC"
	}
	// "Local" is the worker's zone, which means nothing to the model and
	// differs between machines; LoadLocation refuses paths such as
	// "../x" itself.
	var loc *time.Location
	var err error
	if name != "Local" {
		loc, err = time.LoadLocation(name)
	}
	if loc == nil || err != nil {
		return "", fmt.Errorf("unknown time zone %q: use an IANA name such as \"UTC\", \"Europe/London\" or \"Asia/Tokyo\"", name)
	}
	now := t.now().In(loc)
	return marshalResult(struct {
		Timezone string `json:"timezone"`
		Time     string `json:"time"`
		Unix     int64  `json:"unix"`
		Weekday  string `json:"weekday"`
	}{name, now.Format("2006-01-02T15:04:05.000Z07:00"), now.Unix(), now.Weekday().String()})
}
