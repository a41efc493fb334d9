// Package layering holds the test that keeps the module's layers apart:
// the rules of docs/architecture.md, checked against `go list`.
package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/op-stack/executor"

// rule forbids packages under From (a path relative to the module, "api"
// meaning api and api/...) to import what Forbidden reports; Transitive
// extends the ban to everything they reach through the module's packages.
type rule struct {
	From       string
	Why        string
	Transitive bool
	Forbidden  func(rel string) bool
}

// under reports whether rel is pkg or one of its subpackages.
func under(rel, pkg string) bool { return rel == pkg || strings.HasPrefix(rel, pkg+"/") }

func anyOf(pkgs ...string) func(string) bool {
	return func(rel string) bool {
		for _, p := range pkgs {
			if under(rel, p) {
				return true
			}
		}
		return false
	}
}

// rules are the layering of docs/architecture.md ("What each package may
// import"). Only a package's own imports count, not its tests'.
var rules = []rule{
	{From: "api", Transitive: true, Forbidden: anyOf("activities"),
		Why: "the API starts workflows and reads the store; it never runs activity code"},
	{From: "models", Forbidden: func(string) bool { return true },
		Why: "models is the shared vocabulary: it imports no package of the module"},
	{From: "templating", Forbidden: func(rel string) bool { return rel != "models" },
		Why: "templating imports nothing of the module but models"},
	{From: "mcpserve", Forbidden: func(rel string) bool { return rel != "models" && rel != "auth" },
		Why: "the MCP server reaches runs only through the Backend the API gives it: it imports nothing of the module but models and auth"},
	{From: "workflows", Forbidden: anyOf("store", "llm", "api", "templating"),
		Why: "workflow code reaches the world only through activities"},
	{From: "stream", Transitive: true, Forbidden: anyOf("api", "activities", "workflows"),
		Why: "the stream bridge serves runs' logs to any protocol; routing, auth and the REST surfaces are the API's, which calls it"},
	{From: "a2aserve", Transitive: true, Forbidden: func(rel string) bool { return rel != "client" && rel != "models" },
		Why: "the A2A server speaks to the service only through its API (client, in-process), so the API's access control is its own"},
}

// graph maps a package of the module (relative path, "" for the root) to
// the packages of the module it imports.
type graph map[string][]string

// violation is one forbidden import, with the chain that leads to it.
type violation struct {
	Rule  rule
	Chain []string
}

func (v violation) String() string {
	full := make([]string, len(v.Chain))
	for i, p := range v.Chain {
		full[i] = module + "/" + p
	}
	return fmt.Sprintf("%s\n\t%s", v.Rule.Why, strings.Join(full, "\n\t  imports "))
}

// check applies the rules to g; every package breaking a rule is reported
// once, with its shortest chain.
func check(g graph, rules []rule) []violation {
	var out []violation
	pkgs := make([]string, 0, len(g))
	for p := range g {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, r := range rules {
		for _, p := range pkgs {
			if !under(p, r.From) {
				continue
			}
			if chain := find(g, p, r); chain != nil {
				out = append(out, violation{Rule: r, Chain: chain})
			}
		}
	}
	return out
}

// find returns the shortest import chain from start to a package the rule
// forbids, or nil. Without Transitive only start's own imports count.
func find(g graph, start string, r rule) []string {
	parent := map[string]string{start: ""}
	queue := []string{start}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, imp := range g[p] {
			if _, seen := parent[imp]; seen {
				continue
			}
			parent[imp] = p
			// A package may import its own subpackages (api imports
			// api/openapi) unless the rule forbids them.
			if r.Forbidden(imp) && !under(imp, r.From) {
				var chain []string
				for q := imp; q != start; q = parent[q] {
					chain = append([]string{q}, chain...)
				}
				return append([]string{start}, chain...)
			}
			if r.Transitive {
				queue = append(queue, imp)
			}
		}
	}
	return nil
}

// loadGraph reads the module's packages with `go list -json`.
func loadGraph(t *testing.T) graph {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	g := graph{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var pkg struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&pkg); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		rel, ok := relative(pkg.ImportPath)
		if !ok {
			continue
		}
		g[rel] = nil
		for _, imp := range pkg.Imports {
			if r, ok := relative(imp); ok {
				g[rel] = append(g[rel], r)
			}
		}
	}
	return g
}

