#!/usr/bin/env bash
# scripts/build-revs.sh — builds the shim of earlier commits, for an A/B on the GPU machine beside
# the working tree's (scripts/gpu-ab.sh takes the folders):
#
#   scripts/build-revs.sh DIR NAME=REV [NAME=REV...]
#
# For each NAME=REV: a detached worktree of REV (any git revision) in a temporary folder, the
# shim built there (cargo build --release -p cudaleak-shim, in target/revs/NAME so a later run
# builds only what changed), and its libcudaleak.so stripped of debug information into
# DIR/NAME/. The worktree is removed afterwards; the working tree is not touched. Prints each
# library's path and the commit it was built from.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[[ $# -ge 2 ]] || { echo "usage: build-revs.sh DIR NAME=REV [NAME=REV...]" >&2; exit 2; }
out="$1"
shift
repo="$PWD"
for pair in "$@"; do
    name="${pair%%=*}" rev="${pair#*=}"
    [[ $pair == *=* && -n $name && -n $rev ]] || { echo "build-revs: not NAME=REV: $pair" >&2; exit 2; }
    commit="$(git rev-parse --verify "$rev^{commit}")"
    tree="$(mktemp -d)"
    git worktree add --quiet --detach "$tree" "$commit"
    (cd "$tree" && CARGO_TARGET_DIR="$repo/target/revs/$name" cargo build --release --quiet -p cudaleak-shim) ||
        { git worktree remove --force "$tree"; exit 1; }
    git worktree remove --force "$tree"
    mkdir -p "$out/$name"
    strip --strip-debug -o "$out/$name/libcudaleak.so" "target/revs/$name/release/libcudaleak.so"
    echo "$out/$name/libcudaleak.so ${commit:0:12}"
done
