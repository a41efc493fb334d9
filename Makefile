# op-stack-executor. The two commands a fresh machine needs:
#   make run    the service on embedded defaults (Temporal dev server + Web UI, SQLite)
#   make test   every test
TEMPORAL_CLI_VERSION := v1.5.1
BIN        := $(CURDIR)/bin
TEMPORAL   := $(BIN)/temporal
TEMPORAL_STAMP := $(BIN)/.temporal-$(TEMPORAL_CLI_VERSION)
EXECUTOR   := $(BIN)/executor
GO         ?= go

export TEMPORAL_CLI := $(TEMPORAL)

.PHONY: run build test test-short bench bench-ab bench-peer bench-go migrate temporal-cli browser fmt vet clean cluster cluster-stop cluster-test

## run: build and start `executor dev` (HTTP API on :8080, Temporal Web UI on :8233)
run: temporal-cli build
	$(EXECUTOR) dev

## build: build the executor binary into ./bin (the first time, with a cold module cache, it downloads
##   the modules and compiles them: minutes, with a line every 15 s)
build:
	@echo "building ./bin/executor (the first time: downloads and compiles its modules, a few minutes)..."
	@./scripts/progress.sh "downloading and compiling the executor" $(GO) build -o $(EXECUTOR) ./cmd/executor

## test: every test (unit, API over HTTP on SQLite and PostgreSQL, workflows, end-to-end against a dev
##   server, the web console in headless Chromium, the import layering in internal/layering)
##   Without TEST_DATABASE_URL or Chromium those layers are skipped, and it says so before and after.
test: temporal-cli
	-@$(MAKE) --no-print-directory browser
	@./scripts/test-layers.sh before
	$(GO) vet ./...
	@rc=0; $(GO) test -count=1 -timeout 25m ./... || rc=$$?; ./scripts/test-layers.sh after; exit $$rc

## browser: Debian's chromium for the console's browser test (e2e/console_test.go), installed with
##   apt-get when missing; that needs root (CI runs as root)
browser:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" != 0 ]; then \
	    echo "make browser: chromium is missing; install it as root: apt-get update && apt-get install chromium" >&2; exit 1; \
	  fi; \
	  echo "make browser: installing Debian's chromium for the console's browser test (about a minute)"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium; \
	fi

## test-short: the tests that need neither a dev server nor PostgreSQL
test-short:
	$(GO) test -count=1 -short ./...

## bench: issue 28's rows measured from outside with `executor bench` (scripts/bench.sh): sequential
##   overhead, 20 concurrent streaming runs, 100 concurrent runs, each stream checked against the stored
##   log, against an `executor dev` the target starts (BENCH_TARGET=cluster: `executor serve`, 1 API and
##   2 workers, on `make cluster`'s server); BENCH_ROWS picks rows; figures in docs/performance.md
BENCH_ROWS ?= sequential stream20 scale100
bench: temporal-cli build
	./scripts/bench.sh $(EXECUTOR) $(BENCH_ROWS)

## bench-ab: alternate two commits' binaries round by round (BENCH_A, BENCH_B: commits, default HEAD~1
##   and HEAD; BENCH_ROUNDS, default 3) and print every row's per-round values and spread
BENCH_A ?= HEAD~1
BENCH_B ?= HEAD
BENCH_ROUNDS ?= 3
bench-ab: temporal-cli
	BENCH_ROUNDS=$(BENCH_ROUNDS) ./scripts/bench-ab.sh $(BENCH_A) $(BENCH_B) $(BENCH_ROWS)

## bench-peer: the sequential row and the peer (bench/peer: LangGraph.js 1.x with its PostgreSQL
##   checkpointer, on the same fake model) one after the other, BENCH_ROUNDS times
bench-peer: temporal-cli build
	for r in $$(seq $(BENCH_ROUNDS)); do BENCH_PEER=1 ./scripts/bench.sh $(EXECUTOR) sequential || exit 1; done

## bench-go: the in-process Go benchmarks (e2e/*bench*: fake LLM and API in the test process, for
##   profiling with -cpuprofile), about 15 minutes on 2 cores; BENCH_TEMPORAL_ADDRESS=host:port runs
##   each once more on that server (server=external)
bench-go: temporal-cli
	$(GO) test -run '^$$' -bench 'OrchestrationOverhead' -benchtime 12x -timeout 60m ./e2e/
	$(GO) test -run '^$$' -bench 'StreamLatency|HistoryPerToken|QueriesPerSubscriber' -benchtime 5x -timeout 60m ./e2e/
	$(GO) test -run '^$$' -bench 'ConcurrentRuns|LongRun' -benchtime 1x -timeout 60m ./e2e/

