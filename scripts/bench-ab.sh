#!/usr/bin/env bash
# scripts/bench-ab.sh A B [ROW...]: measure two commits alternately on this
# machine. Each commit's tree (git archive) is built into its own binary;
# the deployment of each round runs that binary (scripts/bench.sh, BENCH_TARGET
# as there), while the load generator is always this tree's `executor bench`,
# so both are measured the same way. Rounds alternate A B, B A, A B, …
# (BENCH_ROUNDS, default 3), so drift of a busy machine falls on both; the
# end prints each row's per-round values with their median and range
# (`executor bench compare`). Reports stay in BENCH_OUT (default a temporary
# directory, printed).
set -euo pipefail

a=${1:?usage: scripts/bench-ab.sh A B [ROW...]}
b=${2:?usage: scripts/bench-ab.sh A B [ROW...]}
shift 2
rows=("$@")
rounds=${BENCH_ROUNDS:-3}
go=${GO:-go}
out=${BENCH_OUT:-$(mktemp -d -t executor-bench-ab-XXXXXX)}
work=$(mktemp -d -t executor-bench-ab-build-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

ha=$(git rev-parse --short "$a")
hb=$(git rev-parse --short "$b")
echo "bench-ab: A = $a ($ha), B = $b ($hb), $rounds rounds, reports in $out"

build() { # commit → binary path
	local commit=$1 dir="$work/src-$1"
	mkdir -p "$dir"
	git archive "$commit" | tar -x -C "$dir"
	(cd "$dir" && nice "$go" build -o "$work/executor-$commit" ./cmd/executor)
	echo "$work/executor-$commit"
}
bin_a=$(build "$ha")
bin_b=$(build "$hb")
driver="$work/executor-driver"
nice "$go" build -o "$driver" ./cmd/executor

for r in $(seq "$rounds"); do
	if [ $((r % 2)) -eq 1 ]; then order=("$ha" "$hb"); else order=("$hb" "$ha"); fi
	for h in "${order[@]}"; do
		bin=$bin_a
		[ "$h" = "$hb" ] && bin=$bin_b
		echo
		echo "=== round $r: $h"
		BENCH_DRIVER="$driver" BENCH_OUT="$out/$h-r$r" ./scripts/bench.sh "$bin" "${rows[@]}" || echo "bench-ab: round $r of $h failed (kept in the comparison)" >&2
	done
done

echo
echo "=== A = $ha, B = $hb: every round's value, median [min–max]"
"$driver" bench compare "$out" "$ha" "$hb"
