#!/usr/bin/env bash
# scripts/build-ablations.sh — builds the shim four ways, for measuring where the recording's
# cost goes on a real driver (docs/performance.md, "Where a pair's cost goes on the GPU"):
#
#   scripts/build-ablations.sh DIR [VARIANT...]
#
# DIR/full      the shim as shipped
# DIR/table     allocations and frees skip the table (stacks still captured)
# DIR/capture   a fixed stack id instead of a capture (the table still kept)
# DIR/both      neither: what is left is entering the hook, the state, the sequence and the clock
#
# or only the VARIANTs named, which may also name experiments not in the shipped build:
#
# DIR/prefetch  a Python capture's replay prefetches its memo and frames first
#               (--cfg cudaleak_prefetch, python/walk.rs PREFETCH)
#
# Each a stripped libcudaleak.so, built with RUSTFLAGS='--cfg cudaleak_ablate="…"' (an ablation)
# or '--cfg cudaleak_prefetch' (the experiment) in a target
# directory of its own (target/ablate-*, so the shipped build is not rebuilt). Only `full` records
# anything useful. Then, on the GPU machine (no Rust needed there):
#
#   OUT=$OUT bash scripts/gpu-ab.sh DIR/full DIR/table DIR/capture DIR/both 8 40
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[[ $# -ge 1 ]] || { echo "usage: build-ablations.sh DIR [VARIANT...]" >&2; exit 2; }
out="$1"
shift
variants=("$@")
[[ ${#variants[@]} -gt 0 ]] || variants=(full table capture both)
for variant in "${variants[@]}"; do
    flags="${RUSTFLAGS:-}"
    case $variant in
        full) ;;
        table | capture | both) flags="$flags --cfg cudaleak_ablate=\"$variant\"" ;;
        prefetch) flags="$flags --cfg cudaleak_prefetch" ;;
        *) echo "build-ablations: unknown variant $variant" >&2; exit 2 ;;
    esac
    CARGO_TARGET_DIR="target/ablate-$variant" RUSTFLAGS="$flags" \
        cargo build --release --quiet -p cudaleak-shim
    mkdir -p "$out/$variant"
    cp "target/ablate-$variant/release/libcudaleak.so" "$out/$variant/"
    strip --strip-debug "$out/$variant/libcudaleak.so"
    echo "$out/$variant/libcudaleak.so"
done
