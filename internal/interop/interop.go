// Package interop gives tests the third-party npm packages they run
// against (e2e/interop's package.json, pinned by its package-lock.json):
// reference MCP servers and clients, AG-UI's and A2A's SDKs. Nobody here
// wrote them, which is the point. Several test packages use them and
// `go test ./...` runs packages at once, so the install takes a file lock:
// the first test to ask runs `npm ci`, the others wait for it.
package interop

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Dir returns the absolute path of e2e/interop with its packages
// installed: npm ci runs when node_modules lacks one of need (paths under
// node_modules, e.g. "@ag-ui/client/package.json") or is older than
// package-lock.json. Without node and npm the test is skipped, loudly,
// except in CI (CI=true), where it fails.
func Dir(t testing.TB, need ...string) string {
	t.Helper()
	for _, bin := range []string{"node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is required in CI for the interop tests (e2e/interop)", bin)
			}
			t.Skipf("SKIPPED: %s is not installed, so this test cannot run the third-party packages of e2e/interop", bin)
		}
	}
	dir, err := findDir()
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := lock(filepath.Join(dir, ".install.lock"))
	if err != nil {
		t.Fatalf("lock e2e/interop: %v", err)
	}
	defer unlock()
	if installed(dir, need) {
		return dir
	}
	ci := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	ci.Dir = dir
	if out, err := ci.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in e2e/interop: %v\n%s", err, out)
	}
	if !installed(dir, need) {
		t.Fatalf("npm ci in e2e/interop did not install %v: is it in package.json?", need)
	}
	return dir
}

// installed says node_modules holds need and is no older than the lock
// file (npm ci writes node_modules/.package-lock.json last).
func installed(dir string, need []string) bool {
	lockFile, err := os.Stat(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return false
	}
	hidden, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json"))
	if err != nil || hidden.ModTime().Before(lockFile.ModTime()) {
		return false
	}
	for _, n := range need {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", n)); err != nil {
			return false
		}
	}
	return true
}

// findDir finds e2e/interop from the test's working directory (its
// package's directory), going up to the module's root.
func findDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "e2e", "interop"), nil
		}
		if filepath.Dir(d) == d {
			return "", os.ErrNotExist
		}
	}
}
