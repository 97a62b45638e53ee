#!/usr/bin/env bash
# scripts/gpu-growth.sh — issue 5's GPU check: snapshot series of a leaking CUDA C++ loop and a
# leaking PyTorch loop, then `cudaleak report --growth` on each. Run through the device tool.
#
#   CUDALEAK_BIN_DIR=DIR scripts/gpu-growth.sh [SECONDS]
#
# DIR holds cudaleak and libcudaleak.so. Snapshots every second for SECONDS (default 6).
# With $OUT set, leaves $OUT/growth-dumps.tar.gz (the series, symbolised: report them anywhere).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="${CUDALEAK_BIN_DIR:-$repo/target/release}"
seconds="${1:-6}"
nvcc="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"
work="$(mktemp -d)"
"$nvcc" -g -lineinfo -arch=sm_90 -o "$work/slow_leak" "$repo/tests/gpu/slow_leak.cu" || exit 2
for name in slow_leak torch_slow_leak; do
    case "$name" in
        slow_leak) cmd=("$work/slow_leak" "$seconds") ;;
        torch_slow_leak) cmd=(python3 "$repo/tests/gpu/torch_slow_leak.py" "$seconds") ;;
    esac
    echo "== $name"
    CUDALEAK_SNAPSHOT_INTERVAL=1 "$bin_dir/cudaleak" run --out "$work/out/$name" --exit-code 0 -- "${cmd[@]}" | tail -5
    run_dir="$(ls -d "$work/out/$name"/run-* | tail -1)"
    ls "$run_dir"
    "$bin_dir/cudaleak" report --growth "$run_dir" || true
done
if [[ -n "${OUT:-}" ]]; then
    tar czf "$OUT/growth-dumps.tar.gz" -C "$work/out" .
fi
