package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	temporallog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/models"
)

// devPort is a port `executor dev` needs free, with the variable that sets
// it.
type devPort struct {
	variable string
	addr     string // host:port
}

// devPorts are the ports `executor dev` binds: the dev server's frontend
// and Web UI on 127.0.0.1, and the API's HTTP_ADDR.
func devPorts(cfg config.Config) []devPort {
	return []devPort{
		{"TEMPORAL_DEV_PORT", net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.DevServerPort))},
		{"TEMPORAL_UI_PORT", net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.DevServerUIPort))},
		{"HTTP_ADDR", cfg.HTTPAddr},
	}
}

// checkPortsFree fails, naming the port, its variable, the process that
// holds it (where the system tells) and a free port to set instead, when
// one of ports cannot be listened on, so that `executor dev` stops before
// it starts anything, and never talks to a server it did not start.
func checkPortsFree(ports []devPort) error {
	for _, p := range ports {
		ln, err := net.Listen("tcp", p.addr)
		if err != nil {
			host, port, _ := net.SplitHostPort(p.addr)
			n, _ := strconv.Atoi(port)
			holder := "another process"
			if pid, cmdline, ok := portHolder(n); ok {
				holder = fmt.Sprintf("process %d (%s)", pid, cmdline)
			}
			instead := fmt.Sprintf("set %s to a free port", p.variable)
			if free := nextFreePort(host, n); free > 0 {
				value := strconv.Itoa(free)
				if p.variable == "HTTP_ADDR" {
					value = net.JoinHostPort(host, value)
				}
				instead = fmt.Sprintf("set %s=%s (free now)", p.variable, value)
			}
			hint := ""
			if p.variable == "TEMPORAL_DEV_PORT" {
				hint = fmt.Sprintf("; or, if it is a Temporal server you mean to use, set TEMPORAL_ADDRESS=127.0.0.1:%d", n)
			}
			return fmt.Errorf("%s: port %s (%s) is taken by %s: %w; stop it, or %s%s",
				p.variable, port, p.addr, holder, err, instead, hint)
		}
		ln.Close()
	}
	return nil
}

// nextFreePort is the first port after port on host that can be listened
// on now, or 0.
func nextFreePort(host string, port int) int {
	for n := port + 1; n <= port+100 && n < 65536; n++ {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(n)))
		if err == nil {
			ln.Close()
			return n
		}
	}
	return 0
}

// portHolder names the process listening on TCP port: its pid and command
// line. ok is false where the system does not tell (not Linux, or a
// process of another user).
func portHolder(port int) (pid int, cmdline string, ok bool) {
	inodes := listeningInodes(port)
	if len(inodes) == 0 {
		return 0, "", false
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, "", false
	}
	for _, p := range procs {
		id, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		if !pidHoldsSocket(id, inodes) {
			continue
		}
		raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", id))
		cmdline = strings.TrimSpace(strings.ReplaceAll(string(raw), "\x00", " "))
		if cmdline == "" {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", id))
			cmdline = strings.TrimSpace(string(comm))
		}
		if len(cmdline) > 120 {
			cmdline = cmdline[:120] + "…"
		}
		return id, cmdline, true
	}
	return 0, "", false
}

// devServer is a Temporal dev server process `executor dev` started.
type devServer struct {
	cmd      *exec.Cmd
	hostPort string
	exited   chan struct{} // closed when the process has exited
	waitErr  error         // the process's exit, once exited is closed
	stderr   *tailBuffer
	// stdout and errout pass the server's output on until Mute.
	stdout, errout *mutableWriter
}

// Mute stops passing the dev server's output on (its stderr's tail is
// still kept for errors): once `executor dev` shuts down, the server's
// "Stopping server..." and its internal workers' complaints about the
// closing connections are not news, and look like failures.
func (ds *devServer) Mute() {
	ds.stdout.mute()
	ds.errout.mute()
}

