#!/usr/bin/env bash
# Short fuzzing of the API's request decoders and the SSE event encoding
# (api/fuzz_test.go, stream/frame_fuzz_test.go), FUZZTIME (default 3000x: a
# count of inputs) per target and database. A count, not a duration: with a
# duration, Go's fuzzing coordinator can report a bare "context deadline
# exceeded" failure, with no failing input, when the deadline meets a
# worker mid-input on a busy machine (golang/go#75804, seen here on go1.26).
# Their seed corpora (api/testdata/fuzz/, stream/testdata/fuzz/) already run
# with every `go test`; this explores beyond them. A failing input is
# written to <package>/testdata/fuzz/<target>/ and the script fails.
#
# The HTTP targets run once on SQLite alone, then, with TEST_DATABASE_URL
# set, on SQLite and PostgreSQL together (each input on both).
# -fuzzminimizetime 0: results depend on the database's state, so nearly
# every input looks new to the coverage-guided engine, and minimizing each
# would stall the run; a failure is reported as found.
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime="${FUZZTIME:-3000x}"
pg_url="${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}"

run() { # package, target, then environment assignments
  local pkg=$1 target=$2
  shift 2
  echo "fuzz: $pkg $target ($*) for $fuzztime"
  env "$@" go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 0 "$pkg"
}

run ./stream/ FuzzEncodeFrame TEST_DATABASE_URL=
for target in FuzzHierarchyCreate FuzzV1TeamCreate; do
  run ./api/ "$target" TEST_DATABASE_URL=
  run ./api/ "$target" TEST_DATABASE_URL="$pg_url"
done
