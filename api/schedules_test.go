package api

import "testing"

// TestCheckCron: the shapes Temporal reads pass; what it would refuse (or
// read as something else) is caught before, so the 400 names the field.
func TestCheckCron(t *testing.T) {
	for _, ok := range []string{"0 9 * * MON-FRI", "*/15 * * * *", "0 0 1 1 *", "30 2 * * 0,6", "@daily", "@every 90m", "0 30 9 * * MON 2027", " 5 4 * * * "} {
		if err := checkCron(ok); err != nil {
			t.Errorf("checkCron(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "not a cron", "61 * * * *", "0 24 * * *", "0 0 0 * *", "0 0 * 13 *", "* * * *", "@sometimes", "@every soon", "0 9 * * MON;rm"} {
		if err := checkCron(bad); err == nil {
			t.Errorf("checkCron(%q) = nil, want an error", bad)
		}
	}
}