func relative(path string) (string, bool) {
	if path == module {
		return "", true
	}
	rel, ok := strings.CutPrefix(path, module+"/")
	return rel, ok
}

// TestLayering fails, printing the import chain, when a package of the
// module imports across the layers of docs/architecture.md.
func TestLayering(t *testing.T) {
	g := loadGraph(t)
	for _, pkg := range []string{"api", "models", "templating", "workflows", "activities", "stream"} {
		if _, ok := g[pkg]; !ok {
			t.Fatalf("go list did not report %s/%s: the rules would check nothing", module, pkg)
		}
	}
	for _, v := range check(g, rules) {
		t.Errorf("forbidden import: %s", v)
	}
}

// TestCheckFindsChains runs the checker on a made-up graph (a fake, not
// the module), so that a rule that can no longer fire is noticed.
func TestCheckFindsChains(t *testing.T) {
	g := graph{
		"api":          {"api/openapi", "store"},
		"api/openapi":  nil,
		"api/v1":       {"worker"},
		"worker":       {"activities"},
		"activities":   {"models", "templating"},
		"models":       {"store"},
		"templating":   {"models"},
		"workflows":    {"activities", "llm"},
		"store":        nil,
		"llm":          nil,
		"fine":         {"activities"},
		"models/inner": nil,
		"stream":       {"models", "stream/spec001"},
		"stream/agui":  {"stream", "fine"},
	}
	var got []string
	for _, v := range check(g, rules) {
		got = append(got, strings.Join(v.Chain, " > "))
	}
	want := []string{
		"api/v1 > worker > activities",
		"models > store",
		"workflows > llm",
		"stream/agui > fine > activities",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// allowance is one row of docs/architecture.md's import table: the module
// packages a package may import, or any but Except.
type allowance struct {
	Any    bool
	Except []string
	Allow  []string
}

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	pkgName    = regexp.MustCompile(`^[a-z][a-z0-9_]*(/[a-z0-9_]+)*$`)
)

// packagesIn lists the backticked package paths of a table cell, without
// their trailing slashes (other code, like a method name, is skipped).
func packagesIn(cell string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
		if p := strings.TrimSuffix(m[1], "/"); pkgName.MatchString(p) {
			out = append(out, p)
		}
	}
	return out
}

// parseTable reads the "What each package may import" table.
func parseTable(t *testing.T, doc string) map[string]allowance {
	t.Helper()
	_, section, ok := strings.Cut(doc, "## What each package may import")
	if !ok {
		t.Fatal(`docs/architecture.md has no "What each package may import" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	table := map[string]allowance{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue // not a row of packages (prose, header, separator)
		}
		may := cells[3]
		var a allowance
		if strings.HasPrefix(strings.TrimSpace(may), "any package") {
			a = allowance{Any: true, Except: packagesIn(may)}
		} else {
			// "never …" names what the rules forbid, not what is allowed.
			allowed, _, _ := strings.Cut(may, "never")
			a = allowance{Allow: packagesIn(allowed)}
		}
		for _, p := range packagesIn(cells[1]) {
			table[p] = a
		}
	}
	if len(table) == 0 {
		t.Fatal("docs/architecture.md's import table has no rows")
	}
	return table
}

// TestArchitectureTable keeps docs/architecture.md's table of what each
// package may import true: every package that imports any of the module
// has a row, and imports nothing its row leaves out.
func TestArchitectureTable(t *testing.T) {
	raw, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	table := parseTable(t, string(raw))
	g := loadGraph(t)
	for p := range table {
		if _, ok := g[p]; !ok {
			t.Errorf("docs/architecture.md has a row for %s, which is not a package of the module", p)
		}
	}
	pkgs := make([]string, 0, len(g))
	for p := range g {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		if len(g[p]) == 0 {
			continue
		}
		a, ok := table[p]
		if !ok {
			t.Errorf("docs/architecture.md's import table has no row for %s, which imports %s", p, strings.Join(g[p], ", "))
			continue
		}
		for _, imp := range g[p] {
			if a.Any && !slices.ContainsFunc(a.Except, func(e string) bool { return under(imp, e) }) {
				continue
			}
			if !a.Any && slices.Contains(a.Allow, imp) {
				continue
			}
			t.Errorf("%s imports %s, which its row of docs/architecture.md does not allow", p, imp)
		}
	}
}
