#!/usr/bin/env bash
# scripts/gpu-ab.sh — the in-process A/B (tests/bench/gpu/ab.cu: rounds alternating recording on
# and off inside one process) under two or more builds of the shim, to compare them on a GPU
# machine:
#
#   scripts/gpu-ab.sh DIR DIR [DIR...] [RUNS] [ROUNDS]
#
# Each DIR holds a libcudaleak.so (e.g. one built from main, one from a branch, carried to the
# device machine). With two, they are named "before" and "after"; with more, by their folders'
# names (scripts/build-ablations.sh makes four). Builds ab.cu with nvcc (CUDA_HOME or
# /usr/local/cuda; the default static runtime, sm_90), then for each mode (batch, sync) runs
# `ab MODE ROUNDS` (default 40) RUNS times (default 5) under each build, taking the builds in
# turn so drift hits all alike, and prints every run's ratio (median round recording on / median
# round off) and the median ratio per build and mode as a Markdown table. Writes the table and
# the raw lines under $OUT when set. Asserts nothing. Needs no Rust.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage="usage: gpu-ab.sh DIR DIR [DIR...] [RUNS] [ROUNDS]"
dirs=()
while [[ $# -gt 0 && ! $1 =~ ^[0-9]+$ ]]; do
    dirs+=("$1")
    shift
done
[[ ${#dirs[@]} -ge 2 && $# -le 2 ]] || { echo "$usage" >&2; exit 2; }
runs="${1:-5}"
rounds="${2:-40}"
names=() sos=()
for dir in "${dirs[@]}"; do
    so="$(cd "$dir" 2>/dev/null && pwd)/libcudaleak.so"
    [[ -f "$so" ]] || { echo "gpu-ab: no $dir/libcudaleak.so" >&2; exit 2; }
    sos+=("$so")
    names+=("$(basename "$dir")")
done
if [[ ${#dirs[@]} -eq 2 ]]; then
    names=(before after)
fi
cuda="${CUDA_HOME:-/usr/local/cuda}"
work="$(mktemp -d)"
out="${OUT:-$work}"
mkdir -p "$out"
"$cuda/bin/nvcc" -O2 -arch=sm_90 -o "$work/ab" "$repo/tests/bench/gpu/ab.cu" || exit 2

median() { sort -g | awk '{v[NR]=$1} END{if (NR) print v[int((NR+1)/2)]; else print "n/a"}'; }

raw="$out/gpu-ab.raw.txt"
: >"$raw"
for mode in batch sync; do
    for ((i = 1; i <= runs; i++)); do
        for b in "${!sos[@]}"; do
            build="${names[$b]}" so="${sos[$b]}"
            line="$(LD_PRELOAD="$so" CUDALEAK_OUTPUT="$work/dumps/" CUDALEAK_QUIET=1 \
                timeout 300 "$work/ab" "$mode" "$rounds" | tr '\n' ' ')"
            echo "$mode $build run=$i $line" | tee -a "$raw"
        done
    done
done

table="$out/gpu-ab.md"
{
    echo "| mode | build | ratios (on/off, each run) | median ratio | median round on (s) | median round off (s) |"
    echo "|---|---|---|---:|---:|---:|"
    for mode in batch sync; do
        for build in "${names[@]}"; do
            sel() { awk -v m="$mode" -v b="$build" -v k="$1" '$1==m && $2==b {for (i=1;i<NF;i++) if ($i==k) print $(i+1)}' "$raw"; }
            ratios="$(sel ratio | tr '\n' ' ')"
            echo "| $mode | $build | $ratios| $(sel ratio | median) | $(sel round_on_s | median) | $(sel round_off_s | median) |"
        done
    done
} | tee "$table"
