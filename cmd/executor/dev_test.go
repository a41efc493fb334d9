package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDevCommand runs the real binary the way `make run` does: it must
// start a Temporal dev server with its Web UI, serve the API on SQLite under
// DATA_DIR, and on Ctrl-C stop both, quietly: neither a cancelled run nor
// the shutdown logs anything that looks like a failure.
func TestDevCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server")
	}
	cli := temporalCLI(t)
	bin := filepath.Join(t.TempDir(), "executor")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	dataDir := t.TempDir()
	httpPort, grpcPort, uiPort := freePort(t), freePort(t), freePort(t)
	cmd := exec.Command(bin, "dev")
	// A process group of its own, as a shell gives a command it runs, so
	// that the test can press Ctrl-C the way a terminal does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(),
		"OPENAI_API_KEY=", "OPENROUTER_API_KEY=", "COMPATIBLE_BASE_URL=", "AWS_BEDROCK_ENABLED=false",
		"LLM_DEFAULT_PROVIDER=", "LLM_MODELS=", "OFFLINE_TOKEN_DELAY=100ms", "LOG_LEVEL=info", "LOG_FORMAT=",
		"TEMPORAL_ADDRESS=", "DATABASE_URL=",
		"DATA_DIR="+dataDir,
		"TEMPORAL_CLI="+cli,
		fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", httpPort),
		fmt.Sprintf("TEMPORAL_DEV_PORT=%d", grpcPort),
		fmt.Sprintf("TEMPORAL_UI_PORT=%d", uiPort),
	)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("executor dev output:\n%s", logs.String())
		}
	})

	base := fmt.Sprintf("http://127.0.0.1:%d/api/executor/v1/hierarchies", httpPort)
	body := `{"name":"dev","global_supervisor_agent":{"agent_id":"gs-1"},"teams":[{"name":"t","workers":[{"agent_id":"w-1","name":"w"}]}]}`
	var created struct {
		Code int `json:"code"`
		Data struct {
			HierarchyID string `json:"hierarchy_id"`
		} `json:"data"`
	}
	waitFor(t, 90*time.Second, exited, func() error {
		resp, err := http.Post(base+"/create", "application/json", strings.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&created)
	})
	if created.Code != 0 || created.Data.HierarchyID == "" {
		t.Fatalf("create = %+v", created)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "executor.db")); err != nil {
		t.Errorf("embedded SQLite database not under DATA_DIR: %v", err)
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", uiPort))
	if err != nil {
		t.Fatalf("Temporal Web UI: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("Temporal Web UI answered %d", resp.StatusCode)
	}

	// A run cancelled mid-way, then Ctrl-C: the terminal sends SIGINT to
	// the whole process group.
	runID := devCancelRun(t, fmt.Sprintf("http://127.0.0.1:%d/api/executor/v1", httpPort), created.Data.HierarchyID)
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("executor dev exited with %v after Ctrl-C", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("executor dev did not exit within 60s of Ctrl-C")
	}
	checkQuietShutdown(t, logs.String(), runID)
	// The dev server must be gone with it.
	waitFor(t, 15*time.Second, nil, func() error {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", grpcPort), time.Second)
		if err != nil {
			return nil
		}
		c.Close()
		return fmt.Errorf("Temporal dev server still listening on %d", grpcPort)
	})
}

// temporalCLI finds the temporal CLI `make test` built (TEMPORAL_CLI), or
// the one in the repository's bin/.
func temporalCLI(t *testing.T) string {
	t.Helper()
	path := os.Getenv("TEMPORAL_CLI")
	if path == "" {
		path = "../../bin/temporal"
	}
	abs, err := filepath.Abs(path)
	if err == nil {
		_, err = os.Stat(abs)
	}
	if err != nil {
		t.Fatalf("temporal CLI not found at %s (run `make temporal-cli`): %v", path, err)
	}
	return abs
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitFor polls check until it returns nil, the process exits or the
// deadline passes.
func waitFor(t *testing.T, d time.Duration, exited <-chan error, check func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after %v: %v", d, err)
		}
		select {
		case err := <-exited:
			t.Fatalf("process exited early: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// devCancelRun starts a run of hierarchy on the offline model, cancels it
// once it is running and waits until it is cancelled.
func devCancelRun(t *testing.T, api, hierarchy string) string {
	t.Helper()
	call := func(path, body string, out any) {
		t.Helper()
		resp, err := http.Post(api+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var env struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || env.Code != 0 {
			t.Fatalf("%s: %v %d %s", path, err, env.Code, env.Message)
		}
		if out != nil {
			json.Unmarshal(env.Data, out)
		}
	}
	var run struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	call("/runs/start", fmt.Sprintf(`{"hierarchy_id":%q,"task":"take your time"}`, hierarchy), &run)
	id := run.ID
	waitFor(t, 30*time.Second, nil, func() error {
		call("/runs/get", fmt.Sprintf(`{"id":%q}`, id), &run)
		if run.Status != "running" {
			return fmt.Errorf("run is %s", run.Status)
		}
		return nil
	})
	// Let an LLM call get under way, so the cancel interrupts an activity.
	time.Sleep(time.Second)
	call("/runs/cancel", fmt.Sprintf(`{"id":%q}`, id), nil)
	waitFor(t, 30*time.Second, nil, func() error {
		call("/runs/get", fmt.Sprintf(`{"id":%q}`, id), &run)
		if run.Status != "cancelled" {
			return fmt.Errorf("run is %s", run.Status)
		}
		return nil
	})
	return id
}

// checkQuietShutdown fails on output of `executor dev` that makes a
// normal cancel or Ctrl-C look like a failure: a line at WARN or ERROR
// (the SDK's "Activity error." for a cancelled activity among them), or
// the dev server's own output once shutdown has begun.
func checkQuietShutdown(t *testing.T, logs, runID string) {
	t.Helper()
	shutting := false
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "shutting down") {
			shutting = true
		}
		slogLine := strings.HasPrefix(line, "time=")
		switch {
		case slogLine && (strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN")):
			t.Errorf("a normal cancel and Ctrl-C logged %q", line)
		case strings.Contains(line, "Activity error") && !strings.Contains(line, "level=INFO"):
			t.Errorf("a cancelled activity logged as an error: %q", line)
		case shutting && !slogLine && strings.TrimSpace(line) != "":
			t.Errorf("the dev server wrote during shutdown: %q", line)
		}
	}
	if !shutting || !strings.Contains(logs, "shutdown complete") {
		t.Errorf("no shutdown in the logs:\n%s", logs)
	}
	if !strings.Contains(logs, runID) {
		t.Logf("the run %s is not in the logs (fine: nothing failed)", runID)
	}
}
