#!/usr/bin/env bash
# instructions.sh — the machine instructions one iteration of a Go benchmark
# executes, counted by valgrind's callgrind: unlike ns/op and cpu-ns/op, the
# count does not move with the host's speed, so a change of a few hundred
# instructions in a path of 200,000 shows on a busy machine.
#
#   scripts/instructions.sh <package> <benchmark regexp> [function regexp …]
#
# It prints the instructions per iteration of the whole benchmark and, for
# each regular expression given, of the functions whose names match it
# (such as 'modelgate/quota\.' for the quota package's, or
# 'state\.\(\*Local\)\.'), their own instructions without what they call
# (callgrind's inclusive counts are unreliable for Go's stacks): each the
# difference between a run of 500 iterations and one of 1,500, over 1,000,
# so that the program's start and the benchmark's set-up cancel out. The
# garbage collector is off (GOGC=off): its work, which moved the whole by
# tens of thousands between runs, is not counted (what drives it, the
# allocations, -benchmem reports), nor is the runtime's sampling of
# allocations for memory profiles (memprofilerate=0: its few samples per
# run, each a walk of the stack, moved a row by a thousand), and two runs
# agree within 0.5 %. Anchor sub-benchmark names ('Bench/^chat$'): a
# regexp also runs the sub-benchmarks it matches part of, or below it.
#
# The test binary is built without cgo (valgrind cannot follow cgo's thread
# start) and run with GOMAXPROCS=1, without asynchronous preemption, and
# without RDTSCP (valgrind cannot decode it, and the runtime reads the clock
# with it on a contended lock, which a busy host makes likely). Needs
# valgrind (apt-get install -y valgrind); some seconds per run.
set -euo pipefail

if [ $# -lt 2 ]; then
	sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
fi
pkg=$1
bench=$2
shift 2
command -v valgrind >/dev/null || { echo "instructions.sh: needs valgrind" >&2; exit 1; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
bin=$out/bench.test
CGO_ENABLED=0 go test -c -o "$bin" "$pkg"

# run <iterations>: a callgrind profile of a run, in $out/<iterations>.
run() {
	GOGC=off GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1,memprofilerate=0,cpu.rdtscp=off valgrind --tool=callgrind --callgrind-out-file="$out/$1" \
		"$bin" -test.run '^$' -test.bench "$bench" -test.benchtime "${1}x" >"$out/$1.log" 2>&1 ||
		{ cat "$out/$1.log" >&2; exit 1; }
	callgrind_annotate --inclusive=no --auto=no --threshold=100 "$out/$1" >"$out/$1.txt" 2>/dev/null
}

# cost <iterations> [regexp]: the whole run's instructions, or the own
# instructions of the functions whose names match.
cost() {
	if [ -z "${2:-}" ]; then
		awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }' "$out/$1.txt"
		return
	fi
	awk -v re="$2" '
		/^ *[0-9,]+ .*:/ {
			name = $0; sub(/ \[[^]]*\]$/, "", name); sub(/^[^:]*:/, "", name)
			if (name ~ re) { n = $1; gsub(",", "", n); sum += n }
		}
		END { printf "%d\n", sum }' "$out/$1.txt"
}

run 500
run 1500
echo "instructions per iteration of $bench:"
printf '%8d  %s\n' $((($(cost 1500) - $(cost 500)) / 1000)) "the whole iteration"
for fn in "$@"; do
	printf '%8d  %s\n' $((($(cost 1500 "$fn") - $(cost 500 "$fn")) / 1000)) "$fn"
done
