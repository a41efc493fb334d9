#!/usr/bin/env bash
# Runs a long command and says it is still going: a line every 15 s, then
# how long it took. The Makefile wraps the first, slow builds in it (module
# downloads and compiles print nothing for minutes otherwise).
#
#   scripts/progress.sh "what it does" command args...
set -uo pipefail
what="$1"; shift
start=$(date +%s)
"$@" &
pid=$!
(
  i=0
  while sleep 1; do
    kill -0 "$pid" 2>/dev/null || exit 0
    i=$((i + 1))
    [ $((i % 15)) -eq 0 ] && echo "  ... still $what (${i}s)" >&2
  done
) &
ticker=$!
wait "$pid"
rc=$?
kill "$ticker" 2>/dev/null
wait "$ticker" 2>/dev/null
if [ $rc -ne 0 ]; then
  echo "$what failed (exit $rc)" >&2
  exit $rc
fi
elapsed=$(($(date +%s) - start))
[ $elapsed -ge 15 ] && echo "  done $what (${elapsed}s)" >&2
exit 0
