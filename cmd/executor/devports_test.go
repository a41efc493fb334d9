package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/config"
)

// TestDevFailsFastOnTakenPort runs the real binary with each of its ports
// taken by a listener of the test: `executor dev` must exit non-zero within
// seconds, naming the port and its variable, without starting (or talking
// to) a Temporal server.
func TestDevFailsFastOnTakenPort(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "executor")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, variable := range []string{"TEMPORAL_DEV_PORT", "TEMPORAL_UI_PORT", "HTTP_ADDR"} {
		t.Run(variable, func(t *testing.T) {
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer taken.Close()
			port := taken.Addr().(*net.TCPAddr).Port
			ports := map[string]string{
				"TEMPORAL_DEV_PORT": strconv.Itoa(freePort(t)),
				"TEMPORAL_UI_PORT":  strconv.Itoa(freePort(t)),
				"HTTP_ADDR":         fmt.Sprintf("127.0.0.1:%d", freePort(t)),
			}
			if variable == "HTTP_ADDR" {
				ports[variable] = fmt.Sprintf("127.0.0.1:%d", port)
			} else {
				ports[variable] = strconv.Itoa(port)
			}
			cmd := exec.Command(bin, "dev")
			cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS=", "DATABASE_URL=", "DATA_DIR="+t.TempDir(),
				// Never run: the check comes first.
				"TEMPORAL_CLI="+filepath.Join(t.TempDir(), "no-temporal-cli"))
			for k, v := range ports {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			start := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("executor dev still running 10s after start with %s=%s taken:\n%s", variable, ports[variable], out.String())
			}
			if err == nil {
				t.Fatalf("executor dev exited 0 with %s taken:\n%s", variable, out.String())
			}
			msg := out.String()
			if !strings.Contains(msg, strconv.Itoa(port)) || !strings.Contains(msg, variable) {
				t.Errorf("message does not name port %d and %s:\n%s", port, variable, msg)
			}
			// The listener is this test's: the message names its process
			// and a port to set instead.
			if runtime.GOOS == "linux" && !strings.Contains(msg, fmt.Sprintf("taken by process %d (", os.Getpid())) {
				t.Errorf("message does not name the process holding the port (pid %d):\n%s", os.Getpid(), msg)
			}
			if !strings.Contains(msg, variable+"=") || !strings.Contains(msg, "(free now)") {
				t.Errorf("message does not say what to set %s to:\n%s", variable, msg)
			}
			if strings.Contains(msg, "dev server ready") || strings.Contains(msg, "starting Temporal dev server") {
				t.Errorf("a dev server was started despite the taken port:\n%s", msg)
			}
			t.Logf("exited after %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(msg))
		})
	}
}

// TestDevServerExitDuringStart: a dev server process that exits while
// starting (as the temporal CLI does when its port was taken after the
// check) fails the start at once with its output, instead of the start
// waiting for, or attaching to, whatever answers on the port.
func TestDevServerExitDuringStart(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("uses a shell script as the CLI")
	}
	cli := filepath.Join(t.TempDir(), "temporal")
	script := "#!/bin/sh\necho \"can't set frontend port $6: bind: address already in use\" >&2\nexit 1\n"
	if err := os.WriteFile(cli, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{
		TemporalCLI: cli, DataDir: t.TempDir(), TemporalNamespace: "default",
		DevServerPort: freePort(t), DevServerUIPort: freePort(t),
	}
	start := time.Now()
	ds, err := startDevServer(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		ds.Stop()
		t.Fatal("start succeeded with a dev server that exited")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the failure took %v", took)
	}
	port := strconv.Itoa(cfg.DevServerPort)
	if !strings.Contains(err.Error(), port) || !strings.Contains(err.Error(), "can't set frontend port") {
		t.Errorf("error does not name port %s or carry the server's message: %v", port, err)
	}
}

// TestSocketOwnedBy: the check that the server answering is the process
// started tells this process's listener from another process's.
func TestSocketOwnedBy(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	if owned, known := socketOwnedBy(os.Getpid(), port); !owned || !known {
		t.Errorf("own listener: owned=%v known=%v", owned, known)
	}
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	if owned, known := socketOwnedBy(other.Process.Pid, port); owned || !known {
		t.Errorf("another process: owned=%v known=%v", owned, known)
	}
}
