#!/usr/bin/env bash
# scripts/gpu-bench.sh — GPU overhead of the shim against bare runs of the same binaries, with
# compute-sanitizer's leak check beside them, in one run (run it through the device tool).
#
#   CUDALEAK_BIN_DIR=DIR [SANITIZER_REPS=N] [WORKLOADS="NAME…"] [AB=0] [AB_MODES="NAME…"]
#       scripts/gpu-bench.sh [REPS]
#
# DIR holds libcudaleak.so (default target/release). Builds tests/bench/gpu/*.cu with nvcc
# (CUDA_HOME or /usr/local/cuda; the default static runtime), runs each workload REPS times
# (default 3) bare, under the shim and under `compute-sanitizer --leak-check full`, alternating,
# and prints the medians of each program's own timed loop (`loop_s`) and their ratios to bare,
# as a Markdown table, with the min–max of the bare and cudaleak runs (GPU timings are noisy;
# the spread says how far a ratio can be trusted). compute-sanitizer, being slow, runs only in
# the first SANITIZER_REPS rounds (default: all). WORKLOADS runs only the named workloads; AB=0
# skips the in-process A/B, AB_MODES runs only the named A/B modes. Writes the table and logs
# under $OUT when OUT is set. Asserts nothing.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="${CUDALEAK_BIN_DIR:-$repo/target/release}"
shim="$bin_dir/libcudaleak.so"
reps="${1:-3}"
sanitizer_reps="${SANITIZER_REPS:-$reps}"
cuda="${CUDA_HOME:-/usr/local/cuda}"
nvcc="$cuda/bin/nvcc"
sanitizer="$(command -v compute-sanitizer || echo "$cuda/bin/compute-sanitizer")"
work="$(mktemp -d)"
logs="${OUT:-$work}"
[[ -f "$shim" ]] || { echo "gpu-bench: no $shim (set CUDALEAK_BIN_DIR)" >&2; exit 2; }

for w in alloc_batch alloc_sync kernel_loop ab; do
    "$nvcc" -O2 -arch=sm_90 -o "$work/$w" "$repo/tests/bench/gpu/$w.cu" || exit 2
done

# workload name, command (words), argument
workloads=(
    "alloc_batch|$work/alloc_batch|20"
    "alloc_sync|$work/alloc_sync|5000"
    "kernel_loop|$work/kernel_loop|2000"
    "pytorch_mlp|python3 $repo/tests/bench/gpu/mlp.py|300"
    # What --exact-pools gives PyTorch: every tensor a cudaMallocAsync the shim records, each
    # with its Python frames (bare runs get the same variable).
    "pytorch_mlp_exact|env PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync python3 $repo/tests/bench/gpu/mlp.py|300"
)

# run MODE NAME CMD ARG: prints loop_s, or "failed(rc)"
run() {
    local mode="$1" name="$2" cmd="$3" arg="$4" out rc
    local log="$logs/$name.$mode.log"
    case "$mode" in
        bare) out="$(timeout 600 $cmd "$arg" 2>>"$log")" ;;
        cudaleak) out="$(LD_PRELOAD="$shim" CUDALEAK_OUTPUT="$work/dumps/" CUDALEAK_QUIET=1 \
                         timeout 600 $cmd "$arg" 2>>"$log")" ;;
        sanitizer) out="$(timeout 600 "$sanitizer" --leak-check full --print-limit 5 $cmd "$arg" 2>>"$log")" ;;
    esac
    rc=$?
    echo "$out" >>"$log"
    local s
    s="$(sed -n 's/^loop_s //p' <<<"$out" | tail -1)"
    if [[ $rc -ne 0 || -z "$s" ]]; then echo "failed($rc)"; else echo "$s"; fi
}

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "-"; else print a[int((NR + 1) / 2)]}'; }
spread() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {if (NR > 0) printf "%s–%s", a[1], a[NR]}'; }

{
    echo "# cudaleak GPU benchmarks — $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
    echo "- nvcc: $("$nvcc" --version | sed -n 's/.*release //p')"
    echo "- compute-sanitizer: $("$sanitizer" --version 2>/dev/null | sed -n 's/.*Version //p' | head -1)"
    echo "- PyTorch: $(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null)"
    echo "- medians of $reps runs (compute-sanitizer: $sanitizer_reps) of each program's own timed loop (seconds), alternating modes"
    echo
    echo "| workload | bare (min–max) | cudaleak (min–max) | ratio | compute-sanitizer | ratio |"
    echo "|---|---:|---:|---:|---:|---:|"
} | tee "$logs/gpu-bench.md"

