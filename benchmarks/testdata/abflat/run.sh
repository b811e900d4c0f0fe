#!/bin/bash
# run.sh A B [runs] [rounds]: flat Go of two builds of the executor in one
# process, A and B in alternating chunks of a million tasks (and the fixed
# pool after each pair), so that the machine's drift hits both alike.
# A and B are commits, or WT for the working tree. Each run prints the total
# ns/task of A, B and the fixed pool, B/A, and the medians over rounds of
# A/fixed and B/fixed. GOMAXPROCS applies as usual.
#
# The two builds must not be one module twice: each is copied, with its
# tests left out, to a module of its own (ab/a, ab/b), and main.go.txt is
# built against both. Needs git and Go; writes only under a temp dir.
set -e
A=$1; B=$2; RUNS=${3:-5}; ROUNDS=${4:-20}
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; git -C "$repo" worktree prune' EXIT
copy() { # copy <commit|WT> <name>
	local src=$repo
	if [ "$1" != WT ]; then
		src=$tmp/wt-$2
		git -C "$repo" worktree add -f --detach "$src" "$1" >/dev/null 2>&1
	fi
	local dst=$tmp/mod/$2
	mkdir -p "$dst"
	cp "$src/go.mod" "$src/go.sum" "$dst/"
	for d in executor policy internal breaker clock; do cp -r "$src/$d" "$dst/"; done
	find "$dst" -name '*_test.go' -delete
	rm -rf "$dst"/*/testdata
	sed -i "s#^module .*#module ab/$2#" "$dst/go.mod"
	grep -rl "github.com/groupexec/groupexec/" "$dst" --include='*.go' | xargs sed -i "s#github.com/groupexec/groupexec/#ab/$2/#g"
	if [ "$1" != WT ]; then git -C "$repo" worktree remove --force "$src"; fi
}
copy "$A" a
copy "$B" b
mkdir -p "$tmp/main"
cp "$(dirname "$0")/main.go.txt" "$tmp/main/main.go"
cat > "$tmp/main/go.mod" <<MOD
module abmain

go 1.26.0

require (
	ab/a v0.0.0
	ab/b v0.0.0
)

replace ab/a => $tmp/mod/a

replace ab/b => $tmp/mod/b
MOD
(cd "$tmp/main" && go build -o abmain .)
for _ in $(seq 1 "$RUNS"); do "$tmp/main/abmain" "$ROUNDS"; done
