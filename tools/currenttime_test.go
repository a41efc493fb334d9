package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestCurrentTime(t *testing.T) {
	fixed := time.Date(2024, 3, 10, 12, 0, 0, 123_000_000, time.UTC)
	tool := &currentTime{now: func() time.Time { return fixed }}
	ctx := context.Background()

	cases := []struct{ args, want string }{
		{`{}`, `{"timezone":"UTC","time":"2024-03-10T12:00:00.123Z","unix":1710072000,"weekday":"Sunday"}`},
		{`{"timezone":""}`, `{"timezone":"UTC","time":"2024-03-10T12:00:00.123Z","unix":1710072000,"weekday":"Sunday"}`},
		{`{"timezone":"Asia/Tokyo"}`, `{"timezone":"Asia/Tokyo","time":"2024-03-10T21:00:00.123+09:00","unix":1710072000,"weekday":"Sunday"}`},
		{`{"timezone":"America/Los_Angeles"}`, `{"timezone":"America/Los_Angeles","time":"2024-03-10T05:00:00.123-07:00","unix":1710072000,"weekday":"Sunday"}`},
	}
	for _, tc := range cases {
		got, err := tool.Run(ctx, json.RawMessage(tc.args))
		if err != nil || got != tc.want {
			t.Errorf("Run(%s) = %s, %v\nwant %s", tc.args, got, err, tc.want)
		}
	}

	for _, zone := range []string{"Mars/Olympus_Mons", "Local", "../../etc/passwd", "/etc/localtime"} {
		args, _ := json.Marshal(map[string]string{"timezone": zone})
		_, err := tool.Run(ctx, args)
		if err == nil || !strings.Contains(err.Error(), "unknown time zone") || IsRetryable(err) {
			t.Errorf("zone %q: err = %v", zone, err)
		}
	}
	if _, err := tool.Run(ctx, json.RawMessage(`{"tz":"UTC"}`)); err == nil {
		t.Error("misspelled argument accepted")
	}
}

func TestCurrentTimeRealClock(t *testing.T) {
	got, err := CurrentTime().Run(context.Background(), json.RawMessage(`{"timezone":"Europe/Paris"}`))
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Time string `json:"time"`
		Unix int64  `json:"unix"`
	}
	if err := json.Unmarshal([]byte(got), &res); err != nil {
		t.Fatal(err)
	}
	parsed, err := time.Parse(time.RFC3339Nano, res.Time)
	if err != nil || parsed.Unix() != res.Unix || time.Since(parsed).Abs() > time.Minute {
		t.Fatalf("result %s: %v", got, err)
	}
}
