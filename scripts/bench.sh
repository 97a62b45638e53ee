#!/usr/bin/env bash
# scripts/bench.sh — the CPU benchmarks (`make bench`): the shim's overhead per alloc+free pair,
# multi-thread throughput and the 1 000 000-live-block scale run, on the null benchmark driver;
# then the CLI's peak memory per report format (scripts/bench-report.py).
# Prints Markdown tables; asserts nothing. `--quick` for a short run, `--reps N` for more
# repetitions on a busy machine, `--instructions` for instructions per pair counted by valgrind
# instead of times, `--cold` for the batch round's cache misses on a driver that evicts the caches
# at every call (tests/src/bin/bench.rs). GPU: scripts/gpu-bench.sh, scripts/gpu-ab.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --release -p cudaleak-shim -p cudaleak-cli -p cudaleak-tests --bin bench
CUDALEAK_SHIM="$PWD/target/release/libcudaleak.so" target/release/bench "$@"
# The CLI's peak memory in every format on a generated dump of distinct stacks
# (scripts/bench-report.py; --quick: 20 000 blocks instead of 100 000).
blocks=100000
for a in "$@"; do [ "$a" = --quick ] && blocks=20000; done
echo
python3 scripts/bench-report.py --blocks "$blocks"
