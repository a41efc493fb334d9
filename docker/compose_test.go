// Package docker holds the container build and the local compose stack of
// op-stack-executor (Dockerfile, compose.yaml; docs/operations.md). Nothing
// here needs Docker: the tests parse compose.yaml with the compose-spec
// loader (which also validates it against the compose specification) and
// the Dockerfile as text, and check them against the service's own
// configuration code.
package docker

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/models"
)

const (
	composeFile    = "compose.yaml"
	dockerfile     = "Dockerfile"
	dockerignore   = "Dockerfile.dockerignore"
	projectName    = "op-stack-executor"
	executorImage  = "op-stack/executor:dev"
	apiPublished   = "8080"
	uiPublished    = "8233"
	uiContainer    = 8080
	temporalPort   = "7233"
	postgresPort   = "5432"
	healthy        = types.ServiceConditionHealthy
	completed      = types.ServiceConditionCompletedSuccessfully
	svcPostgres    = "postgresql"
	svcTemporal    = "temporal"
	svcSearchAttrs = "temporal-search-attributes"
	svcUI          = "temporal-ui"
	svcMigrate     = "executor-migrate"
	svcAPI         = "executor-api"
	svcWorker      = "executor-worker"
)

var (
	expectedServices  = []string{svcPostgres, svcTemporal, svcSearchAttrs, svcUI, svcMigrate, svcAPI, svcWorker}
	executorServices  = []string{svcMigrate, svcAPI, svcWorker}
	longRunning       = []string{svcPostgres, svcTemporal, svcUI, svcAPI, svcWorker}
	oneShot           = []string{svcSearchAttrs, svcMigrate}
	executorCommands  = map[string][]string{svcMigrate: {"migrate"}, svcAPI: {"serve", "-role", "api"}, svcWorker: {"serve", "-role", "worker"}}
	sdkPrefixes       = []string{"AWS_", "OTEL_"} // read by the AWS and OpenTelemetry SDKs, not by package config
	requiredDependsOn = []struct{ from, to, condition string }{
		{svcTemporal, svcPostgres, healthy},
		{svcSearchAttrs, svcTemporal, healthy},
		{svcUI, svcTemporal, healthy},
		{svcMigrate, svcPostgres, healthy},
		{svcAPI, svcPostgres, healthy},
		{svcAPI, svcTemporal, healthy},
		{svcAPI, svcSearchAttrs, completed},
		{svcAPI, svcMigrate, completed},
		{svcWorker, svcPostgres, healthy},
		{svcWorker, svcTemporal, healthy},
		{svcWorker, svcSearchAttrs, completed},
		{svcWorker, svcMigrate, completed},
	}
)

// loadProject loads compose.yaml with the compose-spec loader, which
// validates it against the compose schema. interpolate=false keeps every
// ${…} as written (to see what comes from the environment); true resolves
// them against an empty environment, i.e. to the file's own defaults, as
// `docker compose up` does on a machine that sets nothing.
func loadProject(t *testing.T, interpolate bool) *types.Project {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	details := types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(dir, composeFile)}},
		Environment: types.Mapping{},
	}
	p, err := loader.LoadWithContext(context.Background(), details, func(o *loader.Options) {
		o.SetProjectName(projectName, true)
		o.SkipInterpolation = !interpolate
	})
	if err != nil {
		t.Fatalf("%s does not load as a compose file (interpolate=%v): %v", composeFile, interpolate, err)
	}
	return p
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, ok := p.Services[name]
	if !ok {
		t.Fatalf("%s: service %q is missing", composeFile, name)
	}
	return s
}

func env(s types.ServiceConfig, name string) (string, bool) {
	v, ok := s.Environment[name]
	if !ok || v == nil {
		return "", false
	}
	return *v, true
}

func mustEnv(t *testing.T, s types.ServiceConfig, name string) string {
	t.Helper()
	v, ok := env(s, name)
	if !ok {
		t.Fatalf("%s: service %s sets no %s", composeFile, s.Name, name)
	}
	return v
}

