package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// scheduleView is the part of a schedule's answer the tests read.
type scheduleView struct {
	ID          string   `json:"id"`
	TenantID    string   `json:"tenant_id"`
	HierarchyID string   `json:"hierarchy_id"`
	Task        string   `json:"task"`
	Cron        []string `json:"cron"`
	Intervals   []struct {
		Every  string `json:"every"`
		Offset string `json:"offset"`
	} `json:"intervals"`
	TimeZone string `json:"time_zone"`
	Jitter   string `json:"jitter"`
	Overlap  string `json:"overlap"`
	Paused   bool   `json:"paused"`
	Note     string `json:"note"`
	Info     struct {
		NumActions        int      `json:"num_actions"`
		NumSkippedOverlap int      `json:"num_skipped_overlap"`
		Running           []string `json:"running_workflow_ids"`
		RecentActions     []struct {
			WorkflowID string `json:"workflow_id"`
		} `json:"recent_actions"`
		NextActionTimes []time.Time `json:"next_action_times"`
	} `json:"info"`
}

type scheduledRun struct {
	ID         string    `json:"id"`
	Status     string    `json:"status"`
	Task       string    `json:"task"`
	ScheduleID string    `json:"schedule_id"`
	WorkflowID string    `json:"workflow_id"`
	CreatedAt  time.Time `json:"created_at"`
}

func (e *testEnv) createSchedule(body map[string]any) scheduleView {
	e.t.Helper()
	var v scheduleView
	e.mustPost("/schedules/create", body, &v)
	return v
}

func (e *testEnv) getSchedule(id string) scheduleView {
	e.t.Helper()
	var v scheduleView
	e.mustPost("/schedules/get", map[string]any{"id": id}, &v)
	return v
}

// scheduleRuns lists the runs a schedule started (runs/list's schedule_id),
// newest first.
func (e *testEnv) scheduleRuns(id string) []scheduledRun {
	e.t.Helper()
	var out struct {
		Items []scheduledRun `json:"items"`
	}
	e.mustPost("/runs/list", map[string]any{"schedule_id": id, "page_size": 100}, &out)
	return out.Items
}

func countStatus(runs []scheduledRun, status string) int {
	n := 0
	for _, r := range runs {
		if r.Status == status {
			n++
		}
	}
	return n
}

// TestScheduleOneMinuteIntervalFiresTwice is the issue's own proof, at its
// own length: a schedule every minute starts two runs about a minute apart,
// each of which completes. It takes about two minutes; the shorter
// interval of TestScheduleIntervalPauseTrigger covers pause and trigger.
func TestScheduleOneMinuteIntervalFiresTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("takes two minutes")
	}
	e := newEnv(t, accessRules())
	hid := e.createHierarchy(accessHierarchy("minutely"))
	sc := e.createSchedule(map[string]any{"hierarchy_id": hid, "task": "minutely report", "intervals": []any{map[string]any{"every": "1m"}}, "jitter": "0s"})
	created := time.Now()
	waitFor(t, 3*time.Minute, "two runs of a one-minute schedule to complete", func() bool {
		return countStatus(e.scheduleRuns(sc.ID), models.RunCompleted) >= 2
	})
	runs := e.scheduleRuns(sc.ID) // newest first
	if len(runs) != 2 {
		// A third action within the wait would mean the interval is wrong.
		t.Fatalf("%d runs %s after creating a one-minute schedule, want 2: %+v", len(runs), time.Since(created).Round(time.Second), runs)
	}
	gap := runs[0].CreatedAt.Sub(runs[1].CreatedAt)
	if gap < 50*time.Second || gap > 70*time.Second {
		t.Errorf("the two actions are %s apart, want about a minute", gap)
	}
	for _, r := range runs {
		if r.ScheduleID != sc.ID || r.Task != "minutely report" {
			t.Errorf("scheduled run = %+v", r)
		}
	}
	if info := e.getSchedule(sc.ID).Info; info.NumActions != 2 {
		t.Errorf("the schedule counts %d actions, want 2", info.NumActions)
	}
	e.mustPost("/schedules/delete", map[string]any{"id": sc.ID}, nil)
}

