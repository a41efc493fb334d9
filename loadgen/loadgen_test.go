package loadgen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/models"
)

func TestSummarize(t *testing.T) {
	var xs []float64
	for i := 100; i >= 1; i-- { // 1..100, unsorted
		xs = append(xs, float64(i))
	}
	s := Summarize(xs)
	want := Summary{N: 100, Min: 1, P50: 50, P90: 90, P99: 99, Max: 100, Mean: 50.5}
	if s != want {
		t.Errorf("Summarize(1..100) = %+v, want %+v", s, want)
	}
	if s := Summarize([]float64{7}); s.P50 != 7 || s.P99 != 7 || s.Min != 7 || s.Max != 7 {
		t.Errorf("one value: %+v", s)
	}
	if s := Summarize(nil); s != (Summary{}) {
		t.Errorf("empty: %+v", s)
	}
	// Nearest rank: of 4 values the median is the 2nd, p99 the 4th.
	if s := Summarize([]float64{4, 1, 3, 2}); s.P50 != 2 || s.P90 != 4 || s.P99 != 4 {
		t.Errorf("4 values: %+v", s)
	}
	if xs[0] != 100 {
		t.Error("Summarize sorted its argument")
	}
}

func TestCovered(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	cases := []struct {
		name string
		in   []Interval
		want time.Duration
	}{
		{"none", nil, 0},
		{"sequential", []Interval{{at(0), at(100)}, {at(150), at(250)}}, 200 * time.Millisecond},
		{"overlapping count once", []Interval{{at(0), at(100)}, {at(50), at(120)}, {at(300), at(310)}}, 130 * time.Millisecond},
		{"nested, unsorted", []Interval{{at(10), at(20)}, {at(0), at(100)}}, 100 * time.Millisecond},
		{"empty spans ignored", []Interval{{at(5), at(5)}, {at(9), at(3)}}, 0},
	}
	for _, tc := range cases {
		if got := Covered(tc.in); got != tc.want {
			t.Errorf("%s: Covered = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// log is a run's log of n events, the last its terminal event.
func log(n int) []models.Event {
	var out []models.Event
	for i := 1; i <= n; i++ {
		ev := models.Event{RunID: "r1", Timestamp: "2026-11-28T05:00:00Z", Sequence: int64(i),
			Source: models.Source{AgentID: "w1", AgentType: models.AgentTypeWorker},
			Event:  models.EventKind{Category: models.CategoryLLM, Action: models.ActionStream},
			Data:   map[string]any{"content": strings.Repeat("x", i)}}
		if i == n {
			ev.Source = models.Source{AgentID: "gs", AgentType: models.AgentTypeGlobalSupervisor}
			ev.Event = models.EventKind{Category: models.CategoryLifecycle, Action: models.ActionCompleted}
			ev.Data = map[string]any{"final_answer": "done"}
		}
		out = append(out, ev)
	}
	return out
}

func TestCheckStreamPasses(t *testing.T) {
	stored := log(6)
	// The stream decoded the same JSON on its side.
	raw, _ := json.Marshal(stored)
	var stream []models.Event
	if err := json.Unmarshal(raw, &stream); err != nil {
		t.Fatal(err)
	}
	if err := CheckStream(stream, stored); err != nil {
		t.Fatalf("an equal stream failed its check: %v", err)
	}
}

func TestCheckStreamFails(t *testing.T) {
	stored := log(6)
	drop := func(i int) []models.Event {
		out := append([]models.Event(nil), stored[:i]...)
		return append(out, stored[i+1:]...)
	}
	changed := append([]models.Event(nil), stored...)
	changed[2].Data = map[string]any{"content": "something else"}
	for _, tc := range []struct {
		name   string
		stream []models.Event
		stored []models.Event
		want   string
	}{
		{"gap", drop(2), stored, "gap: sequence 4 arrived where 3 was expected"},
		{"duplicate", append(append(append([]models.Event(nil), stored[:3]...), stored[2]), stored[3:]...), stored, "duplicate: sequence 3 arrived again"},
		{"out of order", append(append([]models.Event(nil), stored[0], stored[2], stored[1]), stored[3:]...), stored, "out of order"},
		{"not equal", changed, stored, "event 3 differs"},
		{"no terminal event", stored[:5], stored[:5], "not the run's terminal event"},
		{"stored log longer", stored[:5], stored, "never arrived on the stream"},
		{"stored log shorter", stored, stored[:4], "the stored log has 4 events, the stream 6"},
		{"empty", nil, stored, "no event"},
	} {
		err := CheckStream(tc.stream, tc.stored)
		if err == nil {
			t.Errorf("%s: the check passed", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q does not say %q", tc.name, err, tc.want)
		}
	}
}

func TestParseStamps(t *testing.T) {
	at := time.UnixMicro(1764300000123456)
	text := formatStamp(7, 0, at) + formatStamp(7, 1, at.Add(time.Millisecond))
	// Cut inside the second stamp: the rest comes with the next event.
	cut := len(text) - 5
	got, rest := ParseStamps(`{"action":"finish","reason":"`+text[:cut], nil)
	if len(got) != 1 || got[0] != (Stamp{Call: 7, Index: 0, Sent: at}) {
		t.Fatalf("first part: %+v", got)
	}
	got, rest = ParseStamps(rest+text[cut:]+`"}`, got)
	if len(got) != 2 || got[1] != (Stamp{Call: 7, Index: 1, Sent: at.Add(time.Millisecond)}) || rest != "" {
		t.Fatalf("second part: %+v, rest %q", got, rest)
	}
	if got, _ := ParseStamps("a@b c @1.2 plain text", nil); len(got) != 0 {
		t.Errorf("stamps in text without any: %+v", got)
	}
}

// post sends a chat request to the fake and returns the answer's content
// (streamed or not).
func post(t *testing.T, m *FakeModel, stream bool, user string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "bench-fake", "stream": stream,
		"messages": []any{map[string]any{"role": "system", "content": "s"}, map[string]any{"role": "user", "content": user}}})
	resp, err := http.Post(m.URL()+"/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if !stream {
		var out struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) != 1 {
			t.Fatalf("answer: %v %+v", err, out)
		}
		return out.Choices[0].Message.Content
	}
	var content strings.Builder
	sc := bufio.NewScanner(resp.Body)
	done := false
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			break
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(line), &chunk); err != nil {
			t.Fatal(err)
		}
		for _, c := range chunk.Choices {
			content.WriteString(c.Delta.Content)
		}
	}
	if !done {
		t.Fatal("stream without [DONE]")
	}
	return content.String()
}

