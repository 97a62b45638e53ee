#!/usr/bin/env bash
# scripts/gpu-frameworks.sh — framework programs on a real GPU, as users run them: correct
# PyTorch (training, AMP, CUDA graphs) / transformers (training, generation) / JAX / CuPy / numba /
# torchrun programs must pass the gate (exit 0, their caches listed); PyTorch, CuPy and JAX loops
# that keep an array per step must be --growth suspects (JAX's preallocated BFC region hides its
# growth in the default mode), in the default mode and under --exact-pools; plus the host-safety
# checks (Ctrl-C in Python, a dead stderr reader). Run through the device tool:
#
#   CUDALEAK_BIN_DIR=DIR [MODES="default exact"] [BARE=0] [GROWTH=1] scripts/gpu-frameworks.sh
#
# BARE=0 skips the bare runs (their exit status and time). GROWTH=1 also runs every correct
# program under `cudaleak run --growth`, which must pass too (no growth suspect: the false
# positives of the growth gate on real programs).
#
# DIR holds cudaleak and libcudaleak.so. Prints one line per run (program, mode, exit status
# bare and under cudaleak, seconds) and each report; with $OUT set, writes $OUT/frameworks.log
# (everything) and $OUT/framework-dumps.tar.gz.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="${CUDALEAK_BIN_DIR:-$repo/target/release}"
cudaleak="$bin_dir/cudaleak"
fw="$repo/tests/gpu/frameworks"
work="$(mktemp -d)"
log="${OUT:-$work}/frameworks.log"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

exec > >(tee "$log") 2>&1
echo "date: $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'

# run NAME MODE -- CMD...: the program bare, then under `cudaleak run` (MODE: default|exact).
run() {
    local name="$1" mode="$2"; shift 3
    local t0 t1 t2 bare under flags=()
    [[ "$mode" == exact ]] && flags=(--exact-pools)
    t0=$(date +%s%N)
    bare=-
    if [[ "${BARE:-1}" == 1 ]]; then "$@" > /dev/null 2>&1; bare=$?; fi
    t1=$(date +%s%N)
    echo "== $name ($mode)"
    "$cudaleak" run "${flags[@]}" --out "$work/out/$name-$mode" -- "$@"; under=$?
    t2=$(date +%s%N)
    printf 'RESULT %-14s %-7s bare=%-3s cudaleak=%-3s bare_ms=%d cudaleak_ms=%d\n' \
        "$name" "$mode" "$bare" "$under" $(((t1 - t0) / 1000000)) $(((t2 - t1) / 1000000))
}

# growth NAME MODE -- CMD...: `cudaleak run --growth`, as a user runs it (snapshots on the
# shim's auto schedule, a second apart at first, then the growth report of the run).
growth() {
    local name="$1" mode="$2"; shift 3
    local flags=()
    [[ "$mode" == exact ]] && flags=(--exact-pools)
    echo "== $name ($mode) growth"
    "$cudaleak" run --growth "${flags[@]}" --out "$work/out/$name-$mode-growth" -- "$@"
    printf 'RESULT %-14s %-7s growth exit=%s\n' "$name" "$mode" "$?"
}

for mode in ${MODES:-default exact}; do
    run torch_train "$mode" -- python3 "$fw/torch_train.py"
    run bert_train "$mode" -- python3 "$fw/bert_train.py"
    run jax_train "$mode" -- python3 "$fw/jax_train.py"
    run cupy_ok "$mode" -- python3 "$fw/cupy_ok.py"
    run numba_ok "$mode" -- python3 "$fw/numba_ok.py"
    run ddp_gloo "$mode" -- torchrun --nproc_per_node 2 "$fw/ddp_gloo.py"
    run ddp_gloo_leak "$mode" -- torchrun --nproc_per_node 2 "$fw/ddp_gloo.py" leak
    run torch_graphs_amp "$mode" -- python3 "$fw/torch_graphs_amp.py"
    run gpt2_generate "$mode" -- python3 "$fw/gpt2_generate.py"
    if [[ "${GROWTH:-0}" == 1 ]]; then
        growth torch_train "$mode" -- python3 "$fw/torch_train.py"
        growth bert_train "$mode" -- python3 "$fw/bert_train.py"
        growth jax_train "$mode" -- python3 "$fw/jax_train.py"
        growth cupy_ok "$mode" -- python3 "$fw/cupy_ok.py"
        growth numba_ok "$mode" -- python3 "$fw/numba_ok.py"
        growth ddp_gloo "$mode" -- torchrun --nproc_per_node 2 "$fw/ddp_gloo.py"
        growth torch_graphs_amp "$mode" -- python3 "$fw/torch_graphs_amp.py"
        growth gpt2_generate "$mode" -- python3 "$fw/gpt2_generate.py"
    fi
    # Memory kept per step: only a snapshot series shows it.
    growth torch_keep "$mode" -- python3 "$fw/torch_keep.py" 6
    growth cupy_keep "$mode" -- python3 "$fw/cupy_keep.py" 5
    growth jax_keep "$mode" -- python3 "$fw/jax_keep.py" 5
done

# Dumps are kept before the host checks, which a short run may skip.
if [[ -n "${OUT:-}" ]]; then
    tar czf "$OUT/framework-dumps.tar.gz" -C "$work/out" .
fi

[[ "${HOST_CHECKS:-1}" == 1 ]] || exit 0
echo "== host safety"
"$cudaleak" run --out "$work/out/sigint" -- python3 "$fw/torch_sigint.py"
echo "RESULT torch_sigint exit=$?"
# Python ignores SIGPIPE itself, so the check is a CUDA C++ program: stderr to a pipe whose
# reader has gone, stdout (buffered, flushed by exit) to a file.
"${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" -g -arch=sm_90 -o "$work/slow_leak" "$repo/tests/gpu/slow_leak.cu"
{ "$work/slow_leak" 1 2>&1 >"$work/bare.out"; } | true
bare=${PIPESTATUS[0]}
{ CUDALEAK_OUTPUT="$work/out/sigpipe/" LD_PRELOAD="$bin_dir/libcudaleak.so" \
    "$work/slow_leak" 1 2>&1 >"$work/shim.out"; } | true
echo "RESULT sigpipe status=${PIPESTATUS[0]} bare=$bare stdout='$(cat "$work/shim.out")' bare_stdout='$(cat "$work/bare.out")'"
ls "$work/out/sigpipe"

