package workflows_test

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"testing"
)

// TestBaselineOneMarker: a run recorded since changeBaseline
// (testdata/sequential-i28base) carries one version marker, the baseline,
// instead of one per change with its search-attribute upsert; the same
// run recorded before it (sequential-i28lease) carries one per change.
// Both replay (TestReplayHistories).
func TestBaselineOneMarker(t *testing.T) {
	markers := func(file string) (names []string, events int) {
		t.Helper()
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var h struct {
			Events []struct {
				Marker *struct {
					Name    string `json:"markerName"`
					Details map[string]struct {
						Payloads []struct {
							Data string `json:"data"`
						} `json:"payloads"`
					} `json:"details"`
				} `json:"markerRecordedEventAttributes"`
			} `json:"events"`
		}
		if err := json.Unmarshal(raw, &h); err != nil {
			t.Fatal(err)
		}
		for _, e := range h.Events {
			if e.Marker == nil || e.Marker.Name != "Version" {
				continue
			}
			id, _ := base64.StdEncoding.DecodeString(e.Marker.Details["change-id"].Payloads[0].Data)
			names = append(names, string(id))
		}
		return names, len(h.Events)
	}
	base, baseEvents := markers("testdata/sequential-i28base/run.json")
	if len(base) != 1 || base[0] != `"baseline-i28"` {
		t.Errorf("a run since the baseline has version markers %v, want the baseline alone", base)
	}
	before, beforeEvents := markers("testdata/sequential-i28lease/run.json")
	if len(before) < 10 {
		t.Errorf("the run from before the baseline has %d version markers, want one per change", len(before))
	}
	if baseEvents >= beforeEvents {
		t.Errorf("history of the same run: %d events since the baseline, %d before", baseEvents, beforeEvents)
	}
}