// mutableWriter writes to w until muted, then discards.
type mutableWriter struct {
	mu    sync.Mutex
	w     interface{ Write([]byte) (int, error) }
	muted bool
}

func (m *mutableWriter) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.muted {
		return len(p), nil
	}
	return m.w.Write(p)
}

func (m *mutableWriter) mute() {
	m.mu.Lock()
	m.muted = true
	m.mu.Unlock()
}

// startDevServer starts the temporal CLI's dev server on cfg's ports and
// waits until it answers. It fails at once when the process exits before
// (a port taken meanwhile, a bad flag), and checks that the server
// answering on the frontend port is this process: never one that happened
// to listen there.
func startDevServer(ctx context.Context, cfg config.Config, log *slog.Logger) (*devServer, error) {
	dbFile := filepath.Join(cfg.DataDir, "temporal.db")
	if err := mkdirAll(cfg.DataDir); err != nil {
		return nil, err
	}
	hostPort := net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.DevServerPort))
	args := []string{
		"server", "start-dev",
		"--ip", "127.0.0.1", "--port", strconv.Itoa(cfg.DevServerPort),
		"--ui-port", strconv.Itoa(cfg.DevServerUIPort),
		"--namespace", cfg.TemporalNamespace,
		"--db-filename", dbFile,
		"--log-level", "warn",
		"--dynamic-config-value", "frontend.enableServerVersionCheck=false",
	}
	// The runs' search attributes, so the Web UI and
	// `temporal workflow list --query 'HierarchyId="…"'` find them.
	sas := temporal.NewSearchAttributes(
		models.SearchHierarchyID.ValueSet(""), models.SearchRunStatus.ValueSet(""), models.SearchHierarchyName.ValueSet(""),
		models.SearchTenantID.ValueSet(""), models.SearchTotalTokens.ValueSet(0), models.SearchCostUSD.ValueSet(0), models.SearchForkedFrom.ValueSet(""),
	)
	for sa := range sas.GetUntypedValues() {
		args = append(args, "--search-attribute", sa.GetName()+"="+sa.GetValueType().String())
	}
	if cfg.DevServerTuned {
		args = append(args, devServerTuning...)
	}
	log.Info("starting Temporal dev server", "cli", cfg.TemporalCLI, "address", hostPort, "db", dbFile)
	ds := &devServer{hostPort: hostPort, exited: make(chan struct{}), stderr: &tailBuffer{max: 4096}}
	ds.cmd = exec.Command(cfg.TemporalCLI, args...)
	ds.stdout, ds.errout = &mutableWriter{w: os.Stdout}, &mutableWriter{w: os.Stderr}
	ds.cmd.Stdout = ds.stdout
	ds.cmd.Stderr = teeWriter{ds.errout, ds.stderr}
	ownProcessGroup(ds.cmd)
	if err := ds.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start Temporal dev server with %s (run `make run`, which builds it): %w", cfg.TemporalCLI, err)
	}
	go func() {
		ds.waitErr = ds.cmd.Wait()
		close(ds.exited)
	}()

	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c, err := ds.waitReady(startCtx, client.Options{
		HostPort:  hostPort,
		Namespace: cfg.TemporalNamespace,
		Logger:    temporallog.NewStructuredLogger(log.With("component", "devserver")),
	})
	if err != nil {
		ds.Stop()
		return nil, err
	}
	defer c.Close()
	// start-dev registers --search-attribute only in a new database; an
	// existing .data/temporal.db from an older version gets them here.
	if err := addSearchAttributes(startCtx, c, cfg.TemporalNamespace); err != nil {
		log.Warn("register search attributes", "error", err)
	}
	log.Info("Temporal dev server ready", "address", hostPort, "pid", ds.cmd.Process.Pid, "web_ui", fmt.Sprintf("http://localhost:%d", cfg.DevServerUIPort))
	return ds, nil
}

