#!/usr/bin/env bash
# Says which layers of `make test` run and which are skipped, and why:
# called before the tests and again after them (so the news is not lost
# above the test output). Without PostgreSQL or Chromium the tests of that
# layer skip themselves (t.Skip) outside CI; under CI=true they fail.
#
#   scripts/test-layers.sh before|after
set -uo pipefail
when="${1:-before}"
skipped=()

chromium=""
if [ -n "${CHROMIUM_PATH:-}" ]; then
  chromium="$CHROMIUM_PATH"
else
  for p in /usr/bin/chromium /usr/bin/chromium-browser; do
    [ -x "$p" ] && chromium="$p" && break
  done
  [ -z "$chromium" ] && chromium="$(command -v chromium 2>/dev/null || true)"
fi

line() { printf '  %-52s %s\n' "$1" "$2" >&2; }

if [ "$when" = before ]; then
  echo "make test: test layers" >&2
  line "unit, API over HTTP on SQLite, workflows, replays" "run"
  line "end-to-end against a Temporal dev server" "run (${TEMPORAL_CLI:-./bin/temporal})"
fi
if [ -n "${TEST_DATABASE_URL:-}" ]; then
  [ "$when" = before ] && line "store and API on PostgreSQL" "run (TEST_DATABASE_URL)"
else
  skipped+=("store and API on PostgreSQL: TEST_DATABASE_URL is not set (e.g. TEST_DATABASE_URL='postgres://postgres@127.0.0.1:5432/test?sslmode=disable'; the tests create their own databases)")
fi
if [ -n "$chromium" ]; then
  [ "$when" = before ] && line "web console in headless Chromium" "run ($chromium)"
else
  skipped+=("web console in headless Chromium: no chromium (\`make browser\` as root installs Debian's, or set CHROMIUM_PATH)")
fi

if [ ${#skipped[@]} -gt 0 ]; then
  echo "" >&2
  echo "************************************************************************" >&2
  echo "make test: ${#skipped[@]} test layer(s) SKIPPED$([ "$when" = after ] && echo " in this run"):" >&2
  for s in "${skipped[@]}"; do echo "  SKIPPED  $s" >&2; done
  echo "The full suite needs PostgreSQL and Chromium (README, Tests)." >&2
  echo "************************************************************************" >&2
  echo "" >&2
elif [ "$when" = after ]; then
  echo "make test: every test layer ran (PostgreSQL and Chromium included)" >&2
fi
exit 0