func TestServicesExist(t *testing.T) {
	p := loadProject(t, true)
	if p.Name != projectName {
		t.Errorf("project name = %q, want %q", p.Name, projectName)
	}
	for _, name := range expectedServices {
		if _, ok := p.Services[name]; !ok {
			t.Errorf("%s: service %q is missing", composeFile, name)
		}
	}
	for name := range p.Services {
		if !slices.Contains(expectedServices, name) {
			t.Logf("extra service %q (checked like the others; add it to expectedServices and docs/operations.md)", name)
		}
	}
	for name, want := range executorCommands {
		s := service(t, p, name)
		if s.Image != executorImage {
			t.Errorf("%s: image = %q, want %q (all executor services run the one image)", name, s.Image, executorImage)
		}
		if got := []string(s.Command); !slices.Equal(got, want) {
			t.Errorf("%s: command = %q, want %q", name, got, want)
		}
	}
}

// imageRef splits an image reference into repository, tag and digest.
func imageRef(ref string) (repo, tag, digest string) {
	if i := strings.Index(ref, "@"); i >= 0 {
		ref, digest = ref[:i], ref[i+1:]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref, tag = ref[:i], ref[i+1:]
	}
	return ref, tag, digest
}

var (
	digestRE     = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	semverTagRE  = regexp.MustCompile(`^v?\d+\.\d+\.\d+([-.+_][0-9A-Za-z.+_-]*)?$`)
	postgresTag  = regexp.MustCompile(`^\d+\.\d+([-.][0-9A-Za-z.-]*)?$`) // PostgreSQL 10+ releases are major.minor
	distrolessRE = regexp.MustCompile(`^gcr\.io/distroless/[a-z0-9-]+-debian\d+$`)
)

// pinned reports whether an image reference names one exact release:
// a digest, or a tag carrying the full version (x.y.z; x.y for PostgreSQL,
// whose releases have two numbers). Floating tags (latest, 16, 1.29,
// 1.26-bookworm) are refused. One exception, by name: distroless images
// have no version tags, only the Debian release in the name and the
// nonroot variant; they are accepted and documented as "pin by digest for
// reproducible builds".
func pinned(ref string) (bool, string) {
	repo, tag, digest := imageRef(ref)
	switch {
	case digest != "":
		if !digestRE.MatchString(digest) {
			return false, fmt.Sprintf("malformed digest %q", digest)
		}
		return true, "digest"
	case tag == "":
		return false, "no tag (Docker reads that as latest)"
	case tag == "latest":
		return false, "the latest tag"
	case repo == "postgres" || repo == "docker.io/library/postgres":
		if postgresTag.MatchString(tag) {
			return true, "exact PostgreSQL release"
		}
		return false, fmt.Sprintf("tag %q is not an exact PostgreSQL release (want e.g. 16.4)", tag)
	case distrolessRE.MatchString(repo) && tag == "nonroot":
		return true, "distroless: Debian release in the name, nonroot variant"
	case semverTagRE.MatchString(tag):
		return true, "exact version tag"
	}
	return false, fmt.Sprintf("tag %q is not an exact version (want x.y.z…, e.g. 1.29.1)", tag)
}

func TestImagesPinned(t *testing.T) {
	p := loadProject(t, true)
	for _, name := range p.ServiceNames() {
		s := p.Services[name]
		if s.Image == "" {
			t.Errorf("%s: no image", name)
			continue
		}
		if s.Build != nil {
			// Built here: the tag names the local build, it is never pulled.
			_, tag, _ := imageRef(s.Image)
			if tag == "" || tag == "latest" {
				t.Errorf("%s: built image %q needs an explicit tag other than latest", name, s.Image)
			}
			continue
		}
		if ok, why := pinned(s.Image); !ok {
			t.Errorf("%s: image %q is not pinned: %s", name, s.Image, why)
		}
	}
}

func TestPinnedRules(t *testing.T) {
	for ref, want := range map[string]bool{
		"postgres:16.4":                true,
		"postgres:16":                  false,
		"postgres":                     false,
		"temporalio/auto-setup:1.29.1": true,
		"temporalio/admin-tools:1.29.1-tctl-1.18.4-cli-1.5.0": true,
		"temporalio/admin-tools:1.29":                         false,
		"temporalio/ui:latest":                                false,
		"golang:1.26.8-bookworm":                              true,
		"golang:1.26-bookworm":                                false,
		"gcr.io/distroless/static-debian12:nonroot":           true,
		"gcr.io/distroless/static-debian12:latest":            false,
		"localhost:5000/x:1.2.3":                              true,
		"localhost:5000/x":                                    false,
		"x@sha256:" + strings.Repeat("a", 64):                 true,
	} {
		if got, why := pinned(ref); got != want {
			t.Errorf("pinned(%q) = %v (%s), want %v", ref, got, why, want)
		}
	}
}