// TestScheduleIntervalPauseTrigger: an interval schedule fires on its own
// (every 3 seconds here, so that pausing can be seen in seconds; the
// one-minute interval has its own test), each action is an ordinary run listed
// with its schedule_id and visible in Temporal by TemporalScheduledById; a
// paused schedule fires no more, and trigger starts a run at once, paused
// or not; delete forgets it.
func TestScheduleIntervalPauseTrigger(t *testing.T) {
	e := newEnv(t, accessRules())
	hid := e.createHierarchy(accessHierarchy("nightly"))
	sc := e.createSchedule(map[string]any{"hierarchy_id": hid, "task": "nightly report", "intervals": []any{map[string]any{"every": "3s"}},
		"time_zone": "Europe/Paris", "jitter": "0s", "overlap": "allow_all", "note": "e2e"})
	if !strings.HasPrefix(sc.ID, models.ScheduleIDPrefix) || sc.HierarchyID != hid || sc.Task != "nightly report" || sc.Overlap != "allow_all" ||
		sc.TimeZone != "Europe/Paris" || len(sc.Intervals) != 1 || sc.Intervals[0].Every != "3s" || sc.Paused || sc.TenantID != auth.DefaultTenant {
		t.Fatalf("created schedule = %+v", sc)
	}
	if len(sc.Info.NextActionTimes) == 0 {
		t.Errorf("no next action times: %+v", sc.Info)
	}

	waitFor(t, time.Minute, "two scheduled runs to complete", func() bool {
		return countStatus(e.scheduleRuns(sc.ID), models.RunCompleted) >= 2
	})
	runs := e.scheduleRuns(sc.ID)
	for _, r := range runs {
		if r.ScheduleID != sc.ID || r.Task != "nightly report" {
			t.Errorf("scheduled run = %+v", r)
		}
	}
	// An ordinary run: runs/get shows it, with its final answer.
	done := runs[len(runs)-1]
	if v := e.getRun(done.ID); v.Status != models.RunCompleted || v.FinalAnswer != "ACCESS FINAL" || v.HierarchyID != hid {
		t.Errorf("runs/get of a scheduled run = %+v", v)
	}
	// Streamable as any run: the whole log, gap-free, to its terminal event.
	checkLog(t, done.ID, e.streamAll(done.ID))
	// Another schedule's filter lists none of them.
	if other := e.scheduleRuns("sched-none"); len(other) != 0 {
		t.Errorf("runs of an unknown schedule: %+v", other)
	}

	// The Temporal CLI finds the schedule's actions by TemporalScheduledById;
	// each is the run's parent.
	waitFor(t, 30*time.Second, "the scheduled starts in Temporal's visibility", func() bool {
		out, err := exec.Command(temporalCLI, "workflow", "list", "--address", e.cfg.TemporalAddress,
			"--query", `TemporalScheduledById = "`+sc.ID+`"`).CombinedOutput()
		if err != nil {
			t.Fatalf("temporal workflow list: %v\n%s", err, out)
		}
		return strings.Count(string(out), models.ScheduledRunWorkflowPrefix+sc.ID) >= 2 && strings.Contains(string(out), models.ScheduledRunWorkflowName)
	})
	desc, err := e.temporal.DescribeWorkflowExecution(t.Context(), done.WorkflowID, "")
	if err != nil {
		t.Fatal(err)
	}
	if p := desc.GetWorkflowExecutionInfo().GetParentExecution().GetWorkflowId(); !strings.HasPrefix(p, models.ScheduledRunWorkflowPrefix+sc.ID) {
		t.Errorf("the run's parent is %q, want the schedule's action", p)
	}

	// No secret in the schedule's action or in the histories of the
	// scheduled start and its run (provider keys live on the workers).
	for _, wf := range []string{desc.GetWorkflowExecutionInfo().GetParentExecution().GetWorkflowId(), done.WorkflowID} {
		out, err := exec.Command(temporalCLI, "workflow", "show", "--workflow-id", wf, "--address", e.cfg.TemporalAddress, "--output", "json").CombinedOutput()
		if err != nil {
			t.Fatalf("temporal workflow show %s: %v\n%s", wf, err, out)
		}
		if strings.Contains(string(out), e.cfg.OpenAIAPIKey) {
			t.Errorf("the history of %s holds the provider key", wf)
		}
	}
	if out, err := exec.Command(temporalCLI, "schedule", "describe", "--schedule-id", sc.ID, "--address", e.cfg.TemporalAddress, "--output", "json").CombinedOutput(); err != nil || strings.Contains(string(out), e.cfg.OpenAIAPIKey) || !strings.Contains(string(out), models.ScheduledRunWorkflowName) {
		t.Errorf("temporal schedule describe: %v, holds the key: %t\n%s", err, strings.Contains(string(out), e.cfg.OpenAIAPIKey), out)
	}

	// Pause: no more actions.
	var paused scheduleView
	e.mustPost("/schedules/pause", map[string]any{"id": sc.ID, "note": "maintenance"}, &paused)
	if !paused.Paused || paused.Note != "maintenance" {
		t.Errorf("paused schedule = %+v", paused)
	}
	time.Sleep(time.Second) // an action taken just before the pause
	before := len(e.scheduleRuns(sc.ID))
	time.Sleep(7 * time.Second)
	if after := len(e.scheduleRuns(sc.ID)); after != before {
		t.Errorf("a paused schedule started %d runs", after-before)
	}
	// Trigger: one run now, even paused.
	time.Sleep(1100 * time.Millisecond)
	e.mustPost("/schedules/trigger", map[string]any{"id": sc.ID}, nil)
	waitFor(t, 30*time.Second, "the triggered run", func() bool { return len(e.scheduleRuns(sc.ID)) == before+1 })
	// Unpause: it fires again.
	var unpaused scheduleView
	e.mustPost("/schedules/unpause", map[string]any{"id": sc.ID}, &unpaused)
	if unpaused.Paused {
		t.Errorf("unpaused schedule = %+v", unpaused)
	}
	waitFor(t, 30*time.Second, "a run after unpausing", func() bool { return len(e.scheduleRuns(sc.ID)) >= before+2 })

	// Update: a new task and a cron spec; the next runs run the new task.
	var updated scheduleView
	e.mustPost("/schedules/update", map[string]any{"id": sc.ID, "task": "weekly report", "cron": []string{"0 9 * * MON"}, "overlap": "skip", "note": "weekly now"}, &updated)
	if updated.Task != "weekly report" || updated.Overlap != "skip" || len(updated.Intervals) != 0 || len(updated.Cron) != 1 || updated.Cron[0] != "0 9 * * MON" || updated.TimeZone != "Europe/Paris" || updated.Note != "weekly now" {
		t.Errorf("updated schedule = %+v", updated)
	}
	n := len(e.scheduleRuns(sc.ID))
	// Temporal names an action's workflow by its second: an action in the
	// second of the last one would be dropped (docs/schedules.md).
	time.Sleep(1100 * time.Millisecond)
	e.mustPost("/schedules/trigger", map[string]any{"id": sc.ID}, nil)
	waitFor(t, 30*time.Second, "the run of the updated schedule", func() bool {
		rs := e.scheduleRuns(sc.ID)
		return len(rs) > n && rs[0].Task == "weekly report"
	})

	var list struct {
		Items []scheduleView `json:"items"`
		Total int            `json:"total"`
	}
	e.mustPost("/schedules/list", map[string]any{}, &list)
	if list.Total != 1 || len(list.Items) != 1 || list.Items[0].ID != sc.ID || list.Items[0].Info.NumActions < 4 {
		t.Errorf("schedules/list = %+v", list)
	}

	e.mustPost("/schedules/delete", map[string]any{"id": sc.ID}, nil)
	if status, env := e.post("/schedules/get", map[string]any{"id": sc.ID}); status != http.StatusNotFound || env.ErrorCode != "SCHEDULE_NOT_FOUND" || env.Code != 40407 {
		t.Errorf("get of a deleted schedule: %d %+v", status, env)
	}
	if _, err := e.temporal.ScheduleClient().GetHandle(t.Context(), sc.ID).Describe(t.Context()); err == nil {
		t.Errorf("the schedule is still in Temporal after delete")
	}
	// Its runs stay, with their schedule_id.
	if len(e.scheduleRuns(sc.ID)) == 0 {
		t.Errorf("the deleted schedule's runs are gone")
	}
}