## migrate: apply database migrations to DATABASE_URL (or the embedded SQLite)
migrate: build
	$(EXECUTOR) migrate

## temporal-cli: build the pinned temporal CLI from the Go module proxy into ./bin, once
temporal-cli: $(TEMPORAL_STAMP)

# The first build compiles the temporal CLI and the Temporal server it embeds:
# about 2-3 minutes on 2 cores, once. A line every 15 s says it is still going.
$(TEMPORAL_STAMP):
	@mkdir -p $(BIN)
	@echo "building the temporal CLI $(TEMPORAL_CLI_VERSION) into ./bin (first time only: about 2-3 minutes)..."
	@start=$$(date +%s); \
	( i=0; while sleep 1; do i=$$((i+1)); [ $$((i % 15)) -eq 0 ] && echo "  ... still downloading and compiling the temporal CLI ($${i}s)"; done ) & ticker=$$!; \
	GOBIN=$(BIN) $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_CLI_VERSION); rc=$$?; \
	kill $$ticker 2>/dev/null; \
	if [ $$rc -ne 0 ]; then echo "building the temporal CLI failed"; exit $$rc; fi; \
	echo "temporal CLI ready: ./bin/temporal ($$(( $$(date +%s) - start ))s)"
	@rm -f $(BIN)/.temporal-v* && touch $@

## cluster: a real Temporal server (PostgreSQL at CLUSTER_DATABASE_URL, frontend 127.0.0.1:7333) and its
##   Web UI (http://127.0.0.1:8333) in the background, built once into ./bin; namespace and search
##   attributes registered, a database for `executor serve` created (docs/cluster.md)
TEMPORAL_SERVER_VERSION := v1.29.1
TEMPORAL_SERVER_STAMP := $(BIN)/.temporal-server-$(TEMPORAL_SERVER_VERSION)

# The Temporal Web UI for that server: github.com/temporalio/ui-server/v2 from the module proxy, the
# version the pinned temporal CLI embeds in its dev server (so both paths show the same UI), built into
# ./bin/ui/server (its command is named server, like the Temporal server's).
TEMPORAL_UI_VERSION := v2.42.1
TEMPORAL_UI_STAMP := $(BIN)/.temporal-ui-$(TEMPORAL_UI_VERSION)

cluster: temporal-cli $(TEMPORAL_SERVER_STAMP) $(TEMPORAL_UI_STAMP)
	BIN=$(BIN) TEMPORAL_SERVER_VERSION=$(TEMPORAL_SERVER_VERSION) ./cluster/setup.sh

$(TEMPORAL_UI_STAMP):
	@mkdir -p $(BIN)/ui
	@echo "cluster: building the Temporal Web UI (github.com/temporalio/ui-server/v2 $(TEMPORAL_UI_VERSION)) into ./bin/ui, once: about 3 minutes"
	@GOBIN=$(BIN)/ui ./scripts/progress.sh "building the Temporal Web UI" $(GO) install github.com/temporalio/ui-server/v2/cmd/server@$(TEMPORAL_UI_VERSION)
	@rm -f $(BIN)/.temporal-ui-v* && touch $@

$(TEMPORAL_SERVER_STAMP):
	BIN=$(BIN) GO=$(GO) TEMPORAL_SERVER_VERSION=$(TEMPORAL_SERVER_VERSION) ./cluster/build.sh
	@rm -f $(BIN)/.temporal-server-v* && touch $@

## cluster-stop: stop the server and Web UI `make cluster` started (its databases stay; the settings it
##   used are read from .data/cluster.env)
cluster-stop:
	./cluster/stop.sh

## cluster-test: the cluster layer: two API and two worker processes of `executor serve` on that server
##   (the address, port and directory `make cluster` used, from .data/cluster.env)
cluster-test: cluster
	set -a && . ./.data/cluster.env && set +a && \
	  $(GO) test -tags cluster -count=1 -timeout 20m -v ./clustertest/

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	$(GO) vet ./...

clean:
	rm -rf $(BIN) .data