// configEnv sets exactly the service's environment for package config:
// every variable config reads is set to the service's value or to "" (which
// config treats as unset), so the host's environment cannot leak in.
func configEnv(t *testing.T, s types.ServiceConfig) config.Config {
	t.Helper()
	for _, v := range config.Vars() {
		value, _ := env(s, v.Name)
		t.Setenv(v.Name, value)
	}
	cfg, err := config.Load()
	if err != nil {
		t.Fatalf("%s: config.Load refuses the service's environment: %v", s.Name, err)
	}
	return cfg
}

func TestExecutorEnvironment(t *testing.T) {
	p := loadProject(t, true)
	known := map[string]bool{}
	for _, v := range config.Vars() {
		known[v.Name] = true
	}
	for _, name := range executorServices {
		s := service(t, p, name)
		for _, k := range sortedKeys(s.Environment) {
			if known[k] || slices.ContainsFunc(sdkPrefixes, func(p string) bool { return strings.HasPrefix(k, p) }) {
				continue
			}
			t.Errorf("%s: environment variable %s is read by nothing: not in config.Vars() (docs/configuration.md) and not an SDK prefix %v", name, k, sdkPrefixes)
		}
		configEnv(t, s) // every value parses
	}
}

func TestDatabaseURL(t *testing.T) {
	p := loadProject(t, true)
	pg := service(t, p, svcPostgres)
	for _, name := range executorServices {
		s := service(t, p, name)
		raw := mustEnv(t, s, "DATABASE_URL")
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("%s: DATABASE_URL %q: %v", name, raw, err)
		}
		if u.Scheme != "postgres" && u.Scheme != "postgresql" {
			t.Errorf("%s: DATABASE_URL scheme %q, want postgres", name, u.Scheme)
		}
		if host := u.Hostname(); host != svcPostgres {
			t.Errorf("%s: DATABASE_URL host %q, want the %s service", name, host, svcPostgres)
		}
		if port := u.Port(); port != postgresPort {
			t.Errorf("%s: DATABASE_URL port %q, want %s", name, port, postgresPort)
		}
		db := strings.TrimPrefix(u.Path, "/")
		if db != "executor" {
			t.Errorf("%s: DATABASE_URL database %q, want executor", name, db)
		}
		if want := mustEnv(t, pg, "EXECUTOR_DB_NAME"); db != want {
			t.Errorf("%s: DATABASE_URL database %q, but %s creates %q (EXECUTOR_DB_NAME)", name, db, svcPostgres, want)
		}
		if want := mustEnv(t, pg, "EXECUTOR_DB_USER"); u.User.Username() != want {
			t.Errorf("%s: DATABASE_URL user %q, but %s creates role %q (EXECUTOR_DB_USER)", name, u.User.Username(), svcPostgres, want)
		}
		pass, _ := u.User.Password()
		if want := mustEnv(t, pg, "EXECUTOR_DB_PASSWORD"); pass != want {
			t.Errorf("%s: DATABASE_URL password differs from %s's EXECUTOR_DB_PASSWORD (same default and variable expected)", name, svcPostgres)
		}
		if u.Query().Get("sslmode") == "" {
			t.Errorf("%s: DATABASE_URL sets no sslmode", name)
		}
		if cfg := configEnv(t, s); cfg.DatabaseURL != raw {
			t.Errorf("%s: config.DatabaseURL = %q, want %q", name, cfg.DatabaseURL, raw)
		}
	}
	// The executor database and role come from the init script mounted into
	// the postgres image's /docker-entrypoint-initdb.d.
	var initDir string
	for _, v := range pg.Volumes {
		if v.Target == "/docker-entrypoint-initdb.d" {
			initDir = v.Source
		}
	}
	if initDir == "" {
		t.Fatalf("%s: nothing is mounted on /docker-entrypoint-initdb.d, so the executor database is never created", svcPostgres)
	}
	entries, err := os.ReadDir(initDir)
	if err != nil {
		t.Fatalf("%s: init scripts: %v", svcPostgres, err)
	}
	var script strings.Builder
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(initDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		script.Write(b)
	}
	for _, want := range []string{"CREATE DATABASE", "CREATE ROLE", "EXECUTOR_DB_NAME", "EXECUTOR_DB_USER", "EXECUTOR_DB_PASSWORD"} {
		if !strings.Contains(script.String(), want) {
			t.Errorf("%s: the init scripts in %s never mention %s", svcPostgres, initDir, want)
		}
	}
	// Temporal's persistence points at the same server and superuser.
	tmp := service(t, p, svcTemporal)
	for k, want := range map[string]string{
		"DB":             "postgres12",
		"DB_PORT":        postgresPort,
		"POSTGRES_SEEDS": svcPostgres,
		"POSTGRES_USER":  mustEnv(t, pg, "POSTGRES_USER"),
		"POSTGRES_PWD":   mustEnv(t, pg, "POSTGRES_PASSWORD"),
	} {
		if got := mustEnv(t, tmp, k); got != want {
			t.Errorf("%s: %s = %q, want %q", svcTemporal, k, got, want)
		}
	}
}

