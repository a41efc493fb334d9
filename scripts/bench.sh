#!/usr/bin/env bash
# scripts/bench.sh EXECUTOR [ROW...]: issue 28's rows measured with
# `executor bench` from outside, against a deployment this script starts
# with the binary EXECUTOR and stops at the end (docs/performance.md).
#
# Rows (all by default):
#   sequential  overhead per LLM call: 12 sequential runs (+2 warm-up), zero-delay model
#   stream20    20 concurrent streaming runs, 60 tokens x 20 ms per answer
#   scale100    100 concurrent runs, first token after 300 ms, then 40 tokens x 25 ms
#
# The deployment (BENCH_TARGET):
#   dev      (default) `executor dev` on free ports, a fresh DATA_DIR, the
#            fake model as its COMPATIBLE_BASE_URL, RATE_LIMIT_RPS=0 and
#            MAX_CONCURRENT_RUNS_PER_TENANT=0; CPU of it and its Temporal dev server
#   cluster  `executor serve`: 1 API and BENCH_WORKERS (2) worker processes on
#            the Temporal server of `make cluster` (BENCH_TEMPORAL_ADDRESS,
#            default 127.0.0.1:7333), application database BENCH_DATABASE_URL
#            (default the cluster's PostgreSQL, database postgres); CPU of
#            those processes and of the server (pid in BENCH_CLUSTER_PIDFILE,
#            default .data/cluster/server.pid)
#
# BENCH_PEER=1 also runs the peer (bench/peer: LangGraph.js with its PostgreSQL
# checkpointer, database BENCH_PEER_DATABASE_URL, default
# executor_bench_peer on the local PostgreSQL, created when missing) on the
# same fake model after the sequential row: report peer-sequential.json.
#
# Other settings: BENCH_DRIVER (the binary whose `executor bench` measures;
# default EXECUTOR itself, scripts/bench-ab.sh passes its own), TEMPORAL_CLI (dev), BENCH_OUT (directory for each row's
# JSON report; default a temporary one, printed), BENCH_FLAGS (more flags for
# every `executor bench`). Exits non-zero when a row fails (a run that did
# not complete, a stream that failed its check or lost or doubled a model token).
set -euo pipefail

