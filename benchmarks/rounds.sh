#!/usr/bin/env bash
# Runs the executor's service workloads in turn, round after round, from
# prebuilt test binaries (go test -c), for a machine without Go: this
# build's (BIN) and the previous core's (PREV, commit e31d89e's benchmarks,
# whose flat and grouped batches run in the same rounds). One raw output
# per workload in OUT; the previous core's batches share baseline.txt.
#
#   CGO_ENABLED=0 go test -c -ldflags='-s -w' -o /tmp/b/bench.test .
#   (git worktree add /tmp/prev e31d89e; cd /tmp/prev/benchmarks; CGO_ENABLED=0 go test -c -ldflags='-s -w' -o /tmp/b/prev.test .)
#   BIN=/tmp/b/bench.test PREV=/tmp/b/prev.test OUT=/tmp/out CPUS=2,8,16 ./rounds.sh
#
# Interleaving the workloads round by round spreads a slow minute of a
# shared machine over all of them; ratios are taken within a round.
set -u
BIN=${BIN:-./bench.test}; PREV=${PREV:-./prev.test}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
CPUS=${CPUS:-2,8,16}; BT=${BT:-150ms}; ROUNDS=${ROUNDS:-5}
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
run() { # file binary pattern [cpus]
	local f=$OUT/$1.txt c=${4:-$CPUS}
	[ -s "$f" ] || echo "# $(date -u +%FT%H:%MZ) $(uname -m), $(nproc) CPUs ($cpu): ${2##*/} -test.bench $3 -test.benchmem -test.cpu $c -test.benchtime $BT -test.count 1, $ROUNDS rounds interleaved with the other workloads" >"$f"
	"$2" -test.run '^$' -test.bench "$3" -test.benchmem -test.cpu "$c" -test.benchtime "$BT" -test.count 1 -test.timeout 10m 2>&1 | grep -v -e '^goos' -e '^goarch' -e '^pkg' -e '^cpu' -e '^PASS' -e '^ok' >>"$f"
}
for r in $(seq "$ROUNDS"); do
	echo "round $r $(date -u +%T)"
	run server "$BIN" '^BenchmarkServer$'
	run server "$BIN" '^BenchmarkWork$' 1 # the work alone, one goroutine
	run overload "$BIN" '^BenchmarkOverload$'
	run submitters "$BIN" '^BenchmarkGroupedSubmitters$'
	run flatwork "$BIN" '^BenchmarkFlatWork$/^(ours|ours-go|pond|pond-go)$'
	run groupedwork "$BIN" '^BenchmarkGroupedWork$/^(ours|ours-go|pond|pond-go|xsync-global-first)$'
	run flat "$BIN" '^BenchmarkFlat$/^(ours|ours-go|pond-go|fixed)$'
	run baseline "$PREV" '^BenchmarkFlat$/^(ours|ours-go|fixed)$'
	run grouped "$BIN" '^BenchmarkGrouped$/^(ours|ours-go|pond-go|xsync-global-first)$'
	run baseline "$PREV" '^BenchmarkGrouped$/^(ours|ours-go)$'
done
echo "done $(date -u +%T)"