// slowRules are accessRules whose final answer takes about 3 seconds, so
// that a second action meets the first run still going.
func slowRules() []llmfake.Rule {
	rules := accessRules()
	rules[1].Responses = []llmfake.Response{{Content: strings.Repeat("word ", 12), TokenDelay: 200 * time.Millisecond}}
	return rules
}

// TestScheduleOverlapPolicies: two actions taken together (trigger twice
// on a paused schedule, so no interval interferes) under each overlap
// policy. The policy applies to the runs: the scheduled start lives as
// long as its run.
func TestScheduleOverlapPolicies(t *testing.T) {
	e := newEnv(t, slowRules())
	hid := e.createHierarchy(accessHierarchy("overlap"))
	twice := func(overlap string) scheduleView {
		sc := e.createSchedule(map[string]any{"hierarchy_id": hid, "task": "overlap " + overlap, "cron": []string{"0 0 1 1 *"}, "overlap": overlap, "paused": true})
		e.mustPost("/schedules/trigger", map[string]any{"id": sc.ID}, nil)
		waitFor(t, 30*time.Second, "the first run to be running", func() bool {
			rs := e.scheduleRuns(sc.ID)
			return len(rs) == 1 && rs[0].Status == models.RunRunning
		})
		time.Sleep(1100 * time.Millisecond) // not in the first action's second
		e.mustPost("/schedules/trigger", map[string]any{"id": sc.ID}, nil)
		t.Cleanup(func() { e.post("/schedules/delete", map[string]any{"id": sc.ID}) })
		return sc
	}

	t.Run("skip", func(t *testing.T) {
		sc := twice("skip")
		waitFor(t, 30*time.Second, "the second action to be skipped", func() bool { return e.getSchedule(sc.ID).Info.NumSkippedOverlap == 1 })
		waitFor(t, 30*time.Second, "the first run to end", func() bool { return countStatus(e.scheduleRuns(sc.ID), models.RunCompleted) == 1 })
		time.Sleep(2 * time.Second)
		if rs := e.scheduleRuns(sc.ID); len(rs) != 1 {
			t.Errorf("skip: %d runs, want 1: %+v", len(rs), rs)
		}
	})
	t.Run("allow_all", func(t *testing.T) {
		sc := twice("allow_all")
		waitFor(t, 30*time.Second, "two runs at once", func() bool { return countStatus(e.scheduleRuns(sc.ID), models.RunRunning) == 2 })
		waitFor(t, 30*time.Second, "both runs to end", func() bool { return countStatus(e.scheduleRuns(sc.ID), models.RunCompleted) == 2 })
	})
	t.Run("buffer_one", func(t *testing.T) {
		sc := twice("buffer_one")
		waitFor(t, 60*time.Second, "both runs to end", func() bool { return countStatus(e.scheduleRuns(sc.ID), models.RunCompleted) == 2 })
		rs := e.scheduleRuns(sc.ID) // newest first
		first, second := e.getRun(rs[1].ID), e.getRun(rs[0].ID)
		if first.CompletedAt == nil || second.StartedAt == nil || second.StartedAt.Before(*first.CompletedAt) {
			t.Errorf("buffer_one: the second run started at %v, before the first ended at %v", second.StartedAt, first.CompletedAt)
		}
	})
	t.Run("cancel_other", func(t *testing.T) {
		sc := twice("cancel_other")
		waitFor(t, 60*time.Second, "the first cancelled and the second completed", func() bool {
			rs := e.scheduleRuns(sc.ID)
			return len(rs) == 2 && rs[1].Status == models.RunCancelled && rs[0].Status == models.RunCompleted
		})
	})
}

