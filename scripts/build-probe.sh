#!/usr/bin/env bash
# scripts/build-probe.sh — builds the shim with its probe (shim/src/probe.rs): every recorded
# allocation and free timed in parts (the hook's body, the driver's call, the native and Python
# captures, the ring's write, making room in a full ring, the fold), printed on stderr at exit as
#
#   cudaleak probe (pid N): alloc CALLS x NS ns (MS ms); free …; driver …; native …; python …;
#   write …; room …; fold ENTRIES x NS ns (MS ms);
#
# for where a pair's cost goes, and where threads wait, on a machine without a profiler (the GPU
# machine). The timers cost about 20 ns each: compare a probe build's parts with each other, not
# its total with the shipped build's.
#
#   scripts/build-probe.sh DIR
#
# DIR/libcudaleak.so, stripped of debug information, built with RUSTFLAGS='--cfg cudaleak_probe'
# in target/probe (the shipped build is not rebuilt). Carry DIR to the GPU machine and preload it
# as any build (scripts/gpu-ab.sh DIR …, scripts/thread-scaling.sh DIR …).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[[ $# -eq 1 ]] || { echo "usage: build-probe.sh DIR" >&2; exit 2; }
CARGO_TARGET_DIR=target/probe RUSTFLAGS="${RUSTFLAGS:-} --cfg cudaleak_probe" \
    cargo build --release --quiet -p cudaleak-shim
mkdir -p "$1"
cp target/probe/release/libcudaleak.so "$1/"
strip --strip-debug "$1/libcudaleak.so"
echo "$1/libcudaleak.so"