func TestTemporalWiring(t *testing.T) {
	p := loadProject(t, true)
	tmp := service(t, p, svcTemporal)
	namespace := mustEnv(t, tmp, "DEFAULT_NAMESPACE")
	for _, name := range []string{svcAPI, svcWorker, svcSearchAttrs, svcUI} {
		s := service(t, p, name)
		addr := mustEnv(t, s, "TEMPORAL_ADDRESS")
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host != svcTemporal || port != temporalPort {
			t.Errorf("%s: TEMPORAL_ADDRESS = %q, want %s:%s (the %s service's frontend)", name, addr, svcTemporal, temporalPort, svcTemporal)
		}
		if name == svcUI {
			continue
		}
		if ns := mustEnv(t, s, "TEMPORAL_NAMESPACE"); ns != namespace {
			t.Errorf("%s: TEMPORAL_NAMESPACE = %q, but %s creates namespace %q (DEFAULT_NAMESPACE)", name, ns, svcTemporal, namespace)
		}
	}
	// The API starts runs on the queue the worker polls, in the same
	// namespace and database.
	api, worker := configEnv(t, service(t, p, svcAPI)), configEnv(t, service(t, p, svcWorker))
	for _, c := range []struct{ what, api, worker string }{
		{"TEMPORAL_ADDRESS", api.TemporalAddress, worker.TemporalAddress},
		{"TEMPORAL_NAMESPACE", api.TemporalNamespace, worker.TemporalNamespace},
		{"TEMPORAL_TASK_QUEUE", api.TaskQueue, worker.TaskQueue},
		{"DATABASE_URL", api.DatabaseURL, worker.DatabaseURL},
	} {
		if c.api != c.worker {
			t.Errorf("%s differs: %s has %q, %s has %q", c.what, svcAPI, c.api, svcWorker, c.worker)
		}
	}
	if migrate := configEnv(t, service(t, p, svcMigrate)); migrate.DatabaseURL != api.DatabaseURL {
		t.Errorf("%s migrates %q, but the API uses %q", svcMigrate, migrate.DatabaseURL, api.DatabaseURL)
	}
	// The healthcheck waits for the namespace the executor uses.
	if hc := tmp.HealthCheck; hc == nil || !strings.Contains(strings.Join(hc.Test, " "), "--namespace "+namespace) {
		t.Errorf("%s: the healthcheck should wait for namespace %q (temporal operator namespace describe --namespace %s)", svcTemporal, namespace, namespace)
	}
}

var (
	createLineRE = regexp.MustCompile(`temporal operator search-attribute create [^\n]*`)
	nameTypeRE   = regexp.MustCompile(`--name\s+(\S+)\s+--type\s+(\S+)`)
	checkLoopRE  = regexp.MustCompile(`for name in ([A-Za-z0-9_ ]+);`)
)

func TestSearchAttributes(t *testing.T) {
	p := loadProject(t, true)
	s := service(t, p, svcSearchAttrs)
	script := strings.Join(append(slices.Clone([]string(s.Entrypoint)), s.Command...), " ")
	lines := createLineRE.FindAllString(script, -1)
	if len(lines) != 1 {
		t.Fatalf("%s: want one `temporal operator search-attribute create` line, found %d in %q", svcSearchAttrs, len(lines), script)
	}
	got := map[string]string{}
	for _, m := range nameTypeRE.FindAllStringSubmatch(lines[0], -1) {
		got[m[1]] = m[2]
	}
	want := models.SearchAttributeTypes()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s registers %v, want %v (models.SearchAttributeTypes)", svcSearchAttrs, got, want)
	}
	for _, n := range []string{"HierarchyId", "RunStatus", "HierarchyName"} {
		if _, ok := got[n]; !ok {
			t.Errorf("%s does not register %s", svcSearchAttrs, n)
		}
	}
	// The check after create (which makes a rerun succeed) looks for the same names.
	m := checkLoopRE.FindStringSubmatch(script)
	if m == nil {
		t.Fatalf("%s: no `for name in …;` loop checking the attributes", svcSearchAttrs)
	}
	checked := strings.Fields(m[1])
	sort.Strings(checked)
	names := sortedKeys(want)
	if !slices.Equal(checked, names) {
		t.Errorf("%s checks %v after create, want %v", svcSearchAttrs, checked, names)
	}
}

