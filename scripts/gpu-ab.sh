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
#
# MODES (default "batch sync") may also name the Python path's A/Bs, which need PyTorch and run
# under --exact-pools' allocator (every tensor a recorded cudaMallocAsync with its Python frames):
# `torch_alloc` (tests/bench/gpu/torch_alloc.py: one tensor's allocation and free from 20 Python
# frames; its column is the nanoseconds the shim adds to a pair, not a ratio; `torch_alloc_nopy`
# the same with CUDALEAK_PY_DEPTH=0, so the difference is the Python capture), `small_exact`
# (mlp.py 200 256 ab ROUNDS: the CPU-bound small model) and `mlp_exact` (mlp.py 100 4096 ab
# ROUNDS). The Python modes run with the bootstrap `cudaleak run` gives a Python program on
# PYTHONPATH (python/cudaleak/_sitecustomize.py and _bootstrap.py: the frameworks' counts read,
# the code watcher added on CPython 3.12+ where the build exports it), as users run; BOOTSTRAP=0
# runs them without it.
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

# The bootstrap, laid out as `cudaleak run` writes it (cli/src/bootstrap.rs).
pyenv=()
if [[ ${BOOTSTRAP:-1} != 0 ]]; then
    mkdir -p "$work/py"
    cp "$repo/python/cudaleak/_sitecustomize.py" "$work/py/sitecustomize.py"
    cp "$repo/python/cudaleak/_bootstrap.py" "$work/py/_cudaleak_bootstrap.py"
    pyenv=("PYTHONPATH=$work/py${PYTHONPATH:+:$PYTHONPATH}")
fi

median() { sort -g | awk '{v[NR]=$1} END{if (NR) print v[int((NR+1)/2)]; else print "n/a"}'; }

modes=(${MODES:-batch sync})
exact=(env PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync python3)
bench="$repo/tests/bench/gpu"
# command MODE: the command of one run of MODE
command_of() {
    case "$1" in
        batch | sync | kernel) echo "$work/ab $1 $rounds" ;;
        torch_alloc) echo "${exact[*]} $bench/torch_alloc.py 20 20000 20" ;;
        torch_alloc_nopy) echo "env CUDALEAK_PY_DEPTH=0 ${exact[*]} $bench/torch_alloc.py 20 20000 20" ;;
        small_exact) echo "${exact[*]} $bench/mlp.py 200 256 ab $rounds" ;;
        mlp_exact) echo "${exact[*]} $bench/mlp.py 100 4096 ab $rounds" ;;
        *) echo "gpu-ab: unknown mode $1" >&2; exit 2 ;;
    esac
}
# What a run's line is judged by: a ratio of median rounds, or torch_alloc's added nanoseconds.
result_key() { if [[ $1 == torch_alloc* ]]; then echo added_ns; else echo ratio; fi; }

raw="$out/gpu-ab.raw.txt"
: >"$raw"
for mode in "${modes[@]}"; do
    cmd="$(command_of "$mode")" || exit 2
    for ((i = 1; i <= runs; i++)); do
        for b in "${!sos[@]}"; do
            build="${names[$b]}" so="${sos[$b]}"
            # shellcheck disable=SC2086 # cmd is words
            line="$(cd "$bench" && env "${pyenv[@]}" LD_PRELOAD="$so" \
                CUDALEAK_OUTPUT="$work/dumps/" CUDALEAK_QUIET=1 timeout 300 $cmd 2>>"$out/gpu-ab.stderr.txt" | tr '\n' ' ')"
            echo "$mode $build run=$i $line" | tee -a "$raw"
        done
    done
done

table="$out/gpu-ab.md"
{
    echo "| mode | build | each run (ratio on/off; torch_alloc: ns added a pair) | median | median round on | median round off |"
    echo "|---|---|---|---:|---:|---:|"
    for mode in "${modes[@]}"; do
        key="$(result_key "$mode")" on=round_on_s off=round_off_s
        [[ $mode == torch_alloc* ]] && on=pair_on_ns off=pair_off_ns
        for build in "${names[@]}"; do
            sel() { awk -v m="$mode" -v b="$build" -v k="$1" '$1==m && $2==b {for (i=1;i<NF;i++) if ($i==k) print $(i+1)}' "$raw"; }
            results="$(sel "$key" | tr '\n' ' ')"
            echo "| $mode | $build | $results| $(sel "$key" | median) | $(sel $on | median) | $(sel $off | median) |"
        done
    done
} | tee "$table"
