#!/usr/bin/env bash
# Stops the Temporal server `make cluster` started (its pid file under
# CLUSTER_DIR). Its databases stay: the next `make cluster` reuses them.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${CLUSTER_DIR:-$PWD/.data/cluster}"
pidfile="$DIR/server.pid"
if [ ! -f "$pidfile" ]; then
  echo "cluster: not running (no $pidfile)" >&2
  exit 0
fi
pid=$(cat "$pidfile")
if kill -0 "$pid" 2>/dev/null; then
  kill -TERM "$pid"
  for _ in $(seq 1 30); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "cluster: server $pid ignored SIGTERM for 30s; killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  echo "cluster: stopped server $pid" >&2
else
  echo "cluster: server $pid was not running" >&2
fi
rm -f "$pidfile"
