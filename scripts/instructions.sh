#!/usr/bin/env bash
# instructions.sh — the machine instructions one iteration of a Go benchmark
# executes, counted by valgrind's callgrind: unlike ns/op and cpu-ns/op, the
# count does not move with the host's speed, so a change of a few hundred
# instructions in a path of 300,000 shows on a busy machine.
#
#   scripts/instructions.sh <package> <benchmark regexp> [function pattern …]
#
# It prints the instructions per iteration of the whole benchmark and, for
# each function pattern (callgrind's --toggle-collect, such as
# '*quota.(*Quota).Admit'), of that function and what it calls: each the
# difference between a run of 500 iterations and one of 1,500, over 1,000,
# so that the program's start and the benchmark's set-up cancel out. The
# garbage collector is off (GOGC=off): its work, which moved the whole by
# tens of thousands between runs, is not counted (what drives it, the
# allocations, -benchmem reports), and two runs agree within 0.5 %. A
# function that can block or be descheduled midway counts what runs
# meanwhile too.
#
# The test binary is built without cgo (valgrind cannot follow cgo's thread
# start) and run with GOMAXPROCS=1 and without asynchronous preemption. Needs
# valgrind (apt-get install -y valgrind); some seconds per run.
set -euo pipefail

if [ $# -lt 2 ]; then
	sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
fi
pkg=$1
bench=$2
shift 2
command -v valgrind >/dev/null || { echo "instructions.sh: needs valgrind" >&2; exit 1; }

bin=$(mktemp -d)/bench.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
CGO_ENABLED=0 go test -c -o "$bin" "$pkg"

# count <iterations> [toggle-collect pattern]: the instructions of a run.
count() {
	local toggle=()
	[ -n "${2:-}" ] && toggle=("--toggle-collect=$2")
	GOGC=off GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null "${toggle[@]}" \
		"$bin" -test.run '^$' -test.bench "$bench" -test.benchtime "${1}x" 2>&1 |
		awk '/I   refs:/ { gsub(",", "", $4); print $4 }'
}

# per <label> [toggle-collect pattern]: the instructions per iteration.
per() {
	local a b
	a=$(count 500 "${2:-}")
	b=$(count 1500 "${2:-}")
	[ -n "$a" ] && [ -n "$b" ] || { echo "instructions.sh: valgrind gave no count (does '$bench' match one benchmark?)" >&2; exit 1; }
	printf '%8d  %s\n' $(((b - a) / 1000)) "$1"
}

echo "instructions per iteration of $bench:"
per "the whole iteration"
for fn in "$@"; do
	per "$fn" "$fn"
done