func TestFakeModel(t *testing.T) {
	m, err := StartFakeModel("127.0.0.1:0", ModelOptions{FirstTokenDelay: 30 * time.Millisecond, Tokens: 5, TokenInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, stream := range []bool{true, false} {
		// A worker's prompt: text made of the tokens.
		before := time.Now()
		content := post(t, m, stream, "write something")
		stamps, rest := ParseStamps(content, nil)
		if len(stamps) != 5 || rest != "" {
			t.Fatalf("stream=%v: %d stamps in %q", stream, len(stamps), content)
		}
		// The record is finished just after the answer's last byte.
		var call ModelCall
		var ok bool
		for i := 0; i < 100; i++ {
			if call, ok = m.Call(stamps[0].Call); ok && !call.Finished.IsZero() {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if !ok || call.Stream != stream || call.Failed || call.Finished.IsZero() {
			t.Fatalf("stream=%v: call record %+v", stream, call)
		}
		for i, s := range stamps {
			if s.Index != i || s.Call != call.ID {
				t.Errorf("stream=%v: stamp %d = %+v", stream, i, s)
			}
		}
		if first := stamps[0].Sent.Sub(before); first < 30*time.Millisecond {
			t.Errorf("stream=%v: first token after %v, want ≥ 30ms", stream, first)
		}
		if gap := stamps[4].Sent.Sub(stamps[0].Sent); gap < 40*time.Millisecond {
			t.Errorf("stream=%v: 5 tokens over %v, want ≥ 40ms", stream, gap)
		}
		if d := call.Finished.Sub(call.Received); d < 70*time.Millisecond {
			t.Errorf("stream=%v: call took %v", stream, d)
		}

		// A routing decision: JSON dispatching the first option not done.
		routing := "Task: t\n\n" + llm.FormatRoutingInput(llm.RoutingInput{Options: []string{"a", "b"}, Completed: []string{"a"}, AllowFinish: true})
		var d llm.RoutingDecision
		answer := post(t, m, stream, routing)
		if err := json.Unmarshal([]byte(answer), &d); err != nil {
			t.Fatalf("stream=%v: decision %q: %v", stream, answer, err)
		}
		if d.Action != "dispatch" || d.Target != "b" {
			t.Errorf("stream=%v: decision %+v, want dispatch b", stream, d)
		}
		if stamps, _ := ParseStamps(d.Reason, nil); len(stamps) != 5 {
			t.Errorf("stream=%v: reason %q holds %d stamps", stream, d.Reason, len(stamps))
		}
		done := "Task: t\n\n" + llm.FormatRoutingInput(llm.RoutingInput{Options: []string{"a", "b"}, Completed: []string{"a", "b"}, AllowFinish: true})
		if err := json.Unmarshal([]byte(post(t, m, stream, done)), &d); err != nil || d.Action != "finish" || d.Target != "" {
			t.Errorf("stream=%v: decision when all is done %+v (%v), want finish", stream, d, err)
		}
	}
	// Another process reads the records over HTTP.
	resp, err := http.Get(m.URL() + "/bench/calls?ids=1,2,99")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var recs []struct {
		ID         int64 `json:"id"`
		ReceivedUS int64 `json:"received_us"`
		FinishedUS int64 `json:"finished_us"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&recs); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].ID != 1 || recs[0].FinishedUS <= recs[0].ReceivedUS {
		t.Errorf("call records over HTTP: %+v", recs)
	}
	if m.Calls() != 6 {
		t.Errorf("Calls = %d, want 6", m.Calls())
	}
}

func TestParseStat(t *testing.T) {
	line := "4242 (temporal (dev) x) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 75 3 4 20 0 12 0 987654 1000 200 18446744073709551615\n"
	st, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if st.pid != 4242 || st.ppid != 17 || st.comm != "temporal (dev) x" || st.cpuTicks != 325 || st.startTime != 987654 {
		t.Errorf("parseStat = %+v", st)
	}
	if _, err := parseStat("garbage"); err == nil {
		t.Error("a malformed line parsed")
	}
}

// TestCPUOfDescendants measures a shell whose child spins: the shell uses
// no CPU, its descendant does, and the selector counts it.
func TestCPUOfDescendants(t *testing.T) {
	if testing.Short() {
		t.Skip("spins a CPU for half a second")
	}
	cmd := exec.Command("sh", "-c", "sh -c 'while :; do :; done' & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Skip("no sh:", err)
	}
	defer func() {
		// The spinning grandchild goes with the shell's process group.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	sel := ProcSelector{PIDs: []int{cmd.Process.Pid}}
	time.Sleep(100 * time.Millisecond)
	before := sel.Snapshot()
	time.Sleep(600 * time.Millisecond)
	procs, total := sel.Snapshot().CPUSince(before)
	if len(procs) < 2 {
		t.Fatalf("selected %+v, want the shell and its child", procs)
	}
	// The machine may be busy: a tenth of a core is enough to tell.
	if total < 0.06 {
		t.Errorf("CPU of a spinning child over 0.6 s = %.2f s, want ≥ 0.06 s", total)
	}
	if empty := (ProcSelector{}).Snapshot(); len(empty.procs) != 0 {
		t.Errorf("an empty selector selected %d processes", len(empty.procs))
	}
}

// TestCompare lays out two labels' rounds as scripts/bench-ab.sh does and
// checks each round's value, the median and the range are printed.
func TestCompare(t *testing.T) {
	dir := t.TempDir()
	write := func(label string, round int, overhead float64) {
		sub := filepath.Join(dir, label+"-r"+strconv.Itoa(round))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(Report{Overhead: Summary{N: 1, P50: overhead}})
		if err := os.WriteFile(filepath.Join(sub, "sequential.json"), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("aaa", 1, 20)
	write("bbb", 1, 11)
	write("bbb", 2, 13)
	write("aaa", 2, 24)
	write("aaa", 3, 22)
	var out bytes.Buffer
	if err := Compare(&out, dir, []string{"aaa", "bbb"}); err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "overhead per LLM call p50") {
			line = strings.Join(strings.Fields(l), " ")
		}
	}
	want := "overhead per LLM call p50 (ms) 20.0 24.0 22.0 22.0 [20.0–24.0] 11.0 13.0 12.0 [11.0–13.0]"
	if line != want {
		t.Errorf("overhead line:\n got %q\nwant %q\n%s", line, want, out.String())
	}
	if err := Compare(&out, t.TempDir(), []string{"aaa"}); err == nil {
		t.Error("an empty directory compared")
	}
}

// TestMissingTokensFailTheReport: a completed run whose stream lacks some
// of the model's tokens (or carries one twice) fails the benchmark, though
// its stream equals its stored log.
func TestMissingTokensFailTheReport(t *testing.T) {
	run := func(id string, tokens, dup int) RunResult {
		return RunResult{ID: id, Status: "completed", Calls: 1, TokensExpected: 60, Tokens: tokens, TokensDuplicated: dup}
	}
	for _, tc := range []struct {
		name   string
		runs   []RunResult
		ok     bool
		failed int
	}{
		{"all", []RunResult{run("a", 60, 0), run("b", 60, 0)}, true, 0},
		{"missing", []RunResult{run("a", 60, 0), run("b", 55, 0)}, false, 1},
		{"doubled", []RunResult{run("a", 60, 1)}, false, 1},
	} {
		r := newReport(Config{Runs: len(tc.runs)}, "h", tc.runs, nil, time.Second, nil, 0)
		if r.OK != tc.ok || r.TokenCheckFailed != tc.failed || r.CheckFailed != 0 {
			t.Errorf("%s: ok %v, token checks failed %d, stream checks failed %d; want ok %v, %d, 0", tc.name, r.OK, r.TokenCheckFailed, r.CheckFailed, tc.ok, tc.failed)
		}
	}
}
