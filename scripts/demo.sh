#!/usr/bin/env bash
# scripts/demo.sh — `make demo`: runs cuda-samples/leak_error_path.cu and leak_loop.cu under
# `cudaleak run` and lets it print its report.
#
# On a machine where `nvidia-smi -L` lists a GPU it runs the default (static cudart) builds on
# that GPU. Otherwise it says so in one line and runs the `-cudart shared` builds against the
# null-device CUDA runtime of tests/nullcuda/ (host memory stands in for the GPU; the report is
# the same). Expects `make` to have built target/release/. Never changes anything but
# build/samples/ and ./cudaleak-out/. CUDALEAK_BIN and CUDALEAK_NULLCUDA_DIR override where the
# CLI and the null-device runtime are (tests/tests/samples.rs sets both).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
cudaleak="${CUDALEAK_BIN:-$repo/target/release/cudaleak}"
if [[ ! -x "$cudaleak" ]]; then
    echo "demo: $cudaleak is missing; run 'make' first" >&2
    exit 2
fi

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    flavour=static
    echo "demo: running on $(nvidia-smi -L | head -n 1)"
else
    flavour=shared
    nulldir="${CUDALEAK_NULLCUDA_DIR:-$(cargo run -q --release -p cudaleak-tests --bin nullcuda-dir)}"
    echo "demo: no GPU found (nvidia-smi lists none): running the -cudart shared builds against the null-device CUDA runtime in $nulldir"
    export LD_LIBRARY_PATH="$nulldir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

scripts/build-samples.sh "$flavour" leak_error_path leak_loop

status=0
for sample in leak_error_path leak_loop; do
    echo
    echo "\$ cudaleak run -- build/samples/$flavour/$sample"
    rc=0
    "$cudaleak" run -- "build/samples/$flavour/$sample" || rc=$?
    # 23 is cudaleak's "leaks found": exactly what these two samples are for.
    if [[ $rc -ne 0 && $rc -ne 23 ]]; then
        echo "demo: cudaleak run exited $rc (expected 23, leaks found)" >&2
        status=1
    fi
done
exit $status
