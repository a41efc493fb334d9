#!/usr/bin/env bash
# Stops the Temporal server and Web UI `make cluster` started (their pid
# files under CLUSTER_DIR, taken from .data/cluster.env when it is not set,
# so the settings `make cluster` used need not be repeated). Its databases
# stay: the next `make cluster` reuses them.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${CLUSTER_DIR:-}" ] && [ -f .data/cluster.env ]; then
  CLUSTER_DIR="$(sed -n 's/^CLUSTER_DIR=//p' .data/cluster.env)"
  CLUSTER_DIR="$(eval "printf '%s' $CLUSTER_DIR")" # undo printf %q
fi
DIR="${CLUSTER_DIR:-$PWD/.data/cluster}"

# stop NAME PIDFILE: SIGTERM, SIGKILL after 30 s.
stop() {
  local name="$1" pidfile="$2" pid
  if [ ! -f "$pidfile" ]; then
    echo "cluster: $name not running (no $pidfile)" >&2
    return 0
  fi
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 1 30); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 1
    done
    if kill -0 "$pid" 2>/dev/null; then
      echo "cluster: $name $pid ignored SIGTERM for 30s; killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
    echo "cluster: stopped $name $pid" >&2
  else
    echo "cluster: $name $pid was not running" >&2
  fi
  rm -f "$pidfile"
}
stop "Web UI" "$DIR/ui.pid"
stop server "$DIR/server.pid"
