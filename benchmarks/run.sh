#!/usr/bin/env bash
# Makes the raw outputs in results/, one file per workload, from one test
# binary, then the charts (go run ./cmd/benchplot).
#
#   benchmarks/run.sh                       # every workload, GOMAXPROCS 1 and 2
#   CPUS=2,8,16 benchmarks/run.sh server    # one workload, more cores
#   BIN=./bench.test OUT=/tmp/res benchmarks/run.sh   # a prebuilt binary (a machine without Go)
#
# CPUS is the -cpu list (GOMAXPROCS values), COUNT the -count (runs of each
# benchmark, for medians), BENCHTIME the -benchtime of the workloads timed
# per op. ROUNDS runs the whole workload that many times, one after the
# other, into one file: on a shared, noisy machine ROUNDS=5 COUNT=1
# interleaves the contenders, so that a slow minute does not fall on one of
# them only. The isolation workload runs whole experiments, ISOLATION_RUNS of
# them; waiting memory is measured at GOMAXPROCS 2 only (it is bytes).
# The cluster (cluster_contention_test.go, needs redis-server), adapters
# and gateway workloads have commands of their own (README.md).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

CPUS=${CPUS:-1,2}
COUNT=${COUNT:-5}
ROUNDS=${ROUNDS:-1}
BENCHTIME=${BENCHTIME:-300ms}
ISOLATION_RUNS=${ISOLATION_RUNS:-20x}
OUT=${OUT:-results}
BIN=${BIN:-}
if [[ -z "$BIN" ]]; then
	BIN=$(mktemp -d)/bench.test
	go test -c -o "$BIN" .
fi
mkdir -p "$OUT"

# workload: file name, then the -bench pattern
declare -A pattern=(
	[work]='^BenchmarkWork$'
	[server]='^BenchmarkServer$'
	[overload]='^BenchmarkOverload$'
	[submitters]='^BenchmarkGroupedSubmitters$'
	[flatwork]='^BenchmarkFlatWork$'
	[groupedwork]='^BenchmarkGroupedWork$'
	[flat]='^BenchmarkFlat$'
	[grouped]='^BenchmarkGrouped$'
	[isolation]='^BenchmarkIsolation$'
	[memory]='^BenchmarkWaitingMemory$'
	[dispatch]='^BenchmarkDispatch$'
	[shares]='^BenchmarkGroupedShares$'
	[breaker]='^BenchmarkBreaker'
	[bulkhead]='^BenchmarkBulkhead'
)
workloads=("$@")
if [[ ${#workloads[@]} -eq 0 ]]; then
	workloads=(work server overload submitters flatwork groupedwork flat grouped isolation memory dispatch shares breaker bulkhead)
fi

for w in "${workloads[@]}"; do
	p=${pattern[$w]:?unknown workload $w}
	args=(-test.run '^$' -test.bench "$p" -test.benchmem -test.count "$COUNT" -test.timeout 60m)
	case $w in
	isolation) args+=(-test.benchtime "$ISOLATION_RUNS" -test.cpu "$CPUS") ;;
	memory) args+=(-test.cpu 2) ;;
	work) args+=(-test.benchtime "$BENCHTIME" -test.cpu 1) ;; # the work alone, one goroutine
	*) args+=(-test.benchtime "$BENCHTIME" -test.cpu "$CPUS") ;;
	esac
	echo "== $w: $BIN ${args[*]}" >&2
	{
		echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -m), $(nproc) CPUs: ${BIN##*/} ${args[*]}$([[ $ROUNDS == 1 ]] || echo ", $ROUNDS rounds")"
		for ((r = 0; r < ROUNDS; r++)); do
			"$BIN" "${args[@]}"
		done
	} >"$OUT/$w.txt"
done

if [[ "$OUT" == results ]] && command -v go >/dev/null; then
	go run ./cmd/benchplot
fi
