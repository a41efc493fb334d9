//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup starts cmd in a process group of its own, so that Ctrl-C
// in a terminal (SIGINT to the foreground group) reaches `executor dev`
// only: it then stops the dev server last, after its worker and API, which
// would otherwise lose the server mid-shutdown and log connection errors.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