// waitReady dials the dev server until it answers, failing as soon as its
// process exits; once it answers, the process must still run and, where
// the system says (Linux), own the socket listening on the frontend port.
func (ds *devServer) waitReady(ctx context.Context, opts client.Options) (client.Client, error) {
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	var lastErr error
	for {
		select {
		case <-ds.exited:
			return nil, ds.exitError()
		default:
		}
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		c, err := client.DialContext(dctx, opts)
		cancel()
		if err == nil {
			if err := ds.verifyOwner(); err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("Temporal dev server at %s not ready: %w (last error: %v)", ds.hostPort, ctx.Err(), lastErr)
		case <-ds.exited:
			return nil, ds.exitError()
		case <-ticker.C:
		}
	}
}

// verifyOwner checks that the server that answered is the process started.
func (ds *devServer) verifyOwner() error {
	// A process failing to bind exits right away: give it a moment.
	select {
	case <-ds.exited:
		return ds.exitError()
	case <-time.After(200 * time.Millisecond):
	}
	_, port, _ := net.SplitHostPort(ds.hostPort)
	n, _ := strconv.Atoi(port)
	owned, known := socketOwnedBy(ds.cmd.Process.Pid, n)
	if known && !owned {
		return fmt.Errorf("TEMPORAL_DEV_PORT: port %d answers, but not from the dev server started (pid %d): another process listens there; stop it, set TEMPORAL_DEV_PORT to another port, or set TEMPORAL_ADDRESS to use it", n, ds.cmd.Process.Pid)
	}
	return nil
}

func (ds *devServer) exitError() error {
	_, port, _ := net.SplitHostPort(ds.hostPort)
	msg := strings.TrimSpace(ds.stderr.String())
	if msg == "" {
		msg = "no output"
	}
	return fmt.Errorf("Temporal dev server (port %s) exited while starting (%v): %s", port, ds.waitErr, msg)
}

// FrontendHostPort is the dev server's gRPC address.
func (ds *devServer) FrontendHostPort() string { return ds.hostPort }

// Stop interrupts the dev server and waits for it to exit; after 30 s it
// kills it.
func (ds *devServer) Stop() error {
	select {
	case <-ds.exited:
		return nil
	default:
	}
	if err := ds.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		ds.cmd.Process.Kill()
	}
	select {
	case <-ds.exited:
	case <-time.After(30 * time.Second):
		ds.cmd.Process.Kill()
		<-ds.exited
	}
	var exit *exec.ExitError
	if errors.As(ds.waitErr, &exit) && !exit.Exited() {
		// Ended by the signal.
		return nil
	}
	return ds.waitErr
}

// socketOwnedBy reports whether a socket listening on TCP port belongs to
// process pid; known is false where /proc cannot tell (not Linux).
func socketOwnedBy(pid, port int) (owned, known bool) {
	inodes := listeningInodes(port)
	if len(inodes) == 0 {
		return false, false
	}
	if _, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err != nil {
		return false, false
	}
	return pidHoldsSocket(pid, inodes), true
}

// listeningInodes are the inodes of the sockets listening on TCP port, from
// /proc/net/tcp and tcp6 (none where there is no /proc).
func listeningInodes(port int) map[string]bool {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			_, hexPort, ok := strings.Cut(fields[1], ":")
			if p, err := strconv.ParseInt(hexPort, 16, 32); ok && err == nil && int(p) == port {
				inodes[fields[9]] = true
			}
		}
		fh.Close()
	}
	return inodes
}

// pidHoldsSocket reports whether process pid has one of the socket inodes
// open.
func pidHoldsSocket(pid int, inodes map[string]bool) bool {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false
	}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err != nil {
			continue
		}
		if inode, ok := strings.CutPrefix(link, "socket:["); ok && inodes[strings.TrimSuffix(inode, "]")] {
			return true
		}
	}
	return false
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// teeWriter writes to both writers, ignoring the second's errors.
type teeWriter struct {
	w    interface{ Write([]byte) (int, error) }
	tail *tailBuffer
}

func (t teeWriter) Write(p []byte) (int, error) {
	t.tail.Write(p)
	return t.w.Write(p)
}