func httpPort(t *testing.T, addr string) uint32 {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("HTTP_ADDR %q: %v", addr, err)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		t.Fatalf("HTTP_ADDR %q: port: %v", addr, err)
	}
	return uint32(n)
}

func publishes(s types.ServiceConfig, published string, target uint32) bool {
	for _, port := range s.Ports {
		if port.Published == published && port.Target == target && (port.Protocol == "" || port.Protocol == "tcp") {
			return true
		}
	}
	return false
}

func TestPorts(t *testing.T) {
	p := loadProject(t, true)
	api := service(t, p, svcAPI)
	listen := httpPort(t, configEnv(t, api).HTTPAddr)
	if !publishes(api, apiPublished, listen) {
		t.Errorf("%s: want port %s published to the container port %d the API listens on (HTTP_ADDR), have %+v", svcAPI, apiPublished, listen, api.Ports)
	}
	if !slices.Contains(exposedPorts(t), strconv.Itoa(int(listen))) {
		t.Errorf("%s does not EXPOSE %d, the port HTTP_ADDR listens on", dockerfile, listen)
	}
	// The worker serves /metrics, /healthz and /readyz on METRICS_ADDR; the
	// port is exposed on the compose network, not published on the host, so
	// the worker can be scaled.
	worker := service(t, p, svcWorker)
	if addr, _ := env(worker, "METRICS_ADDR"); addr != "" && addr != "off" {
		port := strconv.Itoa(int(httpPort(t, addr)))
		if !slices.Contains([]string(worker.Expose), port) {
			t.Errorf("%s: METRICS_ADDR %s, but the service does not expose %s (have %v)", svcWorker, addr, port, worker.Expose)
		}
	}
	if len(worker.Ports) != 0 {
		t.Errorf("%s publishes %+v on the host; a scaled worker would collide", svcWorker, worker.Ports)
	}
	if ui := service(t, p, svcUI); !publishes(ui, uiPublished, uiContainer) {
		t.Errorf("%s: want port %s published to the UI's %d, have %+v", svcUI, uiPublished, uiContainer, ui.Ports)
	}
	// Host ports must not collide.
	seen := map[string]string{}
	for _, name := range p.ServiceNames() {
		for _, port := range p.Services[name].Ports {
			key := port.HostIP + ":" + port.Published
			if other, dup := seen[key]; dup && port.Published != "" {
				t.Errorf("%s and %s both publish %s", other, name, key)
			}
			seen[key] = name
		}
	}
}

