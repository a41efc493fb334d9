package store_test

import (
	"context"
	"testing"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// TestSchedulesTenantScoped: a schedule is found by its tenant (or by a
// principal that sees all) and not by another, keeps its cron expressions
// as given, and its runs are listed by schedule_id.
func TestSchedulesTenantScoped(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		a := &store.Schedule{ID: "sched-a-" + t.Name(), TenantID: "acme", HierarchyID: "h1", Cron: []string{"0 9 * * MON-FRI"}}
		b := &store.Schedule{ID: "sched-b-" + t.Name(), TenantID: "globex", HierarchyID: "h2"}
		for _, sc := range []*store.Schedule{a, b} {
			if err := st.CreateSchedule(ctx, sc); err != nil {
				t.Fatal(err)
			}
		}
		got, err := st.GetSchedule(ctx, "acme", a.ID)
		if err != nil || got.HierarchyID != "h1" || len(got.Cron) != 1 || got.Cron[0] != "0 9 * * MON-FRI" {
			t.Fatalf("get = %+v, %v", got, err)
		}
		if _, err := st.GetSchedule(ctx, "globex", a.ID); models.ErrorCode(err) != models.CodeScheduleNotFound {
			t.Errorf("another tenant's get = %v, want SCHEDULE_NOT_FOUND", err)
		}
		if got, err := st.GetSchedule(ctx, "", b.ID); err != nil || got.TenantID != "globex" || len(got.Cron) != 0 {
			t.Errorf("get across tenants = %+v, %v", got, err)
		}
		list, total, err := st.ListSchedules(ctx, store.ListFilter{Page: 1, PageSize: 10, Tenant: "acme"}, "")
		if err != nil || total != 1 || len(list) != 1 || list[0].ID != a.ID {
			t.Errorf("acme's list = %+v (%d), %v", list, total, err)
		}
		if err := st.SetScheduleCron(ctx, a.ID, []string{"@daily"}); err != nil {
			t.Fatal(err)
		}
		if got, _ := st.GetSchedule(ctx, "acme", a.ID); len(got.Cron) != 1 || got.Cron[0] != "@daily" {
			t.Errorf("cron after SetScheduleCron = %v", got.Cron)
		}

		run := &store.Run{ID: models.NewID(), TenantID: "acme", HierarchyID: "h1", Task: "scheduled", ScheduleID: a.ID}
		if err := st.CreateRun(ctx, run); err != nil {
			t.Fatal(err)
		}
		runs, n, err := st.ListRuns(ctx, store.RunFilter{ListFilter: store.ListFilter{Page: 1, PageSize: 10, Tenant: "acme"}, ScheduleID: a.ID})
		if err != nil || n != 1 || runs[0].ScheduleID != a.ID {
			t.Errorf("runs of the schedule = %+v (%d), %v", runs, n, err)
		}

		if err := st.DeleteSchedule(ctx, a.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := st.GetSchedule(ctx, "acme", a.ID); models.ErrorCode(err) != models.CodeScheduleNotFound {
			t.Errorf("get after delete = %v", err)
		}
	})
}
