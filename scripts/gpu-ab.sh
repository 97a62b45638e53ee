#!/usr/bin/env bash
# scripts/gpu-ab.sh — the in-process A/B (tests/bench/gpu/ab.cu: rounds alternating recording on
# and off inside one process) under two builds of the shim, to compare them on a GPU machine:
#
#   scripts/gpu-ab.sh BEFORE_DIR AFTER_DIR [RUNS] [ROUNDS]
#
# Each DIR holds a libcudaleak.so (e.g. one built from main, one from a branch, carried to the
# device machine). Builds ab.cu with nvcc (CUDA_HOME or /usr/local/cuda; the default static
# runtime, sm_90), then for each mode (batch, sync) runs `ab MODE ROUNDS` (default 40) RUNS times
# (default 5) under each build, alternating before/after so drift hits both alike, and prints
# every run's ratio (median round recording on / median round off) and the median ratio per
# build and mode as a Markdown table. Writes the table and the raw lines under $OUT when set.
# Asserts nothing. Needs no Rust.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[[ $# -ge 2 ]] || { echo "usage: gpu-ab.sh BEFORE_DIR AFTER_DIR [RUNS] [ROUNDS]" >&2; exit 2; }
before="$(cd "$1" && pwd)/libcudaleak.so"
after="$(cd "$2" && pwd)/libcudaleak.so"
runs="${3:-5}"
rounds="${4:-40}"
cuda="${CUDA_HOME:-/usr/local/cuda}"
work="$(mktemp -d)"
out="${OUT:-$work}"
for so in "$before" "$after"; do
    [[ -f "$so" ]] || { echo "gpu-ab: no $so" >&2; exit 2; }
done
"$cuda/bin/nvcc" -O2 -arch=sm_90 -o "$work/ab" "$repo/tests/bench/gpu/ab.cu" || exit 2

median() { sort -g | awk '{v[NR]=$1} END{if (NR) print v[int((NR+1)/2)]; else print "n/a"}'; }

raw="$out/gpu-ab.raw.txt"
: >"$raw"
for mode in batch sync; do
    for ((i = 1; i <= runs; i++)); do
        for build in before after; do
            so="$before"
            [[ $build == after ]] && so="$after"
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
        for build in before after; do
            sel() { awk -v m="$mode" -v b="$build" -v k="$1" '$1==m && $2==b {for (i=1;i<NF;i++) if ($i==k) print $(i+1)}' "$raw"; }
            ratios="$(sel ratio | tr '\n' ' ')"
            echo "| $mode | $build | $ratios| $(sel ratio | median) | $(sel round_on_s | median) | $(sel round_off_s | median) |"
        done
    done
} | tee "$table"