for spec in "${workloads[@]}"; do
    IFS='|' read -r name cmd arg <<<"$spec"
    [[ -z "${WORKLOADS:-}" || " $WORKLOADS " == *" $name "* ]] || continue
    declare -A seen=([bare]="" [cudaleak]="" [sanitizer]="")
    failed_sanitizer=""
    for ((r = 0; r < reps; r++)); do
        for mode in bare cudaleak sanitizer; do
            [[ "$mode" == sanitizer && ( -n "$failed_sanitizer" || $r -ge $sanitizer_reps ) ]] && continue
            v="$(run "$mode" "$name" "$cmd" "$arg")"
            if [[ "$v" == failed* ]]; then
                [[ "$mode" == sanitizer ]] && failed_sanitizer="$v" || seen[$mode]+=" $v"
            else
                seen[$mode]+=" $v"
            fi
        done
    done
    b="$(median <<<"${seen[bare]}")"
    c="$(median <<<"${seen[cudaleak]}")"
    ratio() { awk -v x="$1" -v y="$2" 'BEGIN { if (x + 0 > 0 && y + 0 > 0) printf "%.3fx", y / x; else print "-" }'; }
    if [[ -n "$failed_sanitizer" ]]; then
        s="$failed_sanitizer"; sr="-"
    else
        s="$(median <<<"${seen[sanitizer]}")"; sr="$(ratio "$b" "$s")"
    fi
    echo "| $name | $b ($(spread <<<"${seen[bare]}")) | $c ($(spread <<<"${seen[cudaleak]}")) | $(ratio "$b" "$c") | $s | $sr |" | tee -a "$logs/gpu-bench.md"
    unset seen
done

[[ "${AB:-1}" == 1 ]] || exit 0

# In one process, rounds alternating with recording on and off (cudaleak_set_recording): the
# recording's own cost, free of the drift between separate runs. Three runs of each, medians.
# AB_MODES runs only the named ones.
mlp="$repo/tests/bench/gpu/mlp.py"
exact="env PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync"
ab_modes=(
    "batch|$work/ab batch 40"
    "sync|$work/ab sync 40"
    "kernel|$work/ab kernel 40"
    # PyTorch under --exact-pools' allocator: every tensor a recorded cudaMallocAsync with its
    # Python frames; rounds of 100 (large model) or 200 steps (small model: CPU-bound Python and
    # dispatch, the worst case; its rounds vary by several per cent on a shared host).
    "pytorch_mlp_exact|$exact python3 $mlp 100 4096 ab 40"
    "pytorch_small_exact|$exact python3 $mlp 200 256 ab 40"
)
{
    echo
    echo "In-process A/B under the shim (tests/bench/gpu/ab.cu, tests/bench/gpu/mlp.py ab: 40 rounds alternating recording on/off; ratio of median rounds; three runs):"
    echo
    echo "| workload | round, recording off | round, recording on | ratio (three runs) |"
    echo "|---|---:|---:|---|"
} | tee -a "$logs/gpu-bench.md"
# ab3 LOG ON_KEY OFF_KEY RESULT_KEY CMD…: three runs of CMD under the shim, its output appended
# to LOG; sets ons, offs and results to the values of its ON_KEY, OFF_KEY and RESULT_KEY lines.
ab3() {
    local log="$1" on_key="$2" off_key="$3" result_key="$4" out r
    shift 4
    ons="" offs="" results=""
    for r in 1 2 3; do
        out="$(LD_PRELOAD="$shim" CUDALEAK_OUTPUT="$work/dumps/" CUDALEAK_QUIET=1 timeout 300 "$@" 2>>"$log")"
        echo "$out" >>"$log"
        ons+=" $(sed -n "s/^$on_key //p" <<<"$out")"
        offs+=" $(sed -n "s/^$off_key //p" <<<"$out")"
        results+=" $(sed -n "s/^$result_key //p" <<<"$out")"
    done
}

for spec in "${ab_modes[@]}"; do
    IFS='|' read -r mode cmd <<<"$spec"
    [[ -z "${AB_MODES:-}" || " $AB_MODES " == *" $mode "* ]] || continue
    # shellcheck disable=SC2086 # cmd is words
    ab3 "$logs/ab.$mode.log" round_on_s round_off_s ratio $cmd
    echo "| $mode | $(spread <<<"$offs") s | $(spread <<<"$ons") s | $(median <<<"$results") (${results# }) |" | tee -a "$logs/gpu-bench.md"
done

# One PyTorch tensor's allocation and free under --exact-pools' allocator, from 20 Python frames:
# what the shim adds to each, in nanoseconds (tests/bench/gpu/torch_alloc.py). Three runs.
[[ -z "${AB_MODES:-}" || " $AB_MODES " == *" torch_alloc "* ]] || exit 0
{
    echo
    echo "PyTorch tensor allocation + free (tests/bench/gpu/torch_alloc.py: 20 Python frames, 20 rounds of 20 000 alternating recording on/off; median rounds; three runs):"
    echo
    echo "| per pair, recording off | per pair, recording on | added by the shim (three runs) |"
    echo "|---:|---:|---|"
} | tee -a "$logs/gpu-bench.md"
# shellcheck disable=SC2086 # exact is words
ab3 "$logs/torch_alloc.log" pair_on_ns pair_off_ns added_ns \
    $exact python3 "$repo/tests/bench/gpu/torch_alloc.py" 20
echo "| $(spread <<<"$offs") ns | $(spread <<<"$ons") ns | $(median <<<"$results") ns (${results# }) |" | tee -a "$logs/gpu-bench.md"
