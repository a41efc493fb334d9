#!/usr/bin/env bash
# Builds the Temporal server and its sql tool (go.temporal.io/server at
# TEMPORAL_SERVER_VERSION) from the Go module proxy into BIN, printing progress:
# on a cold build cache this takes several minutes on 2 cores.
set -euo pipefail
VERSION="${TEMPORAL_SERVER_VERSION:-v1.29.1}"
BIN="${BIN:-$(cd "$(dirname "$0")/.." && pwd)/bin}"
GO="${GO:-go}"
mkdir -p "$BIN"
echo "cluster: building go.temporal.io/server $VERSION (server, sql tool) into $BIN; minutes on a cold build cache" >&2
start=$(date +%s)
GOBIN="$BIN" "$GO" install "go.temporal.io/server/cmd/server@$VERSION" "go.temporal.io/server/cmd/tools/sql@$VERSION" &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
  for _ in $(seq 1 30); do
    sleep 1
    kill -0 "$pid" 2>/dev/null || break
  done
  kill -0 "$pid" 2>/dev/null && echo "cluster: still building ($(($(date +%s) - start))s)" >&2
done
wait "$pid"
echo "cluster: built $BIN/server and $BIN/sql in $(($(date +%s) - start))s" >&2
