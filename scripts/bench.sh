#!/usr/bin/env bash
# scripts/bench.sh — the CPU benchmarks (`make bench`): the shim's overhead per alloc+free pair,
# multi-thread throughput and the 1 000 000-live-block scale run, on the null benchmark driver.
# Prints Markdown tables; asserts nothing. `--quick` for a short run. GPU: scripts/gpu-bench.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --release -p cudaleak-shim -p cudaleak-cli -p cudaleak-tests --bin bench
CUDALEAK_SHIM="$PWD/target/release/libcudaleak.so" exec target/release/bench "$@"