exe=${1:?usage: scripts/bench.sh EXECUTOR [ROW...]}
shift
driver=${BENCH_DRIVER:-$exe}
rows=("$@")
[ ${#rows[@]} -gt 0 ] || rows=(sequential stream20 scale100)
target=${BENCH_TARGET:-dev}
out=${BENCH_OUT:-$(mktemp -d -t executor-bench-XXXXXX)}
mkdir -p "$out"

# freeport prints a TCP port on 127.0.0.1 that nothing answers on.
freeport() {
	local p
	for _ in $(seq 50); do
		# Below the kernel's ephemeral range (32768–60999), where a client
		# connection may hold a port nothing listens on.
		p=$((20000 + RANDOM % 12000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	echo "no free port found" >&2
	return 1
}

data=$(mktemp -d -t executor-bench-data-XXXXXX)
api_port=$(freeport)
model_port=$(freeport)
model_url="http://127.0.0.1:$model_port/v1"
url="http://127.0.0.1:$api_port"
pids=()

cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$data"
}
trap cleanup EXIT

common_env=(
	"COMPATIBLE_BASE_URL=$model_url"
	"RATE_LIMIT_RPS=0"
	"MAX_CONCURRENT_RUNS_PER_TENANT=0"
	"LOG_LEVEL=warn"
	"AUTH_MODE=off"
)

measured=""
case "$target" in
dev)
	env "${common_env[@]}" HTTP_ADDR="127.0.0.1:$api_port" TEMPORAL_DEV_PORT="$(freeport)" TEMPORAL_UI_PORT="$(freeport)" \
		DATA_DIR="$data" TEMPORAL_CLI="${TEMPORAL_CLI:-./bin/temporal}" \
		"$exe" dev >"$data/service.log" 2>&1 &
	pids+=($!)
	measured="--pids ${pids[0]}"
	;;
cluster)
	temporal_address=${BENCH_TEMPORAL_ADDRESS:-127.0.0.1:7333}
	db=${BENCH_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
	queue="bench-$(date +%s)-$RANDOM"
	cluster_env=("${common_env[@]}" "TEMPORAL_ADDRESS=$temporal_address" "TEMPORAL_TASK_QUEUE=$queue" "DATABASE_URL=$db" "DATA_DIR=$data")
	env "${cluster_env[@]}" "$exe" migrate >"$data/migrate.log" 2>&1 || { cat "$data/migrate.log" >&2; exit 1; }
	env "${cluster_env[@]}" HTTP_ADDR="127.0.0.1:$api_port" "$exe" serve -role api >"$data/api.log" 2>&1 &
	pids+=($!)
	for i in $(seq "${BENCH_WORKERS:-2}"); do
		env "${cluster_env[@]}" HTTP_ADDR="127.0.0.1:$(freeport)" "$exe" serve -role worker >"$data/worker-$i.log" 2>&1 &
		pids+=($!)
	done
	all=$(IFS=,; echo "${pids[*]}")
	pidfile=${BENCH_CLUSTER_PIDFILE:-.data/cluster/server.pid}
	if [ -r "$pidfile" ]; then
		all="$all,$(cat "$pidfile")"
	else
		echo "bench: no $pidfile: the Temporal server's CPU is not measured" >&2
	fi
	measured="--pids $all"
	;;
*)
	echo "BENCH_TARGET: want dev or cluster, got $target" >&2
	exit 2
	;;
esac

echo "bench: $target deployment at $url (logs in $data), fake model at $model_url, reports in $out"
for _ in $(seq 240); do
	if curl -fsS "$url/readyz" >/dev/null 2>&1; then
		break
	fi
	if ! kill -0 "${pids[0]}" 2>/dev/null; then
		echo "bench: the deployment exited:" >&2
		tail -40 "$data"/*.log >&2
		exit 1
	fi
	sleep 0.5
done
curl -fsS "$url/readyz" >/dev/null || { echo "bench: $url/readyz never answered" >&2; tail -40 "$data"/*.log >&2; exit 1; }

status=0
for row in "${rows[@]}"; do
	case "$row" in
	sequential) flags="--runs 12 --warmup 2 --concurrency 1 --tokens 1" ;;
	stream20) flags="--runs 20 --concurrency 20 --tokens 60 --token-interval 20ms" ;;
	scale100) flags="--runs 100 --concurrency 100 --model-delay 300ms --tokens 40 --token-interval 25ms" ;;
	*)
		echo "bench: unknown row $row (sequential, stream20, scale100)" >&2
		exit 2
		;;
	esac
	echo
	echo "== $row: executor bench $flags"
	# shellcheck disable=SC2086 # flags are words
	if ! "$driver" bench --url "$url" --model-listen "127.0.0.1:$model_port" $flags $measured ${BENCH_FLAGS:-} -o json >"$out/$row.json" 2>"$out/$row.err"; then
		status=1
		cat "$out/$row.err" >&2
	fi
	# The table, from the JSON report.
	"$driver" bench report "$out/$row.json" || status=1
	if [ "$row" = sequential ] && [ "${BENCH_PEER:-}" = 1 ]; then
		peer_db=${BENCH_PEER_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/executor_bench_peer?sslmode=disable}
		if [ -z "${BENCH_PEER_DATABASE_URL:-}" ] && command -v psql >/dev/null; then
			psql "postgres://postgres@127.0.0.1:5432/postgres" -tAc "select 1 from pg_database where datname='executor_bench_peer'" | grep -q 1 ||
				psql -q "postgres://postgres@127.0.0.1:5432/postgres" -c "create database executor_bench_peer"
		fi
		[ -d bench/peer/node_modules ] || (cd bench/peer && npm ci --no-audit --no-fund >/dev/null)
		"$driver" bench --model-only --model-listen "127.0.0.1:$model_port" --tokens 1 2>/dev/null &
		fake=$!
		sleep 1
		echo
		echo "== peer-sequential: node bench/peer/peer.mjs --runs 12 --warmup 2"
		if node bench/peer/peer.mjs --model-url "$model_url" --pg "$peer_db" --runs 12 --warmup 2 --json >"$out/peer-sequential.json"; then
			jq -r '"peer: overhead per LLM call p50 \(.overhead_per_call_ms.p50 | .*10|round/10) ms [\(.overhead_per_call_ms.min | .*10|round/10)–\(.overhead_per_call_ms.max | .*10|round/10)], run wall p50 \(.run_wall_ms.p50 | round) ms"' "$out/peer-sequential.json" 2>/dev/null || cat "$out/peer-sequential.json"
		else
			status=1
		fi
		kill "$fake" 2>/dev/null || true
		wait "$fake" 2>/dev/null || true
	fi
done
exit $status