func TestStartOrder(t *testing.T) {
	p := loadProject(t, true)
	for _, d := range requiredDependsOn {
		s := service(t, p, d.from)
		dep, ok := s.DependsOn[d.to]
		switch {
		case !ok:
			t.Errorf("%s must depend on %s (condition %s)", d.from, d.to, d.condition)
		case dep.Condition != d.condition:
			t.Errorf("%s depends on %s with condition %q, want %q", d.from, d.to, dep.Condition, d.condition)
		}
	}
	for _, name := range p.ServiceNames() {
		for to, dep := range p.Services[name].DependsOn {
			target, ok := p.Services[to]
			if !ok {
				t.Errorf("%s depends on %s, which is no service", name, to)
				continue
			}
			switch dep.Condition {
			case healthy:
				if hc := target.HealthCheck; hc == nil || hc.Disable || len(hc.Test) == 0 {
					t.Errorf("%s waits for %s to be healthy, but %s has no healthcheck", name, to, to)
				}
			case completed:
				if target.Restart != "" && target.Restart != types.RestartPolicyNo {
					t.Errorf("%s waits for %s to complete, but %s restarts (%q)", name, to, to, target.Restart)
				}
			}
		}
	}
	for _, name := range longRunning {
		if r := service(t, p, name).Restart; r != types.RestartPolicyUnlessStopped && r != types.RestartPolicyAlways {
			t.Errorf("%s: restart %q, want unless-stopped", name, r)
		}
	}
	for _, name := range oneShot {
		if r := service(t, p, name).Restart; r != types.RestartPolicyNo {
			t.Errorf("%s is a one-shot: restart %q, want \"no\"", name, r)
		}
	}
	order, err := startOrder(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("start order: %s", strings.Join(order, " → "))
}

// startOrder sorts the services topologically by depends_on, failing on a cycle.
func startOrder(p *types.Project) ([]string, error) {
	const (
		unvisited = iota
		visiting
		done
	)
	state := map[string]int{}
	var order []string
	var visit func(name string, path []string) error
	visit = func(name string, path []string) error {
		switch state[name] {
		case visiting:
			return fmt.Errorf("depends_on cycle: %s", strings.Join(append(path, name), " → "))
		case done:
			return nil
		}
		state[name] = visiting
		for _, dep := range sortedKeys(p.Services[name].DependsOn) {
			if err := visit(dep, append(path, name)); err != nil {
				return err
			}
		}
		state[name] = done
		order = append(order, name)
		return nil
	}
	for _, name := range p.ServiceNames() {
		if err := visit(name, nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}

func TestStartOrderDetectsCycles(t *testing.T) {
	a, b := types.ServiceConfig{Name: "a"}, types.ServiceConfig{Name: "b"}
	a.DependsOn = types.DependsOnConfig{"b": {Condition: healthy}}
	b.DependsOn = types.DependsOnConfig{"a": {Condition: healthy}}
	p := &types.Project{Services: types.Services{"a": a, "b": b}}
	if _, err := startOrder(p); err == nil {
		t.Error("a cycle went unnoticed")
	}
}

func TestGracefulStop(t *testing.T) {
	p := loadProject(t, true)
	for _, name := range []string{svcAPI, svcWorker} {
		s := service(t, p, name)
		shutdown := configEnv(t, s).ShutdownTimeout
		if s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) <= shutdown {
			t.Errorf("%s: stop_grace_period must exceed SHUTDOWN_TIMEOUT (%s), or Docker kills the process mid-shutdown", name, shutdown)
		}
	}
}

var (
	secretNameRE    = regexp.MustCompile(`(?i)(_API_KEY$|SECRET|TOKEN|PASSWORD|_PWD$|^PASSWORD$)`)
	passwordNameRE  = regexp.MustCompile(`(?i)(PASSWORD|_PWD$)`)
	interpolationRE = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])(.*))?\}$`)
	urlPasswordRE   = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://[^:@/]*:([^@/]*)@`)
	keyLiteralRE    = regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{16,}|\bAKIA[0-9A-Z]{16}\b|\bASIA[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{20,}`)
)

// TestNoHardCodedSecrets reads the file without interpolation: every
// credential must come from the environment. API keys, tokens and AWS
// secrets default to empty; database passwords may default to a local
// development value (the databases are not published on the host).
func TestNoHardCodedSecrets(t *testing.T) {
	p := loadProject(t, false)
	for _, name := range p.ServiceNames() {
		s := p.Services[name]
		for _, k := range sortedKeys(s.Environment) {
			v, _ := env(s, k)
			if m := urlPasswordRE.FindStringSubmatch(v); m != nil && !interpolationRE.MatchString(m[1]) {
				t.Errorf("%s: %s holds a literal password in its URL; use ${VAR:-…}", name, k)
			}
			if !secretNameRE.MatchString(k) {
				continue
			}
			m := interpolationRE.FindStringSubmatch(v)
			if m == nil {
				t.Errorf("%s: %s = %q is hard-coded; it must be an interpolation such as ${%s:-}", name, k, v, k)
				continue
			}
			if op, def := m[2], m[3]; op == "-" || op == ":-" {
				if def != "" && !passwordNameRE.MatchString(k) {
					t.Errorf("%s: %s defaults to a value (%q); secrets other than local database passwords must default to empty", name, k, def)
				}
			}
		}
	}
	for _, file := range []string{composeFile, dockerfile} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if m := keyLiteralRE.Find(b); m != nil {
			t.Errorf("%s contains what looks like a credential: %.8s…", file, m)
		}
	}
}

func TestBindMountsExist(t *testing.T) {
	p := loadProject(t, true)
	for _, name := range p.ServiceNames() {
		for _, v := range p.Services[name].Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("%s: bind mount source %s: %v", name, v.Source, err)
			}
		}
	}
	for _, name := range executorServices {
		if vs := service(t, p, name).Volumes; len(vs) != 0 {
			t.Errorf("%s mounts %+v; the executor keeps no local state in compose (PostgreSQL and Temporal hold it)", name, vs)
		}
	}
}

// A Dockerfile instruction, continuation lines joined and comments dropped.
type instruction struct {
	cmd  string // upper case
	args string
	line int
}

func parseDockerfile(t *testing.T) []instruction {
	t.Helper()
	b, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	var (
		out   []instruction
		cur   strings.Builder
		start int
	)
	for i, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		cont := strings.HasSuffix(trimmed, `\`)
		cur.WriteString(strings.TrimSuffix(trimmed, `\`))
		cur.WriteString(" ")
		if cont {
			continue
		}
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			continue
		}
		cmd, args, _ := strings.Cut(text, " ")
		out = append(out, instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start})
	}
	return out
}

// finalStage returns the instructions after the last FROM, and that FROM.
func finalStage(t *testing.T, ins []instruction) (instruction, []instruction) {
	t.Helper()
	last := -1
	for i, in := range ins {
		if in.cmd == "FROM" {
			last = i
		}
	}
	if last < 0 {
		t.Fatalf("%s has no FROM", dockerfile)
	}
	return ins[last], ins[last+1:]
}

func exposedPorts(t *testing.T) []string {
	_, final := finalStage(t, parseDockerfile(t))
	var ports []string
	for _, in := range final {
		if in.cmd == "EXPOSE" {
			for _, f := range strings.Fields(in.args) {
				ports = append(ports, strings.TrimSuffix(f, "/tcp"))
			}
		}
	}
	return ports
}

func TestDockerfile(t *testing.T) {
	ins := parseDockerfile(t)
	stages := map[string]bool{}
	for _, in := range ins {
		if in.cmd != "FROM" {
			continue
		}
		fields := strings.Fields(in.args)
		var image string
		for _, f := range fields {
			if !strings.HasPrefix(f, "--") {
				image = f
				break
			}
		}
		if stages[image] {
			continue // FROM an earlier stage
		}
		if ok, why := pinned(image); !ok {
			t.Errorf("%s:%d: FROM %s is not pinned: %s", dockerfile, in.line, image, why)
		}
		if n := len(fields); n >= 3 && strings.EqualFold(fields[n-2], "AS") {
			stages[fields[n-1]] = true
		}
	}

	from, final := finalStage(t, ins)
	user := ""
	var entrypoint, copied string
	for _, in := range final {
		switch in.cmd {
		case "USER":
			user = in.args
		case "ENTRYPOINT":
			entrypoint = in.args
		case "COPY":
			copied += in.args + "\n"
		}
	}
	name, _, _ := strings.Cut(user, ":")
	if uid, err := strconv.Atoi(name); err == nil {
		if uid == 0 {
			t.Errorf("%s: the final stage runs as uid 0", dockerfile)
		}
	} else if name == "" || name == "root" {
		t.Errorf("%s: the final stage (FROM %s) sets no non-root USER (have %q); want USER nonroot or a non-zero uid", dockerfile, from.args, user)
	}
	if entrypoint != `["/executor"]` {
		t.Errorf(`%s: ENTRYPOINT %s, want ["/executor"]`, dockerfile, entrypoint)
	}
	if !strings.Contains(copied, "/executor") {
		t.Errorf("%s: the final stage does not copy the binary to /executor", dockerfile)
	}
	// A distroless/static base has no libc: the binary must be static.
	var build string
	for _, in := range ins {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			build = in.args
		}
	}
	if strings.Contains(from.args, "distroless/static") && !strings.Contains(build, "CGO_ENABLED=0") {
		t.Errorf("%s: go build needs CGO_ENABLED=0 for the distroless/static base (have %q)", dockerfile, build)
	}
	if !strings.Contains(build, "./cmd/executor") {
		t.Errorf("%s: go build does not build ./cmd/executor (have %q)", dockerfile, build)
	}
}

var (
	goDirectiveRE = regexp.MustCompile(`(?m)^go (\d+(?:\.\d+)*)\s*$`)
	golangImageRE = regexp.MustCompile(`^golang:(\d+\.\d+\.\d+)`)
)

// TestGoVersion: the build image's Go must be at least go.mod's go line
// (the Dockerfile sets GOTOOLCHAIN=local, so it never downloads a newer one).
func TestGoVersion(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := goDirectiveRE.FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	need := string(m[1])
	var have string
	for _, in := range parseDockerfile(t) {
		if in.cmd == "FROM" {
			if mm := golangImageRE.FindStringSubmatch(strings.Fields(in.args)[0]); mm != nil {
				have = mm[1]
			}
		}
	}
	if have == "" {
		t.Fatalf("%s: no FROM golang:x.y.z build stage", dockerfile)
	}
	if compareVersions(have, need) < 0 {
		t.Errorf("%s builds with Go %s, but go.mod needs go %s", dockerfile, have, need)
	}
}

func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x - y
		}
	}
	return 0
}

// TestBuildContext: compose builds from the repository root with
// docker/Dockerfile, and docker/Dockerfile.dockerignore keeps every source
// file the build needs while leaving out VCS state, local data and tests.
func TestBuildContext(t *testing.T) {
	p := loadProject(t, true)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range executorServices {
		b := service(t, p, name).Build
		if b == nil {
			t.Errorf("%s: no build section; the image %s is never pulled, only built", name, executorImage)
			continue
		}
		ctx := b.Context
		if !filepath.IsAbs(ctx) {
			ctx = filepath.Join(p.WorkingDir, ctx)
		}
		if filepath.Clean(ctx) != root {
			t.Errorf("%s: build context %s, want the repository root %s", name, ctx, root)
		}
		if df := filepath.Join(ctx, b.Dockerfile); df != filepath.Join(root, "docker", dockerfile) {
			t.Errorf("%s: dockerfile %s, want docker/%s", name, df, dockerfile)
		}
	}

	patterns := readDockerignore(t)
	var keep []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch rel {
			case ".git", "bin", ".data", "docker":
				return filepath.SkipDir
			}
			return nil
		}
		name := d.Name()
		if (strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")) ||
			(strings.HasPrefix(rel, "store/migrations/") && strings.HasSuffix(name, ".sql")) {
			keep = append(keep, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	keep = append(keep, "go.mod", "go.sum")
	var lost []string
	for _, rel := range keep {
		if ignored(patterns, rel) {
			lost = append(lost, rel)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%s leaves %d files the build needs out of the build context, e.g. %s", dockerignore, len(lost), strings.Join(lost[:min(len(lost), 5)], ", "))
	}
	for _, rel := range []string{".git/HEAD", "bin/executor", "bin/temporal", ".data/executor.db", "e2e.test", "executor", "api/runs_test.go", ".env", "docker/compose.yaml"} {
		if !ignored(patterns, rel) {
			t.Errorf("%s should leave %s out of the build context", dockerignore, rel)
		}
	}
}

type ignorePattern struct {
	re     *regexp.Regexp
	negate bool
}

func readDockerignore(t *testing.T) []ignorePattern {
	t.Helper()
	b, err := os.ReadFile(dockerignore)
	if err != nil {
		t.Fatalf("%s: %v (BuildKit reads it for docker/%s)", dockerignore, err, dockerfile)
	}
	var out []ignorePattern
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		neg := strings.HasPrefix(line, "!")
		line = strings.TrimPrefix(strings.TrimPrefix(line, "!"), "/")
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(line); i++ {
			switch c := line[i]; {
			case strings.HasPrefix(line[i:], "**/"):
				re.WriteString("(?:.*/)?")
				i += 2
			case strings.HasPrefix(line[i:], "**"):
				re.WriteString(".*")
				i++
			case c == '*':
				re.WriteString("[^/]*")
			case c == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(string(c)))
			}
		}
		re.WriteString("$")
		out = append(out, ignorePattern{re: regexp.MustCompile(re.String()), negate: neg})
	}
	return out
}

// ignored applies .dockerignore semantics: a pattern matching a path or
// one of its parent directories excludes it; the last matching pattern wins.
func ignored(patterns []ignorePattern, rel string) bool {
	var candidates []string
	parts := strings.Split(rel, "/")
	for i := range parts {
		candidates = append(candidates, strings.Join(parts[:i+1], "/"))
	}
	out := false
	for _, p := range patterns {
		for _, c := range candidates {
			if p.re.MatchString(c) {
				out = !p.negate
				break
			}
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