// TestScheduleSurvivesRestart: schedules live in Temporal. The whole
// executor (`executor serve -role all`: API and worker in one process) is
// killed while a schedule runs, and another started; the schedule goes on
// (an action taken while no executor was up runs when it is back), its
// runs complete, and the new process answers for it.
func TestScheduleSurvivesRestart(t *testing.T) {
	e := newEnv(t, accessRules(), withoutWorker)
	port := freePort(t)
	serve := func() *exec.Cmd {
		cmd := e.serveProcess("all", fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", port), "AUTH_MODE=off", "METRICS_ADDR=")
		waitFor(t, 60*time.Second, "the executor process", func() bool {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
			if err == nil {
				resp.Body.Close()
			}
			return err == nil && resp.StatusCode == http.StatusOK
		})
		return cmd
	}
	first := serve()
	e.apiURL = fmt.Sprintf("http://127.0.0.1:%d/api/executor/v1", port)
	hid := e.createHierarchy(accessHierarchy("durable"))
	sc := e.createSchedule(map[string]any{"hierarchy_id": hid, "task": "durable", "intervals": []any{map[string]any{"every": "3s"}}, "overlap": "allow_all"})
	t.Cleanup(func() {
		e.temporal.ScheduleClient().GetHandle(context.Background(), sc.ID).Delete(context.Background())
	})
	waitFor(t, time.Minute, "a scheduled run before the restart", func() bool {
		return countStatus(e.scheduleRuns(sc.ID), models.RunCompleted) >= 1
	})
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	restarted := time.Now()
	time.Sleep(4 * time.Second) // an action while no executor is up
	serve()
	waitFor(t, time.Minute, "two scheduled runs started after the restart to complete", func() bool {
		n := 0
		for _, r := range e.scheduleRuns(sc.ID) {
			if r.Status == models.RunCompleted && r.CreatedAt.After(restarted) {
				n++
			}
		}
		return n >= 2
	})
	if v := e.getSchedule(sc.ID); v.Paused || v.Info.NumActions < 3 {
		t.Errorf("schedule after the restart = %+v", v.Info)
	}
}

// TestScheduleValidationAndTenancy: bad input is a 400 naming its field;
// another tenant sees, lists and controls none of a tenant's schedules.
func TestScheduleValidationAndTenancy(t *testing.T) {
	e := newEnv(t, accessRules(), withAuth)
	keyA := e.issueKey("tenant-a", auth.ScopeHierarchiesWrite, auth.ScopeRunsRead, auth.ScopeRunsWrite)
	keyB := e.issueKey("tenant-b", auth.ScopeHierarchiesWrite, auth.ScopeRunsRead, auth.ScopeRunsWrite)
	var h struct {
		ID string `json:"hierarchy_id"`
	}
	e.mustCall("POST", "/api/executor/v1/hierarchies/create", keyA, accessHierarchy("a"), &h)
	base := func(extra map[string]any) map[string]any {
		b := map[string]any{"hierarchy_id": h.ID, "task": "t", "cron": []string{"0 9 * * *"}}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{base(map[string]any{"cron": []string{"not a cron"}}), "cron[0]"},
		{base(map[string]any{"cron": []string{"0 9 * * *", "61 * * * *"}}), "cron[1]"},
		{base(map[string]any{"cron": nil}), "cron"},
		{base(map[string]any{"cron": nil, "intervals": []any{map[string]any{"every": "soon"}}}), "intervals[0].every"},
		{base(map[string]any{"cron": nil, "intervals": []any{map[string]any{"every": "1m", "offset": "2m"}}}), "intervals[0].offset"},
		{base(map[string]any{"time_zone": "Mars/Olympus"}), "time_zone"},
		{base(map[string]any{"jitter": "-1s"}), "jitter"},
		{base(map[string]any{"overlap": "sometimes"}), "overlap"},
		{base(map[string]any{"task": " "}), "task"},
		{base(map[string]any{"hierarchy_id": ""}), "hierarchy_id"},
	} {
		status, raw := e.call("POST", "/api/executor/v1/schedules/create", keyA, c.body)
		if status != http.StatusBadRequest || !strings.Contains(string(raw), `"field":"`+c.field+`"`) || !strings.Contains(string(raw), "INVALID_PARAMETERS") {
			t.Errorf("%v: %d %s, want 400 naming %s", c.body, status, raw, c.field)
		}
	}
	if status, raw := e.call("POST", "/api/executor/v1/schedules/create", keyB, base(nil)); status != http.StatusNotFound {
		t.Errorf("tenant B scheduling tenant A's hierarchy: %d %s", status, raw)
	}

	var sc scheduleView
	e.mustCall("POST", "/api/executor/v1/schedules/create", keyA, base(map[string]any{"paused": true}), &sc)
	t.Cleanup(func() { e.call("POST", "/api/executor/v1/schedules/delete", keyA, map[string]any{"id": sc.ID}) })
	if sc.TenantID != "tenant-a" {
		t.Errorf("schedule tenant = %q", sc.TenantID)
	}
	for _, route := range []string{"get", "pause", "unpause", "trigger", "update", "delete"} {
		status, raw := e.call("POST", "/api/executor/v1/schedules/"+route, keyB, map[string]any{"id": sc.ID, "task": "hijack"})
		if status != http.StatusNotFound || !strings.Contains(string(raw), "SCHEDULE_NOT_FOUND") {
			t.Errorf("tenant B %s on tenant A's schedule: %d %s", route, status, raw)
		}
	}
	status, raw := e.call("POST", "/api/executor/v1/schedules/list", keyB, map[string]any{})
	if status != http.StatusOK || strings.Contains(string(raw), sc.ID) {
		t.Errorf("tenant B's list: %d %s", status, raw)
	}
	// A's schedule is untouched by B's attempts.
	var got scheduleView
	e.mustCall("POST", "/api/executor/v1/schedules/get", keyA, map[string]any{"id": sc.ID}, &got)
	if got.Task != "t" || !got.Paused {
		t.Errorf("tenant A's schedule after B's attempts = %+v", got)
	}
	// Update validates as create does.
	status, raw = e.call("POST", "/api/executor/v1/schedules/update", keyA, map[string]any{"id": sc.ID, "cron": []string{"every day"}})
	if status != http.StatusBadRequest || !strings.Contains(string(raw), `"field":"cron[0]"`) {
		t.Errorf("update with a bad cron: %d %s", status, raw)
	}
	// A schedule of a hierarchy deleted since: its action refuses to start
	// a run (ScheduledStartRefused, not retried), and stores none.
	e.mustCall("POST", "/api/executor/v1/hierarchies/delete", keyA, map[string]any{"hierarchy_id": h.ID}, nil)
	e.mustCall("POST", "/api/executor/v1/schedules/trigger", keyA, map[string]any{"id": sc.ID}, nil)
	var closed *workflowpb.WorkflowExecutionInfo
	waitFor(t, 30*time.Second, "the refused scheduled start to close", func() bool {
		resp, err := e.temporal.ListWorkflow(t.Context(), listRequest(`TemporalScheduledById = "`+sc.ID+`"`))
		if err != nil {
			t.Fatal(err)
		}
		for _, info := range resp.Executions {
			if info.GetCloseTime() != nil {
				closed = info
				return true
			}
		}
		return false
	})
	if closed.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_FAILED {
		t.Errorf("the scheduled start of a deleted hierarchy ended %s", closed.GetStatus())
	}
	err := e.temporal.GetWorkflow(t.Context(), closed.GetExecution().GetWorkflowId(), closed.GetExecution().GetRunId()).Get(t.Context(), nil)
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != models.ErrScheduledStartRefused {
		t.Errorf("the scheduled start failed with %v, want %s", err, models.ErrScheduledStartRefused)
	}
	var runs struct {
		Total int `json:"total"`
	}
	e.mustCall("POST", "/api/executor/v1/runs/list", keyA, map[string]any{"schedule_id": sc.ID}, &runs)
	if runs.Total != 0 {
		t.Errorf("a refused scheduled start stored %d runs", runs.Total)
	}
}

// TestSchedulesCLI runs `executor schedules` against the real API: create
// prints the id, list and get show it, trigger starts a run, pause and
// update change it, delete removes it, and a bad cron exits non-zero with
// the field named.
func TestSchedulesCLI(t *testing.T) {
	e := newEnv(t, accessRules())
	hid := e.createHierarchy(accessHierarchy("cli"))
	id := strings.TrimSpace(e.mustCLI("", "schedules", "create", hid, "--task", "cli report", "--cron", "0 9 * * MON-FRI", "--time-zone", "Europe/Paris", "--overlap", "allow_all", "--paused"))
	if !strings.HasPrefix(id, models.ScheduleIDPrefix) {
		t.Fatalf("create printed %q", id)
	}
	t.Cleanup(func() { e.post("/schedules/delete", map[string]any{"id": id}) })
	if out := e.mustCLI("", "schedules", "list"); !strings.Contains(out, id) || !strings.Contains(out, "0 9 * * MON-FRI") || !strings.Contains(out, "paused") {
		t.Errorf("schedules list:\n%s", out)
	}
	if out := e.mustCLI("", "schedules", "get", id); !strings.Contains(out, "cli report") || !strings.Contains(out, "Europe/Paris") || !strings.Contains(out, "allow_all") {
		t.Errorf("schedules get:\n%s", out)
	}
	e.mustCLI("", "schedules", "trigger", id)
	waitFor(t, 30*time.Second, "the triggered run", func() bool { return countStatus(e.scheduleRuns(id), models.RunCompleted) == 1 })
	if out := e.mustCLI("", "schedules", "update", id, "--every", "1h+5m", "--task", "hourly"); !strings.Contains(out, "every 1h0m0s +5m0s") || !strings.Contains(out, "hourly") {
		t.Errorf("schedules update:\n%s", out)
	}
	if out := e.mustCLI("", "schedules", "unpause", id); !regexp.MustCompile(`(?m)^paused\s+false$`).MatchString(out) {
		t.Errorf("schedules unpause:\n%s", out)
	}
	r := e.runCLI("", "schedules", "create", hid, "--task", "x", "--cron", "nope")
	if r.code == 0 || !strings.Contains(r.stderr, "cron[0]") {
		t.Errorf("a bad cron: exit %d, stderr %s", r.code, r.stderr)
	}
	if out := e.mustCLI("", "schedules", "delete", id); !strings.Contains(out, "deleted") {
		t.Errorf("schedules delete: %s", out)
	}
	if r := e.runCLI("", "schedules", "get", id); r.code == 0 || !strings.Contains(r.stderr, "SCHEDULE_NOT_FOUND") {
		t.Errorf("get after delete: exit %d, stderr %s", r.code, r.stderr)
	}
}
